# Helpers shared by all rule files (config validation, the distinct phases, input functions).
from normgrow.config import (
    built_runs,
    job_resources,
    launch_ranks,
    pretrain_science,
    science_config,
    train_docs_required,
    validate_config,
)
from normgrow.curriculum import PhaseTable, run_checkpoints, run_phases

validate_config(config)  # the schema is package data: normgrow/config.schema.yaml

RUNS = built_runs(config)
SEEDS = [str(s) for s in config["seeds"]]
# Every distinct phase, trained once under results/phases/{key}/ (normgrow.curriculum).
PHASES = PhaseTable.from_config(config)
PHASE_DIR = "results/phases/{key}"
RUN_INDEX = "results/runs/{run}/seed{seed}/phases.json"


def corpus_train_docs():
    """Training documents to take: as configured; a streamed corpus takes what the runs need."""
    if config["data"]["train_docs"] is not None:
        return config["data"]["train_docs"]
    return train_docs_required(config) if config["data"]["source"].get("streaming") else None


def teacher_input():
    """The teacher as a rule input when the workflow builds it (nothing for a hub id)."""
    return [] if config["teacher"]["name"] else ["results/teacher/model"]


def teacher_param(wildcards, input):
    """What training loads: the built teacher directory, or the configured hub id / path."""
    return config["teacher"]["name"] or input.teacher[0]


def previous_phase(wildcards):
    """A phase starts from the outputs of the phase before it in its curriculum."""
    previous = PHASES.specs[wildcards.key].previous
    if previous is None:
        return []
    folder = PHASE_DIR.format(key=previous.key)
    return [f"{folder}/student.safetensors", f"{folder}/state.json"]


def previous_phase_dir(wildcards, input):
    return os.path.dirname(input.previous[0]) if input.previous else None


def run_phase_files(wildcards, name="state.json"):
    """The `name` file of every phase of one run and seed, in phase order."""
    return [f"{PHASE_DIR.format(key=key)}/{name}" for key in PHASES.runs[(wildcards.run, int(wildcards.seed))]]


def run_index_entries(wildcards):
    """Each phase of a run as the run sees it: its key and directory, and its curriculum entry."""
    keys = PHASES.runs[(wildcards.run, int(wildcards.seed))]
    return [{"phase": phase.index, "key": key, "dir": PHASE_DIR.format(key=key), "active_blocks": phase.active_blocks,
             "trainable_blocks": list(phase.trainable_blocks), "data_policy": phase.data}
            for phase, key in zip(run_phases(config, wildcards.run), keys)]


def run_indexes():
    """The phase index of every run and seed (config order)."""
    return [RUN_INDEX.format(run=run, seed=seed) for run in RUNS for seed in SEEDS]


def all_phase_outputs(name="state.json"):
    """The `name` file of every distinct phase."""
    return [f"{PHASE_DIR.format(key=key)}/{name}" for key in PHASES.specs]


def phase_checkpoint_steps(wildcards):
    """Global steps of the checkpoints that phase `wildcards.phase` of the run saved."""
    return [step for phase, step in run_checkpoints(config, wildcards.run) if phase == int(wildcards.phase)]


def diagnosed_phase_dir(wildcards):
    return PHASE_DIR.format(key=PHASES.runs[(wildcards.run, int(wildcards.seed))][int(wildcards.phase)])


def all_diagnostics():
    """One diagnostics report per phase (all its checkpoints) of every diagnosed run and seed."""
    return [
        f"results/diagnostics/{run}/seed{seed}/phase{p}.json"
        for run in config["diagnostics"]["runs"]
        if run in RUNS
        for seed in SEEDS
        for p in range(len(run_phases(config, run)))
    ]
