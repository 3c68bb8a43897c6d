"""Resume states of a phase in progress (not declared outputs of the workflow: CONTRIBUTING.md, Layout).

Every `resume_every` updates the trainer saves everything needed to continue bit-exactly:

- `state-{step}/`: model and optimizer state through torch.distributed.checkpoint (DCP) — each rank
  writes its own shards, and a state saved by N ranks loads into any number of ranks (DCP reshards);
  plus `progress.json`: the RNG states (torch, numpy, python) and the phase's progress (the update
  count, the document iterator's position, token counters and the metrics so far:
  normgrow.train.trainer.PhaseProgress), all as data — loading a state runs no code (no pickle);
- `state-{step}.json`, written last by rank 0: the SHA-256 of every file of the directory and the
  hash of the phase spec. Each rank hashes its own shard (DCP's `__{rank}_*.distcp`), streamed, while
  the others hash theirs; rank 0 also hashes DCP's `.metadata` and `progress.json`. A state is verified
  the same way (a state saved by more ranks: shard r by rank r modulo the world), once per start.

A state whose manifest is missing, whose files are missing, truncated or altered, or that belongs to
another spec, is skipped and the previous one is used. The newest `keep` states of the spec are kept,
counted among its own: another spec's (the phase's snapshots changed), newer or not, never push out a state
just saved, and go when the phase finishes.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from normgrow.design.execution import SNAPSHOTS_DIR
from normgrow.train.attempts import RetryableError
from normgrow.train.distributed import Ranks
from normgrow.train.outputs import write_json


class CorruptStateError(RuntimeError):
    """Every saved state of a phase failed verification."""


class StateNotSaved(RetryableError):
    """The file system failed while a resume state was written: a retry resumes from the state before it."""


def io_failure(error: BaseException) -> bool:
    """Whether `error` is the file system's: an OSError, or DCP's CheckpointException (a BaseException, raised
    on every rank) whose every rank failed with one."""
    if isinstance(error, CheckpointException):
        return all(isinstance(failure[0], OSError) for failure in error.failures.values())
    return isinstance(error, OSError)


def spec_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def seed_all(value: int) -> None:
    """Seed every generator a phase may draw from (torch, numpy, python), so that a phase is the
    same in any process."""
    torch.manual_seed(value)
    np.random.seed(value)
    random.seed(value)


def rng_state() -> dict:
    """Every generator's state (torch's CPU generator, numpy's global, python's) as JSON data."""
    name, keys, position, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {"torch": torch.get_rng_state().tolist(),
            "numpy": [name, keys.tolist(), int(position), int(has_gauss), float(cached)],
            "python": [version, list(internal), gauss_next]}


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state` returned (after a JSON round trip)."""
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    name, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), position, has_gauss, cached))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))


SHARD = re.compile(r"__(\d+)_\d+\.distcp")  # DCP's FileSystemWriter: rank r writes __{r}_{i}.distcp


def hashing_rank(name: str, world: int) -> int:
    """The rank of `world` that hashes a state's file `name`: a shard's writer (modulo `world`: a state
    saved by more ranks than load it), rank 0 for the rest (DCP's `.metadata`, progress.json)."""
    shard = SHARD.fullmatch(name)
    return int(shard.group(1)) % world if shard else 0


def file_hashes(directory: Path, rank: int = 0, world: int = 1) -> dict[str, str]:
    """The SHA-256 of every file of `directory` that `rank` of `world` hashes (all of them in a world of
    one), each read in chunks (hashlib.file_digest), not whole."""
    hashes = {}
    for path in sorted(directory.iterdir()):
        if path.is_file() and hashing_rank(path.name, world) == rank:
            with path.open("rb") as file:
                hashes[path.name] = hashlib.file_digest(file, "sha256").hexdigest()
    return hashes


