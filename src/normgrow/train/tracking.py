"""Live training curves (config `tracking`, docs/workflow.md §Tracking): every phase and the
teacher's pretraining send their scalars to the trackers of `accelerate.tracking` (TensorBoard,
W&B, MLflow, Aim, ...: one interface for every back-end), on rank 0 only.

What is logged, at the run's global step (so that a run's phases continue one curve):
- every update: `train/loss`, `train/ce`, `train/kd`, `train/kd_soft`, `train/lr`, `train/grad_norm`
  (the values of train.csv), `train/tokens_per_s` and `train/peak_memory_mb` (not in train.csv: they
  depend on the machine, and train.csv is bit-identical across machines);
- every evaluation: `eval/ce`, `eval/kd`, `eval/kd_soft`, `eval/ppl` (the values of eval.csv);
- once, the phase spec and the execution settings, flattened, as the run's configuration (for
  TensorBoard, as YAML text under `configuration`).

A tracked run is named `{run}/seed{S}/phase{P}` (the first run sharing the phase; the others are in
its configuration under `shared_by`), or `teacher/pretrain`. Tracking is execution: it changes no
phase key and reruns nothing.

Resuming: a phase resumed from its state at update t repeats, bit-identically, the updates after t
that the killed job had logged. TensorBoard's writer purges its events from step t + 1 on
(`purge_step`; likewise when a finished phase is rerun), so its curves hold each step once; W&B
resumes its run by id (`resume: allow`) and, like any tracker that appends, then holds those steps
twice with equal values.
"""

from __future__ import annotations

import hashlib
import resource
import sys
import time
from pathlib import Path

import torch
import yaml

from normgrow.design.execution import Tracking


def run_name(label: str) -> str:
    """`{run}/seed{S}/phase{P}` from a PhaseTable label `run seed S phase P`."""
    run, _, seed, _, phase = label.rsplit(" ", 4)
    return f"{run}/seed{seed}/phase{phase}"


def flatten(values: dict, prefix: str = "") -> dict:
    """Nested config values as `a/b/c` keys of bool, int, float or str (lists and None as text):
    what every tracker takes as a run's configuration."""
    out = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}/"))
        else:
            out[name] = value if isinstance(value, bool | int | float | str) else str(value)
    return out


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory of this process so far: allocated CUDA memory on a GPU, the resident set on a CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


class Tracker:
    """The trackers of one tracked run on this rank (none off rank 0 or with `log_with` empty).

    `first_step`: the global step of this job's first update; steps from it on that an earlier job
    logged (a killed job, or a finished one rerun) are purged where the back-end allows (TensorBoard)."""

    def __init__(self, tracking: Tracking, config: dict, main: bool, device: torch.device, first_step: int = 1):
        self.device = device
        self.trackers = []
        self.clock = time.perf_counter()
        if not (main and tracking.log_with):
            return
        from accelerate.tracking import LOGGER_TYPE_TO_CLASS

        for backend in tracking.log_with:
            self.trackers.append(self._start(LOGGER_TYPE_TO_CLASS[backend], tracking, first_step))
        values = flatten(config)
        for tracker in self.trackers:
            if tracker.name == "tensorboard":  # as text: add_hparams would add a second run per phase
                tracker.log({"configuration": yaml.safe_dump(config, sort_keys=False)}, step=first_step)
            else:
                tracker.store_init_configuration(values)

    @staticmethod
    def _start(tracker_class, tracking: Tracking, first_step: int):
        kwargs = dict(tracking.init_kwargs.get(tracker_class.name, {}))
        if tracker_class.name == "tensorboard":
            kwargs.setdefault("purge_step", first_step)
            tracker = tracker_class(tracking.name, Path(tracking.dir) / tracking.project, **kwargs)
        elif tracker_class.name == "wandb":
            run_id = hashlib.sha256(f"{tracking.project}/{tracking.name}".encode()).hexdigest()[:16]
            kwargs = {"mode": "offline", "dir": tracking.dir, "name": tracking.name, "id": run_id,
                      "resume": "allow", "group": tracking.name.rsplit("/", 1)[0], **kwargs}
            tracker = tracker_class(tracking.project, **kwargs)
        elif tracker_class.requires_logging_directory:
            tracker = tracker_class(tracking.name, Path(tracking.dir) / tracking.project, **kwargs)
        else:
            tracker = tracker_class(tracking.name, **kwargs)
        tracker.start()
        return tracker

    def log(self, values: dict, step: int) -> None:
        for tracker in self.trackers:
            tracker.log(values, step=step)

    def log_update(self, row: dict, step: int) -> None:
        """One update's row of train.csv, with throughput since the last logged update and peak memory."""
        if not self.trackers:
            return
        now, start = time.perf_counter(), self.clock
        self.clock = now
        values = {f"train/{k}": row[k] for k in ("loss", "ce", "kd", "kd_soft", "lr", "grad_norm") if k in row}
        values["train/tokens_per_s"] = row["tokens"] / max(now - start, 1e-9)
        values["train/peak_memory_mb"] = peak_memory_mb(self.device)
        self.log(values, step)

    def log_eval(self, row: dict, step: int) -> None:
        """One evaluation's row of eval.csv (its time does not count against the next update's throughput)."""
        self.log({f"eval/{k}": row[k] for k in ("ce", "kd", "kd_soft", "ppl")}, step)
        self.clock = time.perf_counter()

    def finish(self) -> None:
        for tracker in self.trackers:
            tracker.finish()
        self.trackers = []
