"""Resumable training state of a phase in progress (not a declared output of the workflow).

Every `state_every` updates the trainer saves everything needed to continue bit-exactly: model and
optimizer state, the update count, RNG states (torch, numpy, python), the document iterator, token
counters, and the metrics so far. Each state is `state-{step}.pt` plus `state-{step}.json`, the
latter written last and holding the SHA-256 of the former and the hash of the phase spec; a state
whose file is missing, truncated or altered, or that belongs to another spec, is skipped and the
previous one is used. The newest `keep` states are kept.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from pathlib import Path

import numpy as np
import torch

from normgrow.checkpoint import atomic_write


class CorruptStateError(RuntimeError):
    """Every saved state of a phase failed verification."""


def spec_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


class ResumeStore:
    def __init__(self, directory: Path, spec: dict, keep: int = 2, log=None):
        self.directory, self.keep, self.log = Path(directory), keep, log
        self.spec_hash = spec_hash(spec)

    def _manifests(self) -> list[Path]:
        return sorted(self.directory.glob("state-*.json"), key=lambda p: int(p.stem.split("-")[1]), reverse=True)

    def save(self, step: int, payload: dict) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        data = buffer.getvalue()
        atomic_write(self.directory / f"state-{step}.pt", lambda tmp: tmp.write_bytes(data))
        manifest = {"step": step, "sha256": hashlib.sha256(data).hexdigest(), "spec": self.spec_hash}
        atomic_write(self.directory / f"state-{step}.json", lambda tmp: tmp.write_text(json.dumps(manifest)))
        for old in self._manifests()[self.keep:]:
            old.with_suffix(".pt").unlink(missing_ok=True)
            old.unlink()

    def latest(self) -> dict | None:
        """The newest verified state, None if there is none; CorruptStateError if states exist but
        none verifies."""
        manifests = self._manifests()
        problems = []
        for manifest_path in manifests:
            try:
                manifest = json.loads(manifest_path.read_text())
                if manifest["spec"] != self.spec_hash:
                    problems.append(f"{manifest_path.name}: saved for a different phase spec")
                    continue
                data = manifest_path.with_suffix(".pt").read_bytes()
                if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
                    problems.append(f"{manifest_path.name}: checksum mismatch (corrupted or truncated)")
                    continue
                for problem in problems:
                    print(f"skipped resume state {problem}", file=self.log, flush=True)
                return torch.load(io.BytesIO(data), weights_only=False)
            except (OSError, ValueError, KeyError) as error:
                problems.append(f"{manifest_path.name}: unreadable ({error})")
        if any("different phase spec" not in p for p in problems):
            raise CorruptStateError(f"no usable resume state in {self.directory}: " + "; ".join(problems) +
                                    f". Delete {self.directory} to restart the phase from its beginning.")
        return None

    def clear(self) -> None:
        """Remove the states (and the directory, once empty) after the phase has finished."""
        for path in self.directory.glob("state-*"):
            path.unlink()
        for directory in (self.directory / "snapshots", self.directory):
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