class ResumeStore:
    """The resume states of one phase under `directory`; `save` and `load_latest` are collectives."""

    def __init__(self, directory: Path, spec: dict, ranks: Ranks, keep: int = 2, log=None):
        self.directory, self.ranks, self.keep, self.log = Path(directory), ranks, keep, log
        self.spec_hash = spec_hash(spec)
        self.checked: dict[Path, bool] = {}  # state directory → whether its files matched its manifest

    def _hashes(self, directory: Path) -> dict[str, str] | None:
        """Every file's SHA-256 of the state `directory`, each rank hashing its own (a collective); None
        on every rank if one could not read its files."""
        try:
            own = file_hashes(directory, self.ranks.rank, self.ranks.world)
        except OSError:
            own = None
        parts = self.ranks.gather(own)
        return None if any(part is None for part in parts) else {k: v for part in parts for k, v in part.items()}

    def _matches(self, directory: Path, files: dict[str, str]) -> bool:
        """Whether the state `directory`'s files are those of its manifest (hashed once per store: the job
        asks for the newest state, then loads it)."""
        if directory not in self.checked:
            self.checked[directory] = self._hashes(directory) == files
        return self.checked[directory]

    def _manifests(self) -> list[Path]:
        return sorted(self.directory.glob("state-*.json"), key=lambda p: int(p.stem.split("-")[1]), reverse=True)

    def _own(self, manifest: Path) -> bool:
        """Whether `manifest` is of a state of this spec (an unreadable one is not)."""
        try:
            return json.loads(manifest.read_text())["spec"] == self.spec_hash
        except (OSError, ValueError, KeyError):
            return False

    def save(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, progress: dict) -> None:
        """Save the state at update `step`: weights and optimizer (DCP), and `progress` (JSON data)
        with the RNG states. StateNotSaved if the file system fails (retryable: normgrow.train.attempts)."""
        try:
            self._save(step, model, optimizer, progress)
        except BaseException as error:
            if io_failure(error):
                raise StateNotSaved(f"the resume state at update {step} could not be written ({error}); a retry "
                                    "resumes from the newest saved state") from error
            raise

    def _save(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, progress: dict) -> None:
        target = self.directory / f"state-{step}"
        if self.ranks.main:
            shutil.rmtree(target, ignore_errors=True)  # left by a crash before its manifest
            target.mkdir(parents=True)
        self.ranks.barrier()
        model_state, optimizer_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=target)
        self.checked.pop(target, None)
        if self.ranks.main:
            write_json(target / "progress.json", {"rng": rng_state(), "progress": progress}, indent=None)
        files = self._hashes(target)
        if files is None:
            raise OSError(f"could not read back the resume state {target} to hash it")
        if self.ranks.main:
            manifest = {"step": step, "files": files, "spec": self.spec_hash}
            write_json(target.with_suffix(".json"), manifest, indent=None)
            for old in [m for m in self._manifests() if self._own(m)][self.keep:]:
                old.unlink()
                shutil.rmtree(old.with_suffix(""), ignore_errors=True)
        self.ranks.barrier()

    def _read_manifests(self, at_most: int | None) -> list[tuple[Path, dict | str]]:
        """Each manifest (newest first; at update `at_most` or before, if given) with its content, or why it
        is unreadable."""
        manifests = []
        for path in self._manifests():
            if at_most is not None and int(path.stem.split("-")[1]) > at_most:
                continue
            try:
                manifest = json.loads(path.read_text())
                manifests.append((path, {"spec": manifest["spec"], "files": dict(manifest["files"])}))
            except (OSError, ValueError, KeyError, TypeError) as error:
                manifests.append((path, f"unreadable ({error})"))
        return manifests

    def _verified(self, at_most: int | None = None) -> tuple[Path | None, str | None]:
        """(newest verified state directory — at update `at_most` or before, if given — or None, error
        message if states exist but none verifies): a collective, on rank 0's reading of the manifests."""
        problems = []
        for manifest_path, manifest in self.ranks.broadcast(self._read_manifests(at_most) if self.ranks.main else None):
            if isinstance(manifest, str):
                problems.append(f"{manifest_path.name}: {manifest}")
            elif manifest["spec"] != self.spec_hash:
                problems.append(f"{manifest_path.name}: saved for a different phase spec")
            elif not self._matches(manifest_path.with_suffix(""), manifest["files"]):
                problems.append(f"{manifest_path.name}: checksum mismatch (corrupted, truncated or missing files)")
            else:
                self._report(problems)
                return manifest_path.with_suffix(""), None
        if any("different phase spec" not in p for p in problems):
            return None, (f"no usable resume state in {self.directory}: " + "; ".join(problems) +
                          f". Delete {self.directory} to restart the phase from its beginning.")
        self._report(problems)  # every state is another phase's: start from the beginning, and say why
        return None, None

    def _report(self, problems: list[str]) -> None:
        if self.ranks.main:
            for problem in problems:
                print(f"skipped resume state {problem}", file=self.log, flush=True)

    def latest_step(self) -> int | None:
        """The update of the newest verified state, or None (a collective, like `load_latest`)."""
        directory, error = self._verified()
        if error:
            raise CorruptStateError(error)
        return None if directory is None else int(directory.name.split("-")[1])

    def load_latest(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    at_most: int | None = None) -> dict | None:
        """Load the newest verified state (at update `at_most` or before, if given) into `model` and
        `optimizer`, restore the RNG states and return its `progress`; None if there is none;
        CorruptStateError if states exist but none verifies. Every rank verifies its share of the files
        and loads its shards."""
        directory, error = self._verified(at_most)
        if error:
            raise CorruptStateError(error)
        if directory is None:
            return None
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=directory)  # in place into the tensors get_state_dict returned
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
        saved = json.loads((directory / "progress.json").read_text())
        set_rng_state(saved["rng"])
        return saved["progress"]

    def clear(self) -> None:
        """Remove the states (and the directory, once empty) after the phase has finished (rank 0)."""
        if not self.ranks.main:
            return
        for path in self.directory.glob("state-*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        for directory in (self.directory / SNAPSHOTS_DIR, self.directory):
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
