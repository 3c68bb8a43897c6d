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
from normgrow.resume import ResumeStore, rng_state, seed_all, set_rng_state
from normgrow.student import BlockStackStudent
from normgrow.teacher import load_teacher

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
        return _train_on_ranks(spec, execution, teacher_path, Path(tokens_dir), previous, Path(out), ranks,
                               log if ranks.main else open(os.devnull, "w"))


def _train_on_ranks(spec: PhaseSpec, execution: Execution, teacher_path: str, tokens_dir: Path,
                    previous: Path | None, out: Path, ranks: Ranks, log) -> dict:
    start_time = time.time()
    torch.set_num_threads(execution.threads)
    seed, p, phase, training = spec.seed, spec.index, spec.phase, spec.training
    if training.batch_size % ranks.world:
        raise ValueError(f"train.batch_size ({training.batch_size}) must be a multiple of the number of ranks "
                         f"({ranks.world}) so that every rank trains on equal shares of the global batch")
    seed_all(seed * 1000 + p)
    out.mkdir(parents=True, exist_ok=True)
    label = spec.describe()
    meta = json.loads((tokens_dir / "meta.json").read_text())
    pad_id = meta["boundary_id"]

    teacher = load_teacher(teacher_path, spec.teacher_dtype, spec.student["attn_implementation"])
    teacher.to(ranks.device)
    s = spec.student
    student = BlockStackStudent.from_teacher(teacher, spec.placement, s["blocks"], s["layers_per_block"],
                                             seed, s["attn_implementation"])
    if p == 0:
        before = {"data": DataState().as_dict(), "run_counters": dict.fromkeys(COUNTERS, 0), "global_step": 0}
    else:
        before = read_json(previous / "state.json")
        load_student(student, previous / "student.safetensors")
    student.active_blocks = phase.active_blocks
    student.activation_checkpointing = execution.activation_checkpointing
    student.set_trainable(list(phase.trainable_blocks))
    student.train()
    if execution.compile:  # slow first compile; off by default
        student.compile_layers()
    shard_student(student, ranks, training.precision)
    optimizer = build_optimizer(student, training)
    objective = Objective(**spec.objective)

    store = TokenStore(tokens_dir / "train")
    valid_batches = fixed_batches(TokenStore(tokens_dir / "valid"), training.batch_size, pad_id)
    valid = [ranks.rows(batch, pad_id) for batch in valid_batches]  # this rank's rows, once per phase
    start_state = phase.start_state(DataState(**before["data"]))
    batches = DocumentIterator(store, start_state, spec.shard_docs, training.batch_size, pad_id, seed)
    layers = phase.active_blocks * s["layers_per_block"]
    counters = dict.fromkeys(COUNTERS, 0)
    train_rows, eval_rows = [], []
    done = 0

    resume = ResumeStore(out / "resume", {"key": spec.key, "snapshots": execution.snapshots}, ranks, log=log)
    saved = resume.load_latest(student, optimizer)
    if saved is not None:
        set_rng_state(saved["rng"])
        batches.state = DataState(**saved["data"])
        counters, train_rows, eval_rows = saved["counters"], saved["train_rows"], saved["eval_rows"]
        done = saved["step"]
        print(f"{label}: resumed from the state at update {done}", file=log, flush=True)

    def save_state(t: int) -> None:
        resume.save(t, student, optimizer, {"step": t, "rng": rng_state(), "data": batches.state.as_dict(),
                                            "counters": counters, "train_rows": train_rows, "eval_rows": eval_rows})

    snapshots = set(snapshot_steps(phase.steps, execution.snapshots))
    faults = Faults.from_environment()
    sigterm = SigtermFlag()
    progress = tqdm(range(done + 1, phase.steps + 1), desc=label, mininterval=5, file=log,
                    initial=done, total=phase.steps, disable=not ranks.main)
    try:
        for t in progress:
            lr = phase.lr(t, training)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = batches.next_batch()
            terms = training_step(student, teacher, optimizer, ranks.rows(batch, pad_id), objective,
                                  training.grad_clip, execution.loss_chunk, ranks.world,
                                  normalizer=int(loss_positions(batch.attention_mask).sum()),
                                  loss_hook=functools.partial(faults.loss, t))
            loss, ce, kd, kd_soft = ranks.sum(*(terms[k] for k in ("total", "ce", "kd", "kd_soft")))
            grad_norm = float(terms["grad_norm"])  # global: the same on every rank
            if not (math.isfinite(loss) and math.isfinite(grad_norm)):
                raise FloatingPointError(f"{label}: non-finite loss ({loss}) or gradient norm ({grad_norm}) at "
                                         f"update {t}; the last good resume state is kept in {out / 'resume'}")
            counters["steps"] += 1
            counters["tokens"] += batch.tokens
            counters["active_layer_tokens"] += batch.tokens * layers
            global_step = before["global_step"] + t
            train_rows.append({"step": t, "global_step": global_step, "loss": loss, "ce": ce, "kd": kd,
                               "kd_soft": kd_soft, "lr": lr, "grad_norm": grad_norm, "tokens": batch.tokens})
            progress.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.1e}", refresh=False)
            if t in snapshots and t < phase.steps:
                save_student(student, resume.directory / "snapshots" / f"step{global_step}.safetensors")
            if t % training.eval_every == 0 or t == phase.steps:
                metrics = evaluate_student(student, teacher, valid, objective, execution.loss_chunk, ranks)
                eval_rows.append({"step": t, "global_step": global_step, "ce": metrics["ce"],
                                  "kd": metrics["kd"], "kd_soft": metrics["kd_soft"], "ppl": metrics["ppl"]})
                print(f"{label} step {t}: validation CE {metrics['ce']:.4f} KD {metrics['kd']:.4f} "
                      f"PPL {metrics['ppl']:.2f}", file=log, flush=True)
            faults.after_update(t)
            preempted = ranks.any(sigterm.requested)
            if preempted or (t % execution.state_every == 0 and t < phase.steps):
                save_state(t)
            if preempted:
                raise Preempted(f"{label}: SIGTERM at update {t}; state saved in {out / 'resume'}; "
                                "rerun the phase to resume")
            faults.after_state(t)
    finally:
        sigterm.restore()

    counters["unique_tokens"] = batches.unique_tokens(start_state, batches.state)
    state = {
        "key": spec.key, "seed": seed, "phase": p, "placement": spec.placement,
        "active_blocks": phase.active_blocks, "active_layers": layers, "trainable_blocks": list(phase.trainable_blocks),
        "data_policy": phase.data, "global_step": before["global_step"] + phase.steps,
        "data": batches.state.as_dict(), "phase_counters": counters,
        "run_counters": {k: before["run_counters"][k] + counters[k] for k in COUNTERS},
        "final_eval": eval_rows[-1], "wall_seconds": time.time() - start_time, "ranks": ranks.world,
    }
    save_student(student, out / "student.safetensors")
    if ranks.main:
        write_outputs(out, state, train_rows, eval_rows, resume.directory / "snapshots", phase.steps in snapshots)
    resume.clear()
    ranks.barrier()
    return state


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
