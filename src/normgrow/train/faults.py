"""Faults injected into a training phase, for the reliability tests only.

`NORMGROW_FAULT=kind@N` asks for one fault at update N of every phase the process trains
(`kind@N:KEY` only of the phase whose key starts with KEY, e.g. one student of a group):
- `nan@N`: the loss of update N is NaN (the phase must stop without touching its saved states);
- `term@N`: the process sends itself SIGTERM after update N (preemption: save a state, exit 143);
- `kill@N`: the process is killed with SIGKILL after update N and any state it saves there
  (a hard crash: the next run resumes from the newest verified state);
- `slow@MS`: every update lasts MS milliseconds longer (a phase that outlasts a job's time limit);
- `finished@0`: the process is killed with SIGKILL after the phase has finished — outputs written,
  finished record kept, resume states cleared — as SLURM's kill at a time limit may come just after a
  restart finished the phase (docs/cluster.md, Time limits; a retry restores it: normgrow.train.attempts).
Without the variable nothing happens; the trainer calls the hooks at those four points.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass

import torch

KINDS = ("nan", "term", "kill", "slow", "finished")


@dataclass(frozen=True)
class Faults:
    kind: str | None = None
    step: int = 0
    key: str = ""

    @classmethod
    def from_environment(cls) -> Faults:
        value = os.environ.get("NORMGROW_FAULT", "")
        kind, _, rest = value.partition("@")
        step, _, key = rest.partition(":")
        if not kind:
            return cls()
        if kind not in KINDS or not step.isdigit():
            raise ValueError(f"NORMGROW_FAULT={value}: expected one of {', '.join(KINDS)} followed by @N[:KEY] "
                             "(N: an update; for slow, milliseconds)")
        return cls(kind, int(step), key)

    def for_phase(self, key: str) -> Faults:
        """The faults of the phase `key`: these, or none if they name another phase."""
        return self if key.startswith(self.key) else Faults()

    def _at(self, kind: str, step: int) -> bool:
        return self.kind == kind and self.step == step

    def loss(self, step: int, total: torch.Tensor) -> torch.Tensor:
        """The loss of update `step` as back-propagated: NaN for `nan@step`."""
        return total * math.nan if self._at("nan", step) else total

    def after_update(self, step: int) -> None:
        """After update `step` and its evaluation: SIGTERM for `term@step`; a pause for `slow@MS`."""
        if self.kind == "slow":
            time.sleep(self.step / 1000)
        if self._at("term", step):
            os.kill(os.getpid(), signal.SIGTERM)

    def after_state(self, step: int) -> None:
        """After update `step`'s resume state, if any, is saved: SIGKILL for `kill@step`."""
        if self._at("kill", step):
            os.kill(os.getpid(), signal.SIGKILL)

    def after_finish(self) -> None:
        """After the phase has finished and its resume states are cleared: SIGKILL for `finished@0`."""
        if self.kind == "finished":
            os.kill(os.getpid(), signal.SIGKILL)
