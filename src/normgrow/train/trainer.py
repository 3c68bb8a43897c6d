"""The phase trainer (paper Algorithm 1, docs/definitions.md §3): one phase of one run, from the previous phase's
weights (or the seed's initial blocks) to this phase's weights and metrics.

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

Reliability: the phase saves a resumable state every `train.resume_every` updates (resume.py) and
continues from the newest verified one when rerun; SIGTERM (preemption) saves a state and exits
with `Preempted`; a non-finite loss or gradient stops the phase without touching the saved states;
the declared outputs are written only at the end, each atomically, and kept as a finished record (hard
links) when the resume states are cleared, for a retry of a job killed after it (attempts.py).

Groups: phases that read the same batch stream (normgrow.design.curriculum.stream_key: same seed, data
history, batch size, budget and teacher) can train side by side in one job (`train_phases`): one document
iterator draws each batch, the teacher's forward runs once and every student steps on it, each with its own
optimizer, schedule, RNG states, resume states and outputs (`Member`), so that a student's outputs are
bit-identical whether its phase trains alone or in a group (a phase alone is a group of one: one code path).

One update is `Trainer.train_step`, top to bottom: the batch, the teacher's forward, then each student's
forward, loss (`fused_objective`, called on the student's LM head weight after its forward), backward,
gradient clipping and optimizer step (as the benchmark, benchmarks/distill_step.py, and the memory trace,
normgrow.cluster.trace, make them), and its bookkeeping. Tests inject faults through `normgrow.train.faults`.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor
from torch.nn.utils import clip_grad_norm_
from tqdm import tqdm

from normgrow.design import science_code
from normgrow.design.curriculum import (
    STUDENT_KEYED_BEYOND,
    DataPosition,
    PhaseSpec,
    Training,
    snapshot_steps,
    stream_key,
)
from normgrow.design.execution import PHASE_FILES, RESUME_DIR, SNAPSHOTS_DIR, Execution, shares_teacher_forward
from normgrow.design.phase_record import COUNTERS, PhaseRecord, RunPosition
from normgrow.model.student import BlockStackStudent, at_positions
from normgrow.train.attempts import RetryableError, drop_errors, keep_finished, record_error
from normgrow.train.compiled import strict_compilation
from normgrow.train.data import Batch, DocumentIterator, TokenStore, fixed_batches
from normgrow.train.distributed import Ranks, process_group, shard_student
from normgrow.train.evaluate import evaluate_students
from normgrow.train.faults import Faults
from normgrow.train.forward import positions_and_labels, teacher_hidden_states
from normgrow.train.objective import Objective, fused_objective, loss_positions
from normgrow.train.outputs import load_student, save_student, write_csv, write_json
from normgrow.train.resume import ResumeStore, rng_state, seed_all, set_rng_state, spec_hash
from normgrow.train.teacher import load_teacher
from normgrow.train.tracking import Tracker


def build_optimizer(student: torch.nn.Module, training: Training) -> torch.optim.AdamW:
    """AdamW over the trainable parameters, with the fused kernel (one pass over each parameter's
    state instead of one per operation; its speed-up: docs/performance.md)."""
    params = [p for p in student.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=training.lr, betas=training.betas, eps=training.eps,
                             weight_decay=training.weight_decay, fused=True)


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


@dataclass(frozen=True)
class PhaseTask:
    """One phase a job trains: its spec, its execution settings, the previous phase's output
    directory (None at phase 0) and its own output directory."""

    spec: PhaseSpec
    execution: Execution
    previous: Path | None
    out: Path

    def to_json(self) -> dict:
        return {"spec": self.spec.to_json(), "execution": asdict(self.execution),
                "previous": None if self.previous is None else str(self.previous), "out": str(self.out)}

    @classmethod
    def from_json(cls, data: dict) -> PhaseTask:
        return cls(PhaseSpec.from_json(data["spec"]), Execution.from_json(data["execution"]),
                   None if data["previous"] is None else Path(data["previous"]), Path(data["out"]))

    def resume_spec(self) -> dict:
        """What a resume state or a finished record must have been saved for: the phase's key and the
        snapshots it keeps (normgrow.train.resume, normgrow.train.attempts)."""
        return {"key": self.spec.key, "snapshots": self.execution.snapshots}

    def resume_hash(self) -> str:
        return spec_hash(self.resume_spec())


class GroupFailed(RuntimeError):
    """Students of a group failed; the others finished and kept a final resume state, so rerunning
    the group writes their outputs without training them again."""


@dataclass(frozen=True)
class TrainingJob:
    """What one training job trains, built once by the job (workflow/scripts/train_phase.py): its phases (one,
    or a group that reads one batch stream), the teacher (a hub id or a directory, at `teacher_revision`
    for a hub teacher: the config's teacher.revision) and the tokenized data. Under torchrun every rank
    reads the same job from a JSON file (normgrow.cluster.launch)."""

    tasks: tuple[PhaseTask, ...]
    teacher: str
    tokens: Path
    teacher_revision: str | None = None

    def to_json(self) -> dict:
        return {"tasks": [task.to_json() for task in self.tasks], "teacher": self.teacher,
                "tokens": str(self.tokens), "teacher_revision": self.teacher_revision}

    @classmethod
    def from_json(cls, data: dict) -> TrainingJob:
        return cls(tuple(PhaseTask.from_json(task) for task in data["tasks"]), data["teacher"], Path(data["tokens"]),
                   data["teacher_revision"])


def train_phases(job: TrainingJob, log=sys.stderr) -> list[PhaseRecord]:
    """Train the job's phases side by side on one teacher forward per batch (a phase alone is a group of
    one): each from the previous phase's outputs (its task's `previous`) to student.safetensors, state.json,
    train.csv, eval.csv and snapshots/ in its `out`, resuming from `out/resume/` where a verified state of
    the same spec is there; returns their records in order. Runs in this process or on every rank of a
    torchrun launch (normgrow.cluster.launch), the students sharded by FSDP2 (normgrow.train.distributed).
    Refused unless every phase reads the same stream under the same execution settings (`check_group`).

    A Python exception (anything but a preemption) is recorded in every phase's resume directory before it
    propagates, so that a retry of the job fails at once with it (normgrow.train.attempts); a group refused
    by `check_group` writes nothing."""
    check_group(job.tasks)
    try:
        science_code.record()  # the code this process trains with, read before anything else is loaded
        with process_group() as ranks:
            torch.set_num_threads(job.tasks[0].execution.threads)
            spec = job.tasks[0].spec
            teacher = load_teacher(job.teacher, spec.teacher_dtype, spec.student["attn_implementation"],
                                   job.teacher_revision)
            teacher.to(ranks.device)
            log = log if ranks.main else open(os.devnull, "w")
            with strict_compilation(log):
                return Trainer(job.tasks, teacher, job.tokens, ranks, log).run()
    except (Preempted, RetryableError):
        raise
    except Exception as error:
        for task in job.tasks:
            record_error(task.out, error, alone=isinstance(error, torch.OutOfMemoryError))
        raise


def check_group(tasks: tuple[PhaseTask, ...]) -> None:
    """A group's phases read one batch stream (normgrow.design.curriculum.stream_key), are distinct, and share
    the execution settings every student of one loop follows."""
    if not tasks:
        raise ValueError("a group needs at least one phase")
    streams = {stream_key(task.spec) for task in tasks}
    if len(streams) > 1:
        raise ValueError("these phases read different batch streams and cannot share teacher forwards: " +
                         ", ".join(task.spec.describe() for task in tasks))
    if len({task.spec.key for task in tasks}) < len(tasks) or len({task.out for task in tasks}) < len(tasks):
        raise ValueError("a group lists one phase or output directory twice")
    shared = {(t.execution.threads, t.execution.resume_every, t.execution.loss_chunk, t.execution.padding_free)
              for t in tasks}
    if len(shared) > 1:
        raise ValueError("a group's phases must share threads, train.resume_every, train.loss_chunk and "
                         "train.padding_free")


@dataclass
class PhaseProgress:
    """What a phase in progress has done besides its weights and optimizer: the updates made, where
    the document iterator stands, the token counters and the metric rows so far. A resume state
    stores it as JSON (normgrow.train.resume), so that loading one runs no code."""

    step: int
    data: DataPosition
    counters: dict[str, int]
    train_rows: list[dict] = field(default_factory=list)
    eval_rows: list[dict] = field(default_factory=list)
    code: list[dict] = field(default_factory=list)  # normgrow.design.science_code.record of each job that trained it

    def trained_by(self, code: dict) -> None:
        """Count `code` among the code that trained this phase (a job resumed under other code adds it)."""
        if not self.code or self.code[-1] != code:
            self.code.append(code)

    @classmethod
    def start(cls, data: DataPosition) -> PhaseProgress:
        return cls(step=0, data=data, counters=dict.fromkeys(COUNTERS, 0))

    def to_json(self) -> dict:
        return {**asdict(self), "data": self.data.as_dict()}

    @classmethod
    def from_json(cls, saved: dict) -> PhaseProgress:
        return cls(**{"code": [science_code.UNRECORDED], **saved, "data": DataPosition(**saved["data"])})


@dataclass
class Member:
    """One student of the job, with what it alone keeps: its task, weights (`student`, from `before`: where
    the run stood), optimizer, objective, RNG states, progress, resume states, tracker and faults, and the
    ramp operator's `gate` of its last update. The trainer steps it; it has no steps of its own."""

    task: PhaseTask
    label: str
    student: BlockStackStudent
    before: RunPosition
    optimizer: torch.optim.AdamW
    objective: Objective
    resume: ResumeStore
    faults: Faults
    rng: dict
    progress: PhaseProgress
    snapshots: frozenset[int]  # the updates after which it saves a snapshot (its phase's end included)
    start_time: float
    tracker: Tracker | None = None
    gate: tuple[int, float] | None = None  # (first gated block, c): the ramp operator's, set each update

    @property
    def spec(self) -> PhaseSpec:
        return self.task.spec

    @cached_property
    def trained(self) -> list[torch.nn.Parameter]:
        """The parameters its optimizer steps, in the optimizer's order (what the gradient clip reads), listed
        once per phase."""
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    @contextmanager
    def own_rng(self):
        """Run with this student's RNG states, and keep what it drew: it draws the same numbers alone or in
        a group."""
        set_rng_state(self.rng)
        try:
            yield
        finally:
            self.rng = rng_state()


