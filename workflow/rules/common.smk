# Helpers shared by the rule files: config validation, wildcard constraints, input functions.
import re

from normgrow.config import phase_spec, run_phases, validate_config

validate_config(config, workflow.source_path("../schemas/config.schema.yaml"))

RUNS = list(config["runs"])
SEEDS = [str(s) for s in config["seeds"]]
PHASE_DIR = "results/runs/{run}/seed{seed}/phase{phase}"
PHASE_FILES = ["student.safetensors", "state.json", "train.csv", "eval.csv"]


wildcard_constraints:
    run="|".join(map(re.escape, RUNS)),
    seed=r"\d+",
    phase=r"\d+",


def teacher_path():
    """The teacher to load: the pretrained embedded teacher, or a hub id / local path."""
    return config["teacher"]["name"] or "results/teacher/model"


def teacher_input():
    """The teacher as a rule input when the workflow builds it (nothing for a hub id)."""
    return [] if config["teacher"]["name"] else ["results/teacher/model"]


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
