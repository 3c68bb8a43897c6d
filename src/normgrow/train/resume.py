"""Resume states of a phase in progress (not declared outputs of the workflow: CONTRIBUTING.md, Layout).

Every `resume_every` updates the trainer saves everything needed to continue bit-exactly:

- `state-{step}/`: model and optimizer state through torch.distributed.checkpoint (DCP) — each rank
  writes its own shards, and a state saved by N ranks loads into any number of ranks (DCP reshards);
  plus `progress.json`: the RNG states (torch, numpy, python) and the phase's progress (the update
  count, the document iterator's position, token counters and the metrics so far:
  normgrow.train.trainer.PhaseProgress), all as data — loading a state runs no code (no pickle);
- `state-{step}.json`, written last by rank 0: the SHA-256 of every file of the directory and the
  hash of the phase spec.

A state whose manifest is missing, whose files are missing, truncated or altered, or that belongs to
another spec, is skipped and the previous one is used. The newest `keep` states of the spec are kept,
counted among its own: another spec's (the phase's snapshots changed), newer or not, never push out a state
just saved, and go when the phase finishes.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from normgrow.design.execution import SNAPSHOTS_DIR
from normgrow.train.distributed import Ranks
from normgrow.train.outputs import atomic_write


class CorruptStateError(RuntimeError):
    """Every saved state of a phase failed verification."""


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


def file_hashes(directory: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.iterdir()) if path.is_file()}


class ResumeStore:
    """The resume states of one phase under `directory`; `save` and `load_latest` are collectives."""

    def __init__(self, directory: Path, spec: dict, ranks: Ranks, keep: int = 2, log=None):
        self.directory, self.ranks, self.keep, self.log = Path(directory), ranks, keep, log
        self.spec_hash = spec_hash(spec)

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
        with the RNG states."""
        target = self.directory / f"state-{step}"
        if self.ranks.main:
            shutil.rmtree(target, ignore_errors=True)  # left by a crash before its manifest
            target.mkdir(parents=True)
        self.ranks.barrier()
        model_state, optimizer_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=target)
        if self.ranks.main:
            (target / "progress.json").write_text(json.dumps({"rng": rng_state(), "progress": progress}))
            manifest = {"step": step, "files": file_hashes(target), "spec": self.spec_hash}
            atomic_write(target.with_suffix(".json"), lambda tmp: tmp.write_text(json.dumps(manifest)))
            for old in [m for m in self._manifests() if self._own(m)][self.keep:]:
                old.unlink()
                shutil.rmtree(old.with_suffix(""), ignore_errors=True)
        self.ranks.barrier()

    def _verified(self, at_most: int | None = None) -> tuple[Path | None, str | None]:
        """(newest verified state directory — at update `at_most` or before, if given — or None, error
        message if states exist but none verifies)."""
        problems = []
        for manifest_path in self._manifests():
            if at_most is not None and int(manifest_path.stem.split("-")[1]) > at_most:
                continue
            try:
                manifest = json.loads(manifest_path.read_text())
                if manifest["spec"] != self.spec_hash:
                    problems.append(f"{manifest_path.name}: saved for a different phase spec")
                    continue
                directory = manifest_path.with_suffix("")
                if file_hashes(directory) != manifest["files"]:
                    problems.append(f"{manifest_path.name}: checksum mismatch (corrupted, truncated or missing files)")
                    continue
                for problem in problems:
                    print(f"skipped resume state {problem}", file=self.log, flush=True)
                return directory, None
            except (OSError, ValueError, KeyError) as error:
                problems.append(f"{manifest_path.name}: unreadable ({error})")
        if any("different phase spec" not in p for p in problems):
            return None, (f"no usable resume state in {self.directory}: " + "; ".join(problems) +
                          f". Delete {self.directory} to restart the phase from its beginning.")
        for problem in problems:  # every state is another phase's: start from the beginning, and say why
            print(f"skipped resume state {problem}", file=self.log, flush=True)
        return None, None

    def latest_step(self) -> int | None:
        """The update of the newest verified state, or None (a collective, like `load_latest`)."""
        directory, error = self.ranks.broadcast(self._verified() if self.ranks.main else None)
        if error:
            raise CorruptStateError(error)
        return None if directory is None else int(directory.name.split("-")[1])

    def load_latest(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    at_most: int | None = None) -> dict | None:
        """Load the newest verified state (at update `at_most` or before, if given) into `model` and
        `optimizer`, restore the RNG states and return its `progress`; None if there is none;
        CorruptStateError if states exist but none verifies. Rank 0 verifies; every rank loads its
        shards."""
        directory, error = self.ranks.broadcast(self._verified(at_most) if self.ranks.main else None)
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