class Trainer:
    """The job's phases on this rank, in lockstep on one batch stream: the constructor sets up every student
    (`member`) and resumes them at one update (`resume`); `run` makes every update (`train_step`), evaluates
    and saves resume states when due, and finishes every phase (`finish`).

    A phase alone is a group of one, on the same path. A student whose update fails (a non-finite
    loss) leaves the group with an error naming it; the others train to the end. Every student that
    trains to the end saves a final resume state before its outputs are written, so that work
    survives a sibling's failure or a kill in between. When every student failed the job fails with
    their own error (FloatingPointError) and writes nothing; when some finished, with `GroupFailed`,
    and rerunning it writes their outputs without training them again."""

    def __init__(self, tasks: tuple[PhaseTask, ...], teacher, tokens_dir: Path, ranks: Ranks, log):
        self.teacher, self.ranks, self.log = teacher, ranks, log
        self.teacher_head = teacher.get_output_embeddings().weight
        first, execution = tasks[0].spec, tasks[0].execution  # what check_group found equal in every task
        self.steps, self.eval_every = first.phase.steps, first.training.eval_every
        self.resume_every, self.loss_chunk = execution.resume_every, execution.loss_chunk
        self.padding_free = execution.padding_free
        self.attn_implementation = first.student["attn_implementation"]
        self.pad_id = json.loads((tokens_dir / "meta.json").read_text())["boundary_id"]
        self.members = []
        for task in tasks:
            try:
                self.members.append(self.member(task, teacher))
            except (OSError, ValueError, RuntimeError) as error:  # a bad input names its student
                raise type(error)(f"{task.spec.describe()}: {error}") from error
        self.batches = DocumentIterator(TokenStore(tokens_dir / "train"), self.members[0].progress.data,
                                        first.shard_docs, first.training.batch_size, self.pad_id, first.seed)
        valid_batches = fixed_batches(TokenStore(tokens_dir / "valid"), first.training.batch_size, self.pad_id)
        self.valid = [self.rows(batch) for batch in valid_batches]  # this rank's, once
        self.label = self.members[0].label if len(tasks) == 1 else f"group of {len(tasks)}"
        self.faults = Faults.from_environment()
        self.failures: list[str] = []
        self.resume()
        self.live = [m for m in self.members if m.progress.step < self.steps]

    def member(self, task: PhaseTask, teacher) -> Member:
        """A student set up for its phase: built from the teacher and the previous phase (`build_student`),
        with a fresh AdamW, its RNG states seeded from its seed and phase, at the start of its phase."""
        spec, training = task.spec, task.spec.training
        if training.batch_size % self.ranks.world:
            raise ValueError(f"train.batch_size ({training.batch_size}) must be a multiple of the number of ranks "
                             f"({self.ranks.world}) so that every rank trains on equal shares of the global batch")
        start_time = time.time()
        seed_all(spec.seed * 1000 + spec.index)
        task.out.mkdir(parents=True, exist_ok=True)
        student, before = build_student(spec, task.execution, teacher, task.previous, self.ranks)
        optimizer = build_optimizer(student, training)
        resume = ResumeStore(task.out / RESUME_DIR, task.resume_spec(), self.ranks, log=self.log)
        faults = Faults.from_environment().for_phase(spec.key)
        progress = PhaseProgress.start(spec.phase.start_position(before.data))
        snapshots = frozenset(snapshot_steps(spec.phase.steps, task.execution.snapshots))
        return Member(task, spec.describe(), student, before, optimizer, Objective(**spec.objective), resume, faults,
                      rng_state(), progress, snapshots, start_time)

    def resume(self) -> None:
        """Load every student's newest verified state (weights, optimizer and RNGs in place), at one update: a
        student that finished in an earlier job (its final state) stays finished; the others resume at the
        newest update all of them have a state for (a job killed between two students' saves leaves them one
        state apart). Then start each student's tracker at its next update, and the batches where the
        unfinished students stand (refused unless they read one stream from one place: `batch_stream`)."""
        latest = [member.resume.latest_step() or 0 for member in self.members]
        common = min([step for step in latest if step < self.steps], default=self.steps)
        for member, step in zip(self.members, latest, strict=True):
            with member.own_rng():
                saved = member.resume.load_latest(member.student, member.optimizer,
                                                  at_most=self.steps if step == self.steps else common)
            if saved is not None:
                member.progress = PhaseProgress.from_json(saved)
                print(f"{member.label}: resumed from the state at update {member.progress.step}", file=self.log,
                      flush=True)
            if member.progress.step < self.steps:
                member.progress.trained_by(science_code.record())
            attached = {"spec": member.spec.to_json(), "execution": asdict(member.task.execution)}
            member.tracker = Tracker(member.task.execution.tracking, attached, self.ranks.main, self.ranks.device,
                                     first_step=member.before.global_step + member.progress.step + 1)
        unfinished = [m for m in self.members if m.progress.step < self.steps]
        for member in unfinished[1:]:  # stream_key's promise, as the one document iterator reads it
            if batch_stream(member) != batch_stream(unfinished[0]):
                raise RuntimeError(f"{member.label} reads other batches than {unfinished[0].label}: its phase does "
                                   "not belong to this group")
        if unfinished:
            self.batches.at = unfinished[0].progress.data
        if len(self.members) > 1:
            print(f"{self.label} students on one teacher forward per batch: " +
                  ", ".join(m.label for m in self.members), file=self.log, flush=True)

    def run(self) -> list[PhaseRecord]:
        """Train every unfinished student to the phase's end (`train_step` per update; evaluations, resume
        states and SIGTERM between updates), then write every phase's outputs; returns their records in order."""
        start = min((m.progress.step for m in self.live), default=self.steps)
        sigterm = SigtermFlag()
        progress = tqdm(range(start + 1, self.steps + 1), desc=self.label, mininterval=5, file=self.log,
                        initial=start, total=self.steps, disable=not self.ranks.main)
        try:
            for t in progress:
                self.train_step(t)
                if not self.live:  # every student failed: nothing left to train or evaluate
                    break
                row = self.live[0].progress.train_rows[-1]
                progress.set_postfix(loss=f"{row['loss']:.3f}", lr=f"{row['lr']:.1e}", refresh=False)
                if t % self.eval_every == 0 or t == self.steps:
                    self.evaluate(t)
                self.faults.after_update(t)
                preempted = self.ranks.any(sigterm.requested)
                if preempted or (t % self.resume_every == 0 and t < self.steps):
                    for member in self.live:
                        self.save_resume_state(member)
                if preempted:
                    raise Preempted(f"{self.label}: SIGTERM at update {t}; states saved in " +
                                    ", ".join(str(m.task.out / RESUME_DIR) for m in self.live) + "; rerun to resume")
                self.faults.after_state(t)
            for member in self.live:  # finished work survives a sibling's failure or a kill before every output
                self.save_resume_state(member)
        finally:
            sigterm.restore()
            for member in self.members:
                member.tracker.finish()
        if len(self.failures) == len(self.members):  # nothing finished: the students' own error, no outputs
            raise FloatingPointError("; ".join(self.failures))
        if self.failures:
            raise GroupFailed("; ".join(self.failures) + ". The other students of the group finished and kept a final "
                              "resume state: rerunning the group writes their outputs without training them again.")
        records = [self.finish(member) for member in self.members]
        if self.ranks.main:  # every record before any state goes: a kill in between leaves one or the other
            for member in self.members:
                keep_finished(member.task.out, member.resume.spec_hash)
        for member in self.members:
            member.resume.clear()
            if self.ranks.main:
                drop_errors(member.task.out)
        self.ranks.barrier()
        for member in self.members:
            member.faults.after_finish()
        return records

    def train_step(self, t: int) -> None:
        """Update `t` of every live student, top to bottom: the batch and this rank's rows of it, the teacher's
        forward (once before the students for a group; inside the student's step for a phase alone, which frees
        its hidden states before the backward: normgrow.design.execution.shares_teacher_forward), then each
        student with its own RNG states: its LR and gate, forward, loss (the fused KD + CE at the loss positions,
        after the forward, on the head weight: FSDP2's root keeps its parameters gathered until its backward),
        backward, clip and optimizer step; then its bookkeeping. A student whose loss is not finite is reported
        and leaves `live`."""
        batch = self.batches.next_batch()
        rows = self.rows(batch)
        positions, labels = positions_and_labels(rows)
        normalizer = int(loss_positions(batch.attention_mask).sum())  # the global batch's loss positions
        group = shares_teacher_forward(len(self.live))
        shared = teacher_hidden_states(self.teacher, rows, positions) if group else None
        failed = []
        for member in list(self.live):
            lr = self.start_update(member, t)
            with member.own_rng():
                teacher_hidden = teacher_hidden_states(self.teacher, rows, positions) if shared is None else shared
                hidden = member.student(rows.input_ids, rows.attention_mask, rows.position_ids, member.gate)
                terms = fused_objective(member.objective, at_positions(hidden, positions),
                                        member.student.lm_head.weight, teacher_hidden, self.teacher_head, labels,
                                        chunk=self.loss_chunk, normalizer=normalizer)
                del hidden, teacher_hidden  # a phase alone's teacher states go before its backward
                terms["total"] = member.faults.loss(t, terms["total"])
                (terms["total"] * self.ranks.world).backward()  # FSDP averages gradients over the ranks
                grad_norm = clip_grad_norm_(member.trained, member.spec.training.grad_clip)  # all ranks', unclipped
                member.optimizer.step()
                member.optimizer.zero_grad(set_to_none=True)
            try:
                self.record_update(member, t, lr, batch.tokens, terms, grad_norm)
            except FloatingPointError as error:
                self.live.remove(member)
                failed.append(str(error))
        for error in failed if self.live else []:
            print(f"{error}; the group continues without it", file=self.log, flush=True)
        self.failures += failed

    def rows(self, batch: Batch) -> Batch:
        """This rank's rows of `batch` as the students and the teacher read them: padded, or with
        `train.padding_free` laid end to end (Batch.packed; in one row for a varlen attention kernel);
        loss positions, labels and token counts are the same either way."""
        rows = self.ranks.rows(batch, self.pad_id)
        return rows.packed_or_padded(self.pad_id, self.padding_free, self.attn_implementation)

    def start_update(self, member: Member, t: int) -> float:
        """Set update `t`'s LR and the ramp operator's gate c (for the update and the evaluation after
        it; none past the ramp); returns the LR."""
        phase = member.spec.phase
        lr = phase.lr(t, member.spec.training)
        for group in member.optimizer.param_groups:
            group["lr"] = lr
        c = phase.growth.gate(t)
        member.gate = None if c is None else (phase.appended[0], c)
        return lr

    def record_update(self, member: Member, t: int, lr: float, tokens: int, terms: dict[str, torch.Tensor],
                      grad_norm: torch.Tensor) -> None:
        """Keep update `t` (`terms`: this rank's, `grad_norm`: global, both before any host sync): stop on a
        non-finite loss or gradient norm (the update is applied then, but a phase that stops saves nothing,
        so its last good resume state stays), count its `tokens`, log its row, save a snapshot if due."""
        loss, ce, kd, kd_soft = self.ranks.sum(*(terms[k].detach() for k in ("total", "ce", "kd", "kd_soft")))
        grad_norm = float(grad_norm.full_tensor() if isinstance(grad_norm, DTensor) else grad_norm)  # every rank's
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            raise FloatingPointError(f"{member.label}: non-finite loss ({loss}) or gradient norm ({grad_norm}) at "
                                     f"update {t}; the last good resume state is kept in {member.resume.directory}")
        counters = member.progress.counters
        layers = member.spec.phase.active_blocks * member.spec.student["layers_per_block"]
        counters["steps"] += 1
        counters["tokens"] += tokens
        counters["active_layer_tokens"] += tokens * layers
        member.progress.step = t
        row = {"step": t, "global_step": member.before.global_step + t, "loss": loss, "ce": ce, "kd": kd,
               "kd_soft": kd_soft, "lr": lr, "grad_norm": grad_norm, "tokens": tokens}
        member.progress.train_rows.append(row)
        member.tracker.log_update(row, row["global_step"])
        if t in member.snapshots and t < self.steps:
            snapshot = member.resume.directory / SNAPSHOTS_DIR / f"step{row['global_step']}.safetensors"
            save_student(member.student, snapshot)

    def evaluate(self, t: int) -> None:
        """Every live student on the validation rows (the teacher run once per batch), its metrics kept."""
        live = self.live
        metrics = evaluate_students([m.student for m in live], [m.objective for m in live], self.teacher, self.valid,
                                    self.loss_chunk, self.ranks, [m.gate for m in live])
        for member, result in zip(live, metrics, strict=True):
            global_step = member.before.global_step + t
            row = {"step": t, "global_step": global_step, "ce": result["ce"], "kd": result["kd"],
                   "kd_soft": result["kd_soft"], "ppl": result["ppl"]}
            member.progress.eval_rows.append(row)
            member.tracker.log_eval(row, global_step)
            print(f"{member.label} step {t}: validation CE {result['ce']:.4f} KD {result['kd']:.4f} "
                  f"PPL {result['ppl']:.2f}", file=self.log, flush=True)

    def save_resume_state(self, member: Member) -> None:
        member.progress.data = self.batches.at
        member.faults.before_state()
        with member.own_rng():
            member.resume.save(member.progress.step, member.student, member.optimizer, member.progress.to_json())

    def finish(self, member: Member) -> PhaseRecord:
        """The phase's outputs (weights, state.json, train.csv, eval.csv, snapshots); returns its record.
        The resume states are cleared by `run` once every phase has finished."""
        spec, phase, counters, at = member.spec, member.spec.phase, member.progress.counters, member.progress.data
        start = phase.start_position(member.before.data)
        counters["unique_tokens"] = self.batches.unique_tokens(start, at)
        end = member.before.after(phase.steps, at, counters)
        record = PhaseRecord(
            key=spec.key, seed=spec.seed, phase=spec.index, placement=spec.placement,
            active_blocks=phase.active_blocks, active_layers=phase.active_blocks * spec.student["layers_per_block"],
            trainable_blocks=list(phase.trainable_blocks), data_policy=phase.data,
            global_step=end.global_step, data=end.data, phase_counters=counters, run_counters=end.run_counters,
            final_eval=member.progress.eval_rows[-1], wall_seconds=time.time() - member.start_time,
            ranks=self.ranks.world, code=member.progress.code)
        out = member.task.out
        save_student(member.student, out / PHASE_FILES["student"])
        if self.ranks.main:
            write_outputs(out, record, member.progress.train_rows, member.progress.eval_rows,
                          member.resume.directory / SNAPSHOTS_DIR, phase.steps in member.snapshots)
        return record


