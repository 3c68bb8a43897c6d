"""A training job's attempts: what a retry (Snakemake's `retries`, attempt > 1) reads of the attempt before
it, in the phase's resume directory (normgrow.design.execution: the job's own state, not outputs).

A retry resumes a phase only after a *stop* — SIGTERM (a state saved, exit 143) or a kill that left no
error record — and never loses finished work:

- **finished record** (`resume/finished/`, `resume/finished.json`): when a phase finishes, hard links of its
  outputs (no extra disk while the outputs exist) and a manifest (the spec hash, each file's size),
  written before its resume states are cleared. A job killed after that — at its time limit, seconds
  after a restart inside its allocation finished the phase: SLURM marks it TIMEOUT and Snakemake
  deletes the outputs (docs/cluster.md, Time limits) — is retried, and the retry restores the outputs
  from the record and exits 0 instead of training the phase from update 0;
- **error records** (`resume/error-{rank}.json`): a rank whose phase raised a Python exception records
  it. A retry of a job whose every rank left one fails at once with that error (the first attempt's:
  a refused retry records nothing), since an exception (an unsupported teacher, a NaN, a corrupted
  state) comes back on every retry; a rank that left none was killed (a peer's exception is then its
  consequence), and the retry resumes. Two kinds are told apart: an out-of-memory error refuses the
  retries even when only its own rank recorded it (its peers are killed waiting for it, and a retry
  replays the same batches on the same memory); a `RetryableError` (a resume state the file system
  failed to write) is not recorded, so the retry resumes from the newest state.

A first attempt (attempt 1: a fresh run, a rerun of changed inputs, `--forcerun`) drops both and
trains: a user who forces a rerun gets the phase trained again. The finished record stays until then
(or until the phase directory is deleted), so that any retry of the job that finished the phase finds it.
Torch-free.
"""

from __future__ import annotations

import json
import os
import shutil
import traceback
from pathlib import Path

from normgrow.design.execution import ERROR_FILES, FINISHED_DIR, PHASE_FILES, RESUME_DIR, SNAPSHOTS_DIR
from normgrow.train.outputs import write_json


class PreviousAttemptFailed(RuntimeError):
    """A retry refused: the attempt before it failed with a Python exception, which a retry would repeat."""


class RetryableError(RuntimeError):
    """An error a retry need not repeat (the file system's, while a resume state is written): not recorded, so
    that the retry resumes from the newest saved state."""


# ------------------------------------------------------------------ the finished record

def finished_paths(out: Path) -> tuple[Path, Path]:
    """The finished record of the phase in `out`: (its directory of hard links, its manifest)."""
    record = Path(out) / RESUME_DIR / FINISHED_DIR
    return record, record.with_suffix(".json")


def output_files(out: Path) -> list[str]:
    """The phase's output files, relative to `out`: the declared files and the snapshots, state.json last
    (the file the workflow's next jobs read as the phase's end)."""
    out = Path(out)
    snapshots = sorted(p.relative_to(out).as_posix() for p in (out / SNAPSHOTS_DIR).glob("*") if p.is_file())
    declared = [name for name in PHASE_FILES.values() if name != PHASE_FILES["state"]]
    return declared + snapshots + [PHASE_FILES["state"]]


def keep_finished(out: Path, spec_hash: str) -> None:
    """Record the finished phase's outputs in `out`: hard links under resume/finished/, then the manifest
    (spec hash, each file's size), written last — a record cut short by a kill has none and is ignored."""
    drop_finished(out)
    record, manifest = finished_paths(out)
    files = {}
    for name in output_files(out):
        link = record / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.hardlink_to(Path(out) / name)
        files[name] = link.stat().st_size
    write_json(manifest, {"spec": spec_hash, "files": files}, indent=None)


def verified_finished(out: Path, spec_hash: str, log) -> dict[str, int] | None:
    """The files of the finished record in `out` (name: size) if it belongs to `spec_hash` and every file is
    there at its size; None otherwise (said in `log` when there is a record). Sizes, not hashes: the
    links share the outputs' inodes, which are written once, by renames; hashing tens of GB of weights and
    snapshots at a phase's end would widen the very race the record closes."""
    record, manifest = finished_paths(out)
    if not manifest.is_file():
        return None
    try:
        saved = json.loads(manifest.read_text())
        files = saved["files"]
    except (OSError, ValueError, KeyError) as error:
        print(f"finished record {manifest} unreadable ({error}): not restored", file=log, flush=True)
        return None
    if saved.get("spec") != spec_hash:
        print(f"finished record {manifest} is of another phase spec: not restored", file=log, flush=True)
        return None
    for name, size in files.items():
        path = record / name
        if not path.is_file() or path.stat().st_size != size:
            print(f"finished record {manifest}: {name} missing or cut short: not restored", file=log, flush=True)
            return None
    return files


