"""The phase trainer (paper Algorithm 1, docs/definitions.md §3): one phase of one run, from the previous phase's
checkpoint (or the seed's initial blocks) to this phase's checkpoint and metrics.

Every phase: activate its blocks, mark its trainable blocks, start a fresh AdamW and a restarted
warm-up + cosine schedule (with `lr_restart: false`, continue the previous phase's), distil for
`steps` updates with gradient clipping, evaluate every `eval_every` updates and at the end on the
fixed validation set, and count tokens:
- tokens: non-padding tokens of all training batches;
- unique tokens: tokens of the documents read for the first time in this run;
- active-layer tokens: Σ over updates of (batch tokens × active decoder layers).

Scale: the phase runs on every rank of a process group (one process, or torchrun's ranks), with
the student sharded by FSDP2 and each rank training on its rows of the same global batch
(distributed.py); counters, losses and outputs do not depend on the number of ranks, and rank 0
writes the outputs.

Reliability: the phase saves a resumable state every `train.state_every` updates (resume.py) and
continues from the newest verified one when rerun; SIGTERM (preemption) saves a state and exits
with `Preempted`; a non-finite loss or gradient stops the phase without touching the saved states;
the declared outputs are written only at the end, each atomically.

One update is `training_step`, which the benchmark (benchmarks/distill_step.py) and the memory
trace (normgrow.trace) call too. Tests inject faults through `normgrow.faults`.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor
from tqdm import tqdm

from normgrow.checkpoint import atomic_write, load_student, read_json, save_student, write_json
from normgrow.curriculum import DataState, Execution, PhaseSpec, Training, snapshot_steps
from normgrow.data import Batch, DocumentIterator, TokenStore, fixed_batches
from normgrow.distributed import Ranks, process_group, shard_student
from normgrow.evaluate import evaluate_student
from normgrow.faults import Faults
from normgrow.forward import distillation_terms
from normgrow.objective import Objective, loss_positions
from normgrow.resume import ResumeStore, seed_all
from normgrow.student import BlockStackStudent
from normgrow.teacher import load_teacher
from normgrow.tracking import Tracker

COUNTERS = ("tokens", "unique_tokens", "active_layer_tokens", "steps")


def build_optimizer(student: torch.nn.Module, training: Training) -> torch.optim.AdamW:
    """AdamW over the trainable parameters, with the fused kernel (one pass over each parameter's
    state instead of one per operation; ~10× faster than the default on CPU)."""
    params = [p for p in student.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=training.lr, betas=training.betas, eps=training.eps,
                             weight_decay=training.weight_decay, fused=True)


def write_csv(path: Path, rows: list[dict]) -> None:
    def write(tmp):
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    atomic_write(path, write)


class Preempted(RuntimeError):
    """The phase received SIGTERM, saved a resumable state and stopped; rerun it to resume."""

    exit_code = 143


class SigtermFlag:
    """Records SIGTERM instead of dying, so that the training loop can save a state first."""

    def __init__(self):
        self.requested = False
        self.previous = signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.requested = True

    def restore(self):
        signal.signal(signal.SIGTERM, self.previous)


def train_phase(spec: PhaseSpec, execution: Execution, teacher_path: str, tokens_dir: Path, previous: Path | None,
                out: Path, log=sys.stderr) -> dict:
    """Train the phase `spec` (the last of its phases) from the previous phase's outputs in
    `previous`; write student.safetensors, state.json, train.csv, eval.csv and snapshots/ under
    `out`. Resumes from `out/resume/` if a verified state of the same spec is there. Runs in this
    process, or on every rank of a torchrun launch (normgrow.launch), with the student sharded by
    FSDP2 (normgrow.distributed). Returns the state."""
    with process_group() as ranks:
        trainer = PhaseTrainer(spec, execution, teacher_path, Path(tokens_dir), previous, Path(out), ranks,
                               log if ranks.main else open(os.devnull, "w"))
        return trainer.run()


@dataclass
class TrainState:
    """What a phase in progress has done besides its weights and optimizer: the updates made, where
    the document iterator stands, the token counters and the metric rows so far. A resume state
    stores it as JSON (normgrow.resume), so that loading one runs no code."""

    step: int
    data: DataState
    counters: dict[str, int]
    train_rows: list[dict] = field(default_factory=list)
    eval_rows: list[dict] = field(default_factory=list)

    @classmethod
    def start(cls, data: DataState) -> TrainState:
        return cls(step=0, data=data, counters=dict.fromkeys(COUNTERS, 0))

    def to_json(self) -> dict:
        return {**asdict(self), "data": self.data.as_dict()}

    @classmethod
    def from_json(cls, saved: dict) -> TrainState:
        return cls(**{**saved, "data": DataState(**saved["data"])})


class PhaseTrainer:
    """One phase on this rank, split into named steps (as torchtitan splits its trainer): the
    constructor sets up the models (`build_models`), the optimizer, the data and the train state
    (`load_state`: the newest resume state, or a fresh start); `run` calls `update` for every update,
    `evaluate` and `save_state` when due, and `finish`, which writes the phase's outputs."""

    def __init__(self, spec: PhaseSpec, execution: Execution, teacher_path: str, tokens_dir: Path,
                 previous: Path | None, out: Path, ranks: Ranks, log):
        self.spec, self.execution, self.out, self.ranks, self.log = spec, execution, out, ranks, log
        self.start_time = time.time()
        torch.set_num_threads(execution.threads)
        training = spec.training
        if training.batch_size % ranks.world:
            raise ValueError(f"train.batch_size ({training.batch_size}) must be a multiple of the number of ranks "
                             f"({ranks.world}) so that every rank trains on equal shares of the global batch")
        seed_all(spec.seed * 1000 + spec.index)
        out.mkdir(parents=True, exist_ok=True)
        self.label = spec.describe()
        self.pad_id = json.loads((tokens_dir / "meta.json").read_text())["boundary_id"]
        self.teacher, self.student, self.before = build_models(spec, execution, teacher_path, previous, ranks)
        self.optimizer = build_optimizer(self.student, training)
        self.objective = Objective(**spec.objective)
        valid_batches = fixed_batches(TokenStore(tokens_dir / "valid"), training.batch_size, self.pad_id)
        self.valid = [ranks.rows(batch, self.pad_id) for batch in valid_batches]  # this rank's rows, once
        self.start_data = spec.phase.start_state(DataState(**self.before["data"]))
        self.batches = DocumentIterator(TokenStore(tokens_dir / "train"), self.start_data, spec.shard_docs,
                                        training.batch_size, self.pad_id, spec.seed)
        self.layers = spec.phase.active_blocks * spec.student["layers_per_block"]
        self.resume = ResumeStore(out / "resume", {"key": spec.key, "snapshots": execution.snapshots}, ranks, log=log)
        self.snapshots = set(snapshot_steps(spec.phase.steps, execution.snapshots))
        self.faults = Faults.from_environment()
        self.state = self.load_state()
        self.tracker = Tracker(execution.tracking, {"spec": spec.to_json(), "execution": asdict(execution)},
                               ranks.main, ranks.device, first_step=self.before["global_step"] + self.state.step + 1)

    def load_state(self) -> TrainState:
        """The newest verified resume state (weights, optimizer and RNGs loaded in place), or a fresh start."""
        saved = self.resume.load_latest(self.student, self.optimizer)
        if saved is None:
            return TrainState.start(self.start_data)
        state = TrainState.from_json(saved)
        self.batches.state = state.data
        print(f"{self.label}: resumed from the state at update {state.step}", file=self.log, flush=True)
        return state

    def save_state(self) -> None:
        self.state.data = self.batches.state
        self.resume.save(self.state.step, self.student, self.optimizer, self.state.to_json())

    def run(self) -> dict:
        phase = self.spec.phase
        sigterm = SigtermFlag()
        progress = tqdm(range(self.state.step + 1, phase.steps + 1), desc=self.label, mininterval=5, file=self.log,
                        initial=self.state.step, total=phase.steps, disable=not self.ranks.main)
        try:
            for t in progress:
                row = self.update(t)
                self.tracker.log_update(row, row["global_step"])
                progress.set_postfix(loss=f"{row['loss']:.3f}", lr=f"{row['lr']:.1e}", refresh=False)
                if t in self.snapshots and t < phase.steps:
                    save_student(self.student, self.resume.directory / "snapshots" /
                                 f"step{row['global_step']}.safetensors")
                if t % self.spec.training.eval_every == 0 or t == phase.steps:
                    self.evaluate(t, row["global_step"])
                self.faults.after_update(t)
                preempted = self.ranks.any(sigterm.requested)
                if preempted or (t % self.execution.state_every == 0 and t < phase.steps):
                    self.save_state()
                if preempted:
                    raise Preempted(f"{self.label}: SIGTERM at update {t}; state saved in {self.out / 'resume'}; "
                                    "rerun the phase to resume")
                self.faults.after_state(t)
        finally:
            sigterm.restore()
            self.tracker.finish()
        return self.finish()

    def update(self, t: int) -> dict:
        """Update `t`: its LR, the next batch, `training_step`, the NaN guard, the counters; returns its row."""
        training, label = self.spec.training, self.label
        lr = self.spec.phase.lr(t, training)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.set_gate(t)
        batch = self.batches.next_batch()
        terms = training_step(self.student, self.teacher, self.optimizer, self.ranks.rows(batch, self.pad_id),
                              self.objective, training.grad_clip, self.execution.loss_chunk, self.ranks.world,
                              normalizer=int(loss_positions(batch.attention_mask).sum()),
                              loss_hook=functools.partial(self.faults.loss, t))
        loss, ce, kd, kd_soft = self.ranks.sum(*(terms[k] for k in ("total", "ce", "kd", "kd_soft")))
        grad_norm = float(terms["grad_norm"])  # global: the same on every rank
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            raise FloatingPointError(f"{label}: non-finite loss ({loss}) or gradient norm ({grad_norm}) at "
                                     f"update {t}; the last good resume state is kept in {self.out / 'resume'}")
        counters = self.state.counters
        counters["steps"] += 1
        counters["tokens"] += batch.tokens
        counters["active_layer_tokens"] += batch.tokens * self.layers
        self.state.step = t
        row = {"step": t, "global_step": self.before["global_step"] + t, "loss": loss, "ce": ce, "kd": kd,
               "kd_soft": kd_soft, "lr": lr, "grad_norm": grad_norm, "tokens": batch.tokens}
        self.state.train_rows.append(row)
        return row

    def set_gate(self, t: int) -> None:
        """The ramp operator's c for update t (and the evaluation after it); none past the ramp."""
        c = self.spec.phase.growth.gate(t)
        self.student.gate = None if c is None else (self.spec.phase.appended[0], c)

    def evaluate(self, t: int, global_step: int) -> None:
        metrics = evaluate_student(self.student, self.teacher, self.valid, self.objective, self.execution.loss_chunk,
                                   self.ranks)
        row = {"step": t, "global_step": global_step, "ce": metrics["ce"], "kd": metrics["kd"],
               "kd_soft": metrics["kd_soft"], "ppl": metrics["ppl"]}
        self.state.eval_rows.append(row)
        self.tracker.log_eval(row, global_step)
        print(f"{self.label} step {t}: validation CE {metrics['ce']:.4f} KD {metrics['kd']:.4f} "
              f"PPL {metrics['ppl']:.2f}", file=self.log, flush=True)

    def finish(self) -> dict:
        """The phase's outputs (weights, state.json, train.csv, eval.csv, snapshots); returns the state."""
        spec, phase, before, counters = self.spec, self.spec.phase, self.before, self.state.counters
        counters["unique_tokens"] = self.batches.unique_tokens(self.start_data, self.batches.state)
        state = {
            "key": spec.key, "seed": spec.seed, "phase": spec.index, "placement": spec.placement,
            "active_blocks": phase.active_blocks, "active_layers": self.layers,
            "trainable_blocks": list(phase.trainable_blocks), "data_policy": phase.data,
            "global_step": before["global_step"] + phase.steps, "data": self.batches.state.as_dict(),
            "phase_counters": counters, "run_counters": {k: before["run_counters"][k] + counters[k] for k in COUNTERS},
            "final_eval": self.state.eval_rows[-1], "wall_seconds": time.time() - self.start_time,
            "ranks": self.ranks.world,
        }
        save_student(self.student, self.out / "student.safetensors")
        if self.ranks.main:
            write_outputs(self.out, state, self.state.train_rows, self.state.eval_rows,
                          self.resume.directory / "snapshots", phase.steps in self.snapshots)
        self.resume.clear()
        self.ranks.barrier()
        return state