def batch_stream(member: Member) -> tuple:
    """What decides the batches a student reads from here on: where it stands, its seed's document order, its
    batch size."""
    spec = member.spec
    return member.progress.data, spec.seed, spec.shard_docs, spec.training.batch_size


def build_student(spec: PhaseSpec, execution: Execution, teacher: torch.nn.Module, previous: Path | None,
                  ranks: Ranks) -> tuple[BlockStackStudent, RunPosition]:
    """The student as this phase trains it: built from the teacher, the previous phase's weights
    loaded, its blocks activated and marked trainable, compiled if asked, sharded. Also where the run
    stands (at phase 0, a fresh run's start)."""
    s, phase = spec.student, spec.phase
    student = BlockStackStudent.from_teacher(teacher, spec.placement, s["blocks"], s["layers_per_block"],
                                             spec.seed, s["attn_implementation"],
                                             s.get("boundary_norm_init", STUDENT_KEYED_BEYOND["boundary_norm_init"]),
                                             phase.active_blocks)
    if spec.index == 0:
        before = RunPosition()
    else:
        before = PhaseRecord.read(previous / PHASE_FILES["state"]).position
        load_student(student, previous / PHASE_FILES["student"])
    student.start_appended(phase.appended, phase.growth)
    student.activation_checkpointing = execution.activation_checkpointing
    student.set_trainable(list(phase.trainable_blocks))
    student.train()
    if execution.compile:  # slow first compile; off by default
        student.compile_layers()
    shard_student(student, ranks, spec.training.precision)
    return student, before


def write_outputs(out: Path, record: PhaseRecord, train_rows: list, eval_rows: list, saved_snapshots: Path,
                  end_is_snapshot: bool) -> None:
    """The phase's declared outputs besides the weights (saved first), each written atomically;
    state.json last."""
    snapshots = out / SNAPSHOTS_DIR
    snapshots.mkdir(exist_ok=True)
    for path in sorted(saved_snapshots.glob("step*.safetensors")):
        os.replace(path, snapshots / path.name)
    if end_is_snapshot:  # the phase end is a snapshot too: a hard link, no copy
        link = snapshots / f"step{record.global_step}.safetensors"
        link.unlink(missing_ok=True)
        link.hardlink_to(out / PHASE_FILES["student"])
    write_csv(out / PHASE_FILES["train"], train_rows)
    write_csv(out / PHASE_FILES["eval"], eval_rows)
    write_json(out / PHASE_FILES["state"], record.to_json())
