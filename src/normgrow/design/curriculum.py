"""The curriculum in one place: config → typed, frozen phase specs, and what identifies a phase.

A run names a placement and a curriculum; a curriculum is a list of phases. Each phase has
`active_blocks`, `trainable` (`all` active blocks, or only the `newest`), `data` (the policy of the
document iterator at phase start: `continue`, `reset` or `fresh`), `steps` and `lr_restart`.
Every phase starts a fresh optimizer; `lr_restart: false` continues the previous phase's schedule
instead of restarting it (the schedule then spans both phases).

**Identity.** A phase's result is determined by the teacher, the data and tokenizer, the student's
dimensions and placement, the objective, the seed, the optimisation settings and precision, and the
prefix of phases that leads to it. `PhaseSpec` holds exactly these, and `PhaseSpec.key` hashes
them: two runs whose curricula start with the same phases share those phases' keys, so the
workflow trains each distinct phase once (under `results/phases/{key}/`). Each phase enters the key
normalised — by the blocks it trains rather than its `trainable` word (`newest` of one active
block is `all`), and with `reset` at phase 0 read as `continue` (both start at document 0).

Execution settings (the config schema's keys of kind `execution`, normgrow.design.kinds: `Execution`
holds those a phase job reads — threads, `train.resume_every`, `train.loss_chunk`, `train.compile`,
`train.activation_checkpointing` — and ranks and resources decide where it runs) and the snapshots
kept for the diagnostics are not part of the key: changing them retrains nothing, and resume states
saved under other execution settings stay valid.

This module imports neither torch nor transformers: building the DAG (`snakemake -n`) reads it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace

from normgrow.design.kinds import keys_of, without_execution
from normgrow.design.schedule import lr_at

# train.* keys that change a phase's result (their kind in the schema; those that do not: normgrow.design.execution)
TRAIN_SCIENCE = keys_of(("train",), "science")
KEY_LENGTH = 16  # hex digits of SHA-256 in a phase key
# student.* keys added after phases were first keyed, with the value every phase had before them: a phase
# at that value keeps the key it had (the paper's phases keep their keys, as a `random` growth does).
STUDENT_KEYED_BEYOND = {"boundary_norm_init": "teacher"}
# The document iterator's order (normgrow.train.data), part of every phase key and of the teacher's
# pretraining parameters, so that results read in another order are never taken for these.
DOCUMENT_ORDER = "every epoch of the shard permuted by (seed, epoch)"


# ---------------------------------------------------------------- the document iterator's position
@dataclass(frozen=True)
class DataPosition:
    """Where a run's document iterator stands: mode (`shard` or `stream`), next position,
    documents read so far (normgrow.train.data.DocumentIterator reads from it)."""

    mode: str = "shard"
    position: int = 0
    high_water: int = 0

    def advanced(self, reads: int, shard_docs: int) -> DataPosition:
        end = self.position + reads
        if self.mode == "stream":
            return replace(self, position=end, high_water=max(self.high_water, end))
        return replace(self, position=end, high_water=max(self.high_water, min(end, shard_docs)))

    def as_dict(self) -> dict:
        return asdict(self)


DATA_POLICIES = ("continue", "reset", "fresh")


def phase_start_position(policy: str, previous_end: DataPosition) -> DataPosition:
    """The iterator at the start of a phase under data policy `continue` (where the previous phase
    left it: `previous_end`), `reset` (the start of the shard) or `fresh` (stream mode, at the first
    document not yet read in this run)."""
    if policy == "continue":
        return previous_end
    if policy == "reset":
        return replace(previous_end, mode="shard", position=0)
    if policy == "fresh":
        return replace(previous_end, mode="stream", position=previous_end.high_water)
    raise ValueError(f"unknown data policy {policy!r} ({', '.join(DATA_POLICIES)})")


# -------------------------------------------------------------- how an appended block starts (schema: growth.operator)


@dataclass(frozen=True)
class Growth:
    """How the blocks a phase appends start (a curriculum phase's `growth`; docs/growth.md):

    - `random`: as initialised from the seed with the others (the paper; the default);
    - `zero`: their attention output and MLP down projections zeroed at the append step, from their
      fresh initialisation (`source` fresh) or from a copy of the block before (`source` copy) —
      LLaMA-Pro's block expansion; the student's function is unchanged where the block's residual
      branches are its whole output (pre-norm), not where a norm follows the residual add (post-norm);
    - `copy`: a copy of the block before, norms included (StackBERT; G_stack);
    - `ramp`: the appended blocks' output mixed as h + c·(B(h) − h), c = t / `steps` at update t
      (1 from update `steps` on) — MSG's gate; c = 0 leaves the function unchanged for every placement.

    The operator is applied to the block weights the previous phase left (all K blocks are
    initialised once, from the seed); c is derived from the update, so a resumed phase continues it."""

    operator: str = "random"
    source: str = "fresh"
    steps: int = 0

    @classmethod
    def from_config(cls, entry: dict | None) -> Growth:
        entry = entry or {}
        return cls(entry.get("operator", "random"), entry.get("from", "fresh"), entry.get("steps", 0))

    def identity(self) -> dict | None:
        """None for `random` (so the paper's phases keep their keys), else what the operator does."""
        if self.operator == "random":
            return None
        return {"operator": self.operator, **({"from": self.source} if self.operator == "zero" else {}),
                **({"steps": self.steps} if self.operator == "ramp" else {})}

    @property
    def label(self) -> str:
        """A short name: random, zero, zero-copy, copy, ramp{steps}."""
        if self.operator == "zero" and self.source == "copy":
            return "zero-copy"
        return f"ramp{self.steps}" if self.operator == "ramp" else self.operator

    def gate(self, t: int) -> float | None:
        """c at update t (0 before the first update), or None: no gate (not a ramp, or past it)."""
        if self.operator != "ramp" or t >= self.steps:
            return None
        return t / self.steps


# ---------------------------------------------------------------- phases
@dataclass(frozen=True)
class Phase:
    """One phase of a curriculum, defaults filled in; `schedule_offset` is the number of updates of
    the same LR schedule before this phase and `schedule_length` the schedule's total length (both
    from `lr_restart`)."""

    index: int
    active_blocks: int
    trainable: str
    data: str
    steps: int
    schedule_offset: int
    schedule_length: int
    growth: Growth = Growth()
    appended: tuple[int, ...] = ()  # the blocks this phase activates (none at phase 0)

    @property
    def trainable_blocks(self) -> tuple[int, ...]:
        """`all` active blocks, or only the `newest` one (freeze control)."""
        active = self.active_blocks
        return tuple(range(active)) if self.trainable == "all" else (active - 1,)

    def lr(self, t: int, training: Training) -> float:
        """Learning rate of update t (1-based) of this phase."""
        return lr_at(self.schedule_offset + t, self.schedule_length, training.lr, training.min_lr,
                     training.warmup_fraction)

    def start_position(self, previous_end: DataPosition) -> DataPosition:
        return phase_start_position(self.data, previous_end)

    def identity(self) -> dict:
        """What of this phase determines its result, normalised (see the module docstring)."""
        data = "continue" if self.data == "reset" and self.index == 0 else self.data
        identity = {"active_blocks": self.active_blocks, "trainable_blocks": list(self.trainable_blocks), "data": data,
                    "steps": self.steps, "schedule_offset": self.schedule_offset,
                    "schedule_length": self.schedule_length}
        growth = self.growth.identity()
        return identity if growth is None else {**identity, "growth": growth}


def curriculum_phases(raw: list[dict], phase_steps: int) -> tuple[Phase, ...]:
    """A curriculum's phases from its config entries (defaults filled in, schedule segments)."""
    filled = [{"trainable": "all", "data": "continue", "lr_restart": True, "steps": phase_steps, **entry}
              for entry in raw]
    phases, offset, length = [], 0, 0
    for i, entry in enumerate(filled):
        if entry["lr_restart"] or i == 0:
            offset, length = 0, entry["steps"]
            for later in filled[i + 1:]:
                if later["lr_restart"]:
                    break
                length += later["steps"]
        before = filled[i - 1]["active_blocks"] if i else entry["active_blocks"]
        phases.append(Phase(i, entry["active_blocks"], entry["trainable"], entry["data"], entry["steps"],
                            offset, length, Growth.from_config(entry.get("growth")),
                            tuple(range(before, entry["active_blocks"]))))
        offset += entry["steps"]
    return tuple(phases)


def run_phases(config: dict, run: str) -> tuple[Phase, ...]:
    """The phases of `run`."""
    return curriculum_phases(config["curricula"][config["runs"][run]["curriculum"]], config["train"]["phase_steps"])


# ---------------------------------------------------------------- one phase of one run and seed
@dataclass(frozen=True)
class Training:
    """The train.* settings that change a phase's result (TRAIN_SCIENCE, less `phase_steps`, which
    enters through each phase's steps and the shard)."""

    batch_size: int
    lr: float
    min_lr: float
    warmup_fraction: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    grad_clip: float
    eval_every: int
    precision: str

    @classmethod
    def from_config(cls, train: dict) -> Training:
        return cls(**{k: train[k] for k in TRAIN_SCIENCE if k != "phase_steps"} | {"betas": tuple(train["betas"])})


@dataclass(frozen=True)
class PhaseSpec:
    """Everything that determines one phase's result: the last of `phases` is the phase, the others
    the curriculum prefix that leads to it. `upstream` holds the teacher, data and tokenizer
    settings (for the key only: the trainer reads the teacher and tokens it is given)."""

    seed: int
    placement: str
    phases: tuple[Phase, ...]
    student: dict
    objective: dict
    training: Training
    shard_docs: int
    teacher_dtype: str
    upstream: dict = field(default_factory=dict)

    @property
    def phase(self) -> Phase:
        return self.phases[-1]

    @property
    def index(self) -> int:
        return self.phase.index

    @property
    def key(self) -> str:
        """Hex digest of the normalised spec: equal keys mean the same trained result."""
        student = {k: v for k, v in self.student.items() if (k, v) not in STUDENT_KEYED_BEYOND.items()}
        identity = {**asdict(self), "student": student, "phases": [p.identity() for p in self.phases],
                    "document_order": DOCUMENT_ORDER}
        blob = json.dumps(canonical_numbers(identity), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:KEY_LENGTH]

    @property
    def previous(self) -> PhaseSpec | None:
        """The spec of the phase this one starts from (None at phase 0)."""
        return replace(self, phases=self.phases[:-1]) if len(self.phases) > 1 else None

    def describe(self) -> str:
        return f"{self.placement} seed {self.seed} phase {self.index} [{self.key}]"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> PhaseSpec:
        phases = tuple(Phase(**{**p, "growth": Growth(**p["growth"]), "appended": tuple(p["appended"])})
                       for p in data["phases"])
        return cls(**{**data, "phases": phases,
                      "training": Training(**{**data["training"], "betas": tuple(data["training"]["betas"])})})


def stream_key(spec: PhaseSpec) -> str:
    """Hex digest of what determines the batches a phase reads, in order, and the teacher's outputs on
    them: the seed, the shard, the batch size, the evaluation interval, the teacher, data and
    tokenizer, and each phase's data policy and budget up to this one. Phases with equal stream
    keys (e.g. pre- and post-norm of one run and seed, or joint and grow's first phase) may train
    side by side on one teacher forward per batch (normgrow.train.trainer.train_phases)."""
    identity = {"seed": spec.seed, "shard_docs": spec.shard_docs, "batch_size": spec.training.batch_size,
                "eval_every": spec.training.eval_every, "teacher_dtype": spec.teacher_dtype,
                "attn_implementation": spec.student["attn_implementation"], "upstream": spec.upstream,
                "data": [[p.identity()["data"], p.steps] for p in spec.phases], "document_order": DOCUMENT_ORDER}
    blob = json.dumps(canonical_numbers(identity), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:KEY_LENGTH]


@dataclass(frozen=True)
class PhaseGroup:
    """The phases one training job trains (normgrow.train.trainer.train_phases): a phase alone, or, with
    `resources.train.group_size` > 1, phases that read one batch stream side by side on one teacher
    forward per batch. `id` names the job: a phase alone's key, a digest of a group's keys."""

    keys: tuple[str, ...]

    @property
    def id(self) -> str:
        if len(self.keys) == 1:
            return self.keys[0]
        return hashlib.sha256(" ".join(self.keys).encode()).hexdigest()[:KEY_LENGTH]


def canonical_numbers(value):
    """`value` with every integral float written as an int, recursively: `1.0` and `1` (as a YAML
    file may spell a temperature or a weight decay) are the same setting."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: canonical_numbers(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical_numbers(v) for v in value]
    return value


def shard_docs(config: dict) -> int:
    """Documents in the shard: those one phase of `train.phase_steps` steps consumes."""
    return config["train"]["phase_steps"] * config["train"]["batch_size"]


def upstream_identity(config: dict) -> dict:
    """The teacher, data and tokenizer settings a phase's result depends on (a named teacher is its
    name and dtype; a pretrained one its recipe, less its execution settings)."""
    science = without_execution(config)
    given = science.get("teacher", {})
    teacher = {k: v for k, v in given.items() if k not in ("min_margin_nats", "pretrain")}
    if teacher.get("name") is None and "pretrain" in given:
        teacher["pretrain"] = given["pretrain"]
    return {"teacher": teacher, "data": science.get("data"), "tokenizer": science.get("tokenizer")}


def phase_spec(config: dict, run: str, seed: int | str, phase: int | str) -> PhaseSpec:
    """The spec of phase `phase` of `run` under `seed`."""
    phases = run_phases(config, run)
    return PhaseSpec(seed=int(seed), placement=config["runs"][run]["placement"], phases=phases[:int(phase) + 1],
                     student=dict(config["student"]), objective=dict(config["objective"]),
                     training=Training.from_config(config["train"]), shard_docs=shard_docs(config),
                     teacher_dtype=config["teacher"]["dtype"], upstream=upstream_identity(config))


def run_specs(config: dict, run: str, seed: int | str) -> list[PhaseSpec]:
    """Every phase of `run` under `seed`, in order."""
    return [phase_spec(config, run, seed, p) for p in range(len(run_phases(config, run)))]


# ---------------------------------------------------------------- snapshots for the diagnostics
def snapshots_per_phase(config: dict, run: str) -> int:
    """Snapshots a phase of `run` saves for the diagnostics (0: none; the last is at the phase's end)."""
    diagnostics = config.get("diagnostics", {})
    return diagnostics.get("snapshots_per_phase", 3) if run in diagnostics.get("runs", []) else 0


def snapshot_steps(steps: int, count: int) -> list[int]:
    """`count` evenly spaced steps of a phase, the last being the phase end (at least 1)."""
    return sorted({max(1, round(k * steps / count)) for k in range(1, count + 1)}) if count else []


def run_snapshots(config: dict, run: str) -> list[tuple[int, int]]:
    """(phase, global step) of every snapshot of `run` its diagnostics read, in order."""
    out, offset = [], 0
    for phase in run_phases(config, run):
        out += [(phase.index, offset + t) for t in snapshot_steps(phase.steps, snapshots_per_phase(config, run))]
        offset += phase.steps
    return out


# ---------------------------------------------------------------- the distinct phases of a config
@dataclass(frozen=True)
class PhaseTable:
    """Every distinct phase of a config: `specs` by key (in order of first use), the keys of every
    (run, seed) in phase order, and the snapshots each phase keeps (the most any run sharing it
    asks for)."""

    specs: dict[str, PhaseSpec]
    runs: dict[tuple[str, int], list[str]]
    snapshots: dict[str, int]

    @classmethod
    def from_config(cls, config: dict) -> PhaseTable:
        """The phases of the runs built (`build`). A phase keeps the snapshots of every run defined
        that shares it, built or not, so that its outputs do not change with `build`."""
        build = config.get("build")
        specs, runs, snapshots = {}, {}, {}
        for run in config["runs"]:
            for seed in config["seeds"]:
                keys = []
                for spec in run_specs(config, run, seed):
                    key = spec.key
                    snapshots[key] = max(snapshots.get(key, 0), snapshots_per_phase(config, run))
                    keys.append(key)
                    if build is None or run in build:
                        specs.setdefault(key, spec)
                if build is None or run in build:
                    runs[(run, int(seed))] = keys
        return cls(specs, runs, {key: snapshots[key] for key in specs})

    def groups(self, size: int) -> list[PhaseGroup]:
        """Every phase in one training job: the phases that read one batch stream (`stream_key`), in
        order of first use, in groups of at most `size` (of one where `size` is 1 or a stream has one
        phase)."""
        streams: dict[str, list[str]] = {}
        for key, spec in self.specs.items():
            streams.setdefault(stream_key(spec), []).append(key)
        chunks = [keys[i:i + size] for keys in streams.values() for i in range(0, len(keys), max(size, 1))]
        return [PhaseGroup(tuple(chunk)) for chunk in chunks]

    def sharing(self, key: str) -> list[str]:
        """Labels `run seed S phase P` of every run phase that is phase `key`."""
        return [f"{run} seed {seed} phase {p}" for (run, seed), keys in self.runs.items()
                for p, k in enumerate(keys) if k == key]