def build_models(spec: PhaseSpec, execution: Execution, teacher_path: str, previous: Path | None,
                 ranks: Ranks) -> tuple[torch.nn.Module, BlockStackStudent, dict]:
    """The frozen teacher on this rank's device, and the student as this phase trains it: built from
    the teacher, the previous phase's weights loaded, its blocks activated and marked trainable,
    compiled if asked, sharded. Also the previous phase's state (at phase 0, a fresh run's)."""
    teacher = load_teacher(teacher_path, spec.teacher_dtype, spec.student["attn_implementation"])
    teacher.to(ranks.device)
    s, phase = spec.student, spec.phase
    student = BlockStackStudent.from_teacher(teacher, spec.placement, s["blocks"], s["layers_per_block"],
                                             spec.seed, s["attn_implementation"])
    if spec.index == 0:
        before = {"data": DataState().as_dict(), "run_counters": dict.fromkeys(COUNTERS, 0), "global_step": 0}
    else:
        before = read_json(previous / "state.json")
        load_student(student, previous / "student.safetensors")
    student.active_blocks = phase.active_blocks
    student.start_appended(phase.appended, phase.growth)
    student.activation_checkpointing = execution.activation_checkpointing
    student.set_trainable(list(phase.trainable_blocks))
    student.train()
    if execution.compile:  # slow first compile; off by default
        student.compile_layers()
    shard_student(student, ranks, spec.training.precision)
    return teacher, student, before


