"""Faults injected into a training phase, for the reliability tests only.

`NORMGROW_FAULT=kind@N` asks for one fault at update N of every phase the process trains
(`kind@N:KEY` only of the phase whose key starts with KEY, e.g. one student of a group; several faults
separated by commas, e.g. `slow@2000,slowsave@40000`):
- `nan@N`: the loss of update N is NaN (the phase must stop without touching its saved states);
- `term@N`: the process sends itself SIGTERM after update N (preemption: save a state, exit 143);
- `kill@N`: the process is killed with SIGKILL after update N and any state it saves there
  (a hard crash: the next run resumes from the newest verified state);
- `slow@MS`: every update lasts MS milliseconds longer (a phase that outlasts a job's time limit);
- `slowsave@MS`: every resume state takes MS milliseconds longer to save, before it is written (a
  paper-scale state: what torchrun's --shutdown-timeout after a SIGTERM must cover);
- `finished@0`: the process is killed with SIGKILL after the phase has finished — outputs written,
  finished record kept, resume states cleared — as SLURM's kill at a time limit may come just after a
  restart finished the phase (docs/cluster.md, Time limits; a retry restores it: normgrow.train.attempts).
Without the variable nothing happens; the trainer calls the hooks at those points.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass

import torch

KINDS = ("nan", "term", "kill", "slow", "finished", "slowsave")


@dataclass(frozen=True)
class Fault:
    """One fault: `kind` at update `step` (for slow and slowsave: milliseconds) of the phases whose key
    starts with `key`."""

    kind: str
    step: int
    key: str = ""


@dataclass(frozen=True)
class Faults:
    faults: tuple[Fault, ...] = ()

    @classmethod
    def from_environment(cls) -> Faults:
        value = os.environ.get("NORMGROW_FAULT", "")
        return cls(tuple(parse_fault(value, part) for part in value.split(",") if part))

    def for_phase(self, key: str) -> Faults:
        """The faults of the phase `key`: those that name it or no phase."""
        return Faults(tuple(f for f in self.faults if key.startswith(f.key)))

    def _at(self, kind: str, step: int) -> bool:
        return any(f.kind == kind and f.step == step for f in self.faults)

    def _pause(self, kind: str) -> None:
        """Sleep for the milliseconds of every fault of `kind` (slow, slowsave)."""
        time.sleep(sum(f.step for f in self.faults if f.kind == kind) / 1000)

    def loss(self, step: int, total: torch.Tensor) -> torch.Tensor:
        """The loss of update `step` as back-propagated: NaN for `nan@step`."""
        return total * math.nan if self._at("nan", step) else total

    def after_update(self, step: int) -> None:
        """After update `step` and its evaluation: SIGTERM for `term@step`; a pause for `slow@MS`."""
        self._pause("slow")
        if self._at("term", step):
            os.kill(os.getpid(), signal.SIGTERM)

    def before_state(self) -> None:
        """Before a resume state is saved: a pause for `slowsave@MS`."""
        self._pause("slowsave")

    def after_state(self, step: int) -> None:
        """After update `step`'s resume state, if any, is saved: SIGKILL for `kill@step`."""
        if self._at("kill", step):
            os.kill(os.getpid(), signal.SIGKILL)

    def after_finish(self) -> None:
        """After the phase has finished and its resume states are cleared: SIGKILL for `finished@0`."""
        if any(f.kind == "finished" for f in self.faults):
            os.kill(os.getpid(), signal.SIGKILL)


def parse_fault(value: str, part: str) -> Fault:
    """One `kind@N[:KEY]` of NORMGROW_FAULT=`value`."""
    kind, _, rest = part.partition("@")
    step, _, key = rest.partition(":")
    if kind not in KINDS or not step.isdigit():
        raise ValueError(f"NORMGROW_FAULT={value}: expected one of {', '.join(KINDS)} followed by @N[:KEY] "
                         "(N: an update; for slow and slowsave, milliseconds), several separated by commas")
    return Fault(kind, int(step), key)
