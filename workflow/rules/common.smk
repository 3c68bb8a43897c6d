# Helpers shared by all rule files (config validation, run/seed lists, input functions).
from normgrow.config import (
    job_resources,
    launch_ranks,
    phase_spec,
    rank_batch_size,
    run_checkpoints,
    run_phases,
    train_docs_required,
    validate_config,
)

validate_config(config, workflow.source_path("../schemas/config.schema.yaml"))

RUNS = list(config["runs"])
SEEDS = [str(s) for s in config["seeds"]]
PHASE_DIR = "results/runs/{run}/seed{seed}/phase{phase}"


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


def previous_phase_dir(wildcards, input):
    return os.path.dirname(input.previous[0]) if input.previous else None


def previous_phase(wildcards):
    """Phase p starts from phase p−1's checkpoint of the same run and seed."""
    p = int(wildcards.phase)
    if p == 0:
        return []
    prev = PHASE_DIR.format(run=wildcards.run, seed=wildcards.seed, phase=p - 1)
    return [f"{prev}/student.safetensors", f"{prev}/state.json"]


def all_phase_outputs(name="state.json"):
    """The `name` file of every phase of every run, for every seed."""
    return [
        f"{PHASE_DIR.format(run=run, seed=seed, phase=p)}/{name}"
        for run in RUNS
        for seed in SEEDS
        for p in range(len(run_phases(config, run)))
    ]


def phase_checkpoint_steps(wildcards):
    """Global steps of the checkpoints that phase `wildcards.phase` of the run saved."""
    return [step for phase, step in run_checkpoints(config, wildcards.run) if phase == int(wildcards.phase)]


def all_diagnostics():
    """One diagnostics report per phase (all its checkpoints) of every diagnosed run and seed."""
    return [
        f"results/diagnostics/{run}/seed{seed}/phase{p}.json"
        for run in config["diagnostics"]["runs"]
        for seed in SEEDS
        for p in range(len(run_phases(config, run)))
    ]