def training_step(student, teacher, optimizer: torch.optim.Optimizer, rows: Batch, objective: Objective,
                  grad_clip: float, loss_chunk: int, world: int, normalizer: int,
                  targets: tuple[torch.Tensor, torch.Tensor] | None = None, loss_hook=None) -> dict[str, torch.Tensor]:
    """One update on this rank's `rows` of the global batch: `backward_step`, then `optimizer_step`.

    Returns this rank's detached terms and the global gradient norm before clipping, as tensors: the
    caller reads them (a host sync) and stops on a non-finite value; the update is already applied
    then, but a phase that stops saves nothing, so its last good resume state stays."""
    terms = backward_step(student, teacher, rows, objective, loss_chunk, world, normalizer, targets, loss_hook)
    return {**terms, "grad_norm": optimizer_step(optimizer, grad_clip)}


def backward_step(student, teacher, rows: Batch, objective: Objective, loss_chunk: int, world: int, normalizer: int,
                  targets: tuple[torch.Tensor, torch.Tensor] | None = None, loss_hook=None) -> dict[str, torch.Tensor]:
    """Teacher forward, student forward with the fused KD + CE (sums divided by `normalizer`, the
    global batch's loss positions) and backward. `loss_hook` may replace the loss before backward
    (fault injection); `targets` are the rows' `positions_and_labels`, if already computed. Returns
    the detached terms."""
    terms = distillation_terms(student, teacher, rows, objective, loss_chunk, normalizer=normalizer, targets=targets)
    total = loss_hook(terms["total"]) if loss_hook else terms["total"]
    (total * world).backward()  # FSDP averages gradients over the ranks
    return {**{k: v.detach() for k, v in terms.items()}, "total": total.detach()}


def optimizer_step(optimizer: torch.optim.Optimizer, grad_clip: float) -> torch.Tensor:
    """Clip the global gradient norm (over all ranks' shards) to `grad_clip`, step, drop the
    gradients; returns the norm before clipping."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return norm.full_tensor() if isinstance(norm, DTensor) else norm


def write_outputs(out: Path, state: dict, train_rows: list, eval_rows: list, saved_snapshots: Path,
                  end_is_snapshot: bool) -> None:
    """The phase's declared outputs besides the weights (saved first), each written atomically;
    state.json last."""
    snapshots = out / "snapshots"
    snapshots.mkdir(exist_ok=True)
    for path in sorted(saved_snapshots.glob("step*.safetensors")):
        os.replace(path, snapshots / path.name)
    if end_is_snapshot:  # the phase end is a snapshot too: a hard link, no copy
        link = snapshots / f"step{state['global_step']}.safetensors"
        link.unlink(missing_ok=True)
        link.hardlink_to(out / "student.safetensors")
    write_csv(out / "train.csv", train_rows)
    write_csv(out / "eval.csv", eval_rows)
    write_json(out / "state.json", state)
