"""How a phase runs, as typed values: `Execution` (threads, resume states, the fused loss's chunk,
compilation, activation checkpointing, the snapshots kept, live tracking) and `Tracking` (the config's
`tracking` section). None of it changes a phase's weights or metrics, so none of it is in a phase's
key (normgrow.design.curriculum); the schema marks these keys `execution` (normgrow.design.kinds).
Imports neither torch nor transformers."""

from __future__ import annotations

from dataclasses import dataclass, field

from normgrow.design.kinds import keys_of

TRAIN_EXECUTION = keys_of(("train",), "execution")  # train.* keys of kind execution in the schema

# What a phase writes, its declared outputs by name (workflow/rules/common.smk declares them from these), and the
# snapshots (the weights saved for the diagnostics along the phase), a directory beside them.
PHASE_FILES = {"student": "student.safetensors", "state": "state.json", "train": "train.csv", "eval": "eval.csv"}
SNAPSHOTS_DIR = "snapshots"

# What a training job writes beside its declared outputs: its own state, not outputs, because Snakemake
# removes a failed job's outputs before it retries, and the retry must find these (CONTRIBUTING.md, Layout).
RESUME_DIR = "resume"       # {phase dir}/resume/: the verified states a retried or preempted phase resumes from
JOB_FILE = ".job.json"  # {first phase dir}/.job.json: the job (TrainingJob) the ranks read under torchrun
# Inside RESUME_DIR, what a retry reads of the attempt before it (normgrow.train.attempts):
FINISHED_DIR = "finished"  # resume/finished/ and finished.json: hard links of a finished phase's outputs, which a
# retry restores when Snakemake deleted them after a kill that came after the phase finished (a TIMEOUT)
ERROR_FILES = "error-*.json"  # resume/error-{rank}.json: the Python exception that failed a rank: a retry fails at once
# and the live curves under the config's `tracking.dir` (results/tracking): appended to by every phase.


def shares_teacher_forward(students: int) -> bool:
    """Whether an update of `students` runs the teacher once before their steps and hands each its hidden
    states (a group: they stay in memory through every student's backward), or inside the one student's
    step, which frees them before its backward (a phase alone). The trainer, the memory trace and the
    plan (normgrow.train.trainer, normgrow.cluster.trace and .plan) all ask here."""
    return students > 1


@dataclass(frozen=True)
class Tracking:
    """The config's `tracking` section, and the name of the tracked run (set by the job)."""

    log_with: tuple[str, ...] = ()  # none: tracking off
    dir: str = ""
    project: str = ""
    init_kwargs: dict = field(default_factory=dict)
    name: str = ""

    @classmethod
    def from_config(cls, config: dict, name: str = "") -> Tracking:
        """From a validated config's `tracking` section (the schema's defaults filled in); off without one."""
        if "tracking" not in config:
            return cls(name=name)
        section = config["tracking"]
        return cls(tuple(section["log_with"]), section["dir"], section["project"], dict(section["init_kwargs"]), name)

    @classmethod
    def from_json(cls, data: dict) -> Tracking:
        return cls(**{**data, "log_with": tuple(data["log_with"])})



@dataclass(frozen=True)
class Execution:
    """How a phase runs and what it keeps besides its result; none of it changes what the phase
    learns, so none of it is in the key (`padding_free`, like the number of ranks, changes its
    weights and metrics within float rounding only). `snapshots`: the weights saved for the
    diagnostics along the phase, the last at its end (0: none); `tracking`: where the live curves go
    (normgrow.train.tracking)."""

    threads: int
    resume_every: int
    loss_chunk: int
    compile: bool
    activation_checkpointing: bool
    padding_free: bool = False
    snapshots: int = 0
    tracking: Tracking = Tracking()

    @classmethod
    def from_config(cls, config: dict, snapshots: int = 0, tracked_as: str = "") -> Execution:
        """From a validated config (the schema's defaults filled in); `tracked_as`: the tracked run's name."""
        return cls(threads=config["threads"], snapshots=snapshots, tracking=Tracking.from_config(config, tracked_as),
                   **{k: config["train"][k] for k in TRAIN_EXECUTION})

    @classmethod
    def from_json(cls, data: dict) -> Execution:
        """From `dataclasses.asdict` of one (a PhaseTask as JSON, normgrow.train.trainer)."""
        return cls(**{**data, "tracking": Tracking.from_json(data["tracking"])})