def restore_finished(out: Path, files: dict[str, int]) -> None:
    """Hard-link the recorded `files` (verified_finished) back into `out`, replacing what is there; state.json
    last."""
    record, _ = finished_paths(out)
    for name in sorted(files, key=lambda name: name == PHASE_FILES["state"]):
        target = Path(out) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        target.hardlink_to(record / name)
    (Path(out) / SNAPSHOTS_DIR).mkdir(exist_ok=True)  # a declared directory, empty without snapshots


def drop_finished(out: Path) -> None:
    """Remove the finished record in `out`, manifest first (the links alone are never restored)."""
    record, manifest = finished_paths(out)
    manifest.unlink(missing_ok=True)
    shutil.rmtree(record, ignore_errors=True)


# ------------------------------------------------------------------ error records

def record_error(out: Path, error: BaseException, alone: bool = False) -> None:
    """Record `error`, raised by this rank's phase in `out` (rank and world from torchrun's environment; a job
    in one process is rank 0 of 1). `alone`: the error refuses the retries without the other ranks' records
    (an out-of-memory error: its peers are killed waiting for it)."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    write_json(Path(out) / RESUME_DIR / ERROR_FILES.replace("*", str(rank)), {
        "rank": rank, "world": world, "error": f"{type(error).__name__}: {error}", "alone": alone,
        "traceback": "".join(traceback.format_exception(error))}, indent=None)


def recorded_errors(out: Path) -> list[dict]:
    """The error records of the phase in `out`, by rank (an unreadable one is skipped)."""
    records = []
    for path in (Path(out) / RESUME_DIR).glob(ERROR_FILES):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda record: record.get("rank", 0))


def failed_with_exception(records: list[dict]) -> bool:
    """Whether the attempt that left `records` failed with a Python exception on every rank, or with one that
    refuses the retries alone (record_error); otherwise a rank without one was killed, and the others'
    exceptions (a lost peer) followed from it."""
    if any(r.get("alone") for r in records):
        return True
    return bool(records) and len({r.get("rank") for r in records}) >= max(r.get("world", 1) for r in records)


def drop_errors(out: Path) -> None:
    for path in (Path(out) / RESUME_DIR).glob(ERROR_FILES):
        path.unlink(missing_ok=True)


# ------------------------------------------------------------------ an attempt's start

def begin_attempt(phases: list[tuple[Path, str]], attempt: int, log) -> bool:
    """Prepare attempt `attempt` of a job training `phases` ((output directory, spec hash) each). Returns
    True when the job has nothing to train: a retry that restored every phase's outputs from its finished
    record.

    - attempt 1: drop the phases' finished and error records; train (resuming any saved state).
    - attempt > 1, an error record of every rank (`failed_with_exception`): PreviousAttemptFailed with it.
    - attempt > 1, a finished record of every phase: restore them all.
    - otherwise (a stop: SIGTERM, a kill): drop the error records (a killed attempt's) and train, resuming
      from the newest state."""
    if attempt <= 1:
        for out, _ in phases:
            drop_finished(out)
            drop_errors(out)
        return False
    for out, _ in phases:
        records = recorded_errors(out)
        if failed_with_exception(records):
            first = next((r for r in records if r.get("alone")), records[0])
            raise PreviousAttemptFailed(
                f"attempt {attempt} of the phase in {out} is not run: the attempt before it failed with a Python "
                "exception, which a retry would repeat (a retry resumes only after a stop: SIGTERM, a kill). "
                f"Its error:\n{first['traceback']}")
    finished = [verified_finished(out, spec_hash, log) for out, spec_hash in phases]
    if all(files is not None for files in finished):
        for (out, _), files in zip(phases, finished, strict=True):
            restore_finished(out, files)
            print(f"attempt {attempt}: restored the outputs of the phase in {out}, finished by an earlier attempt "
                  "(its finished record)", file=log, flush=True)
        return True
    for out, _ in phases:  # a killed attempt's records (some ranks' at most): this attempt's are its own
        drop_errors(out)
    print(f"attempt {attempt}: resuming from the newest saved state", file=log, flush=True)
    return False
