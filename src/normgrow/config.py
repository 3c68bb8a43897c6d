"""Runs as data: expand the validated config into phases, and check what a JSON schema cannot.

A run names a placement and a curriculum; a curriculum is a list of phases. Each phase has
`active_blocks`, `trainable` ("all" active blocks, or only the "newest"), `data` (the policy of the
document iterator at phase start: `continue`, `reset` or `fresh`), `steps` and `lr_restart`.
Every phase starts a fresh optimizer; `lr_restart: false` continues the previous phase's
schedule instead of restarting it (the schedule then spans both phases).
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from normgrow.data import DataState, phase_start_state
from normgrow.placement import PLACEMENTS


class ConfigError(ValueError):
    """A configuration that cannot describe a valid experiment."""


def _with_defaults(validator_class):
    """A validator that also fills in the schema's `default`s (the jsonschema FAQ recipe)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def validate_config(config: dict, schema_path: Path) -> dict:
    """Validate `config` against the JSON schema (Draft 2020-12), fill in defaults, then run the
    semantic checks. Raises ConfigError with one line per problem, naming the key.

    (Snakemake's own `validate` prints the whole schema with each error; this names the key.)
    """
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for error in errors:
            key = ".".join(str(part) for part in error.absolute_path) or "(top level)"
            lines.append(f"  {key}: {error.message}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines))
    check_config(config)
    return config


def run_phases(config: dict, run: str) -> list[dict]:
    """The phases of `run`, with defaults filled in and each phase's LR-schedule segment.

    `schedule_offset` is the number of updates of the same schedule before this phase and
    `schedule_length` the schedule's total length (both from `lr_restart`).
    """
    spec = config["runs"][run]
    phases = []
    for i, raw in enumerate(config["curricula"][spec["curriculum"]]):
        phase = {"trainable": "all", "data": "continue", "lr_restart": True,
                 "steps": config["train"]["phase_steps"], **raw}
        phase["index"] = i
        phases.append(phase)
    segments: list[list[dict]] = []
    for phase in phases:
        if phase["lr_restart"] or not segments:
            segments.append([])
        segments[-1].append(phase)
    for segment in segments:
        offset = 0
        for phase in segment:
            phase["schedule_offset"] = offset
            phase["schedule_length"] = sum(q["steps"] for q in segment)
            offset += phase["steps"]
    return phases


def shard_docs(config: dict) -> int:
    """Documents in the shard: those one phase of `train.phase_steps` steps consumes."""
    return config["train"]["phase_steps"] * config["train"]["batch_size"]


def phase_spec(config: dict, run: str, seed: int, phase: int) -> dict:
    """Everything the trainer needs to run one phase, as plain data (a Snakemake param)."""
    return {
        "run": run,
        "seed": int(seed),
        "phase": int(phase),
        "placement": config["runs"][run]["placement"],
        "phases": run_phases(config, run),
        "student": config["student"],
        "objective": config["objective"],
        "train": config["train"],
        "shard_docs": shard_docs(config),
        "snapshots": snapshots_per_phase(config, run),
        "teacher_dtype": config["teacher"]["dtype"],
        "threads": config["threads"],
    }


def snapshots_per_phase(config: dict, run: str) -> int:
    """Checkpoints a phase of `run` saves for the diagnostics (0: only its final checkpoint)."""
    diagnostics = config.get("diagnostics", {})
    return diagnostics.get("snapshots_per_phase", 3) if run in diagnostics.get("runs", []) else 0


def snapshot_steps(steps: int, count: int) -> list[int]:
    """`count` evenly spaced steps of a phase, the last being the phase end (at least 1)."""
    return sorted({max(1, round(k * steps / count)) for k in range(1, count + 1)}) if count else []


def run_checkpoints(config: dict, run: str) -> list[tuple[int, int]]:
    """(phase, global step) of every saved checkpoint of `run`, in order."""
    out, offset = [], 0
    for phase in run_phases(config, run):
        out += [(phase["index"], offset + t) for t in snapshot_steps(phase["steps"], snapshots_per_phase(config, run))]
        offset += phase["steps"]
    return out


def train_docs_required(config: dict) -> int:
    """The most training documents any run reads (its data states replayed without training)."""
    batch, shard = config["train"]["batch_size"], shard_docs(config)
    needed = 0
    for run in config["runs"]:
        state = DataState()
        for phase in run_phases(config, run):
            state = phase_start_state(phase["data"], state, shard)
            state = state.advanced(phase["steps"] * batch, shard)
            needed = max(needed, state.high_water)
    return needed


def check_config(config: dict) -> None:
    """Raise ConfigError naming the key for what the schema cannot express."""
    blocks = config["student"]["blocks"]
    for run, spec in config["runs"].items():
        where = f"runs.{run}"
        if spec["placement"] not in PLACEMENTS:
            raise ConfigError(f"{where}.placement: {spec['placement']!r} is not a registered "
                              f"placement ({', '.join(sorted(PLACEMENTS))})")
        if spec["curriculum"] not in config["curricula"]:
            raise ConfigError(f"{where}.curriculum: {spec['curriculum']!r} is not defined under "
                              f"curricula ({', '.join(sorted(config['curricula']))})")
    for name, phases in config["curricula"].items():
        previous = 0
        for i, phase in enumerate(phases):
            where = f"curricula.{name}[{i}].active_blocks"
            active = phase["active_blocks"]
            if active > blocks:
                raise ConfigError(f"{where}: {active} blocks, but student.blocks is {blocks}")
            if active < previous:
                raise ConfigError(f"{where}: blocks cannot be removed ({previous} → {active})")
            previous = active
    for run in config.get("diagnostics", {}).get("runs", []):
        if run not in config["runs"]:
            raise ConfigError(f"diagnostics.runs: {run!r} is not a run defined under runs")
    if not config["tokenizer"]["train"] and config["teacher"]["name"] is None:
        raise ConfigError("tokenizer.train: false takes the teacher's tokenizer, but teacher.name is null (a teacher "
                          "pretrained here has no tokenizer of its own): set tokenizer.train: true or teacher.name")
    every, steps = config["train"]["eval_every"], config["train"]["phase_steps"]
    if every > steps:
        raise ConfigError(f"train.eval_every ({every}) is larger than train.phase_steps ({steps})")
    ranks, batch = training_ranks(config), config["train"]["batch_size"]
    if batch % ranks:
        raise ConfigError(f"train.batch_size ({batch}) is not a multiple of the training ranks ({ranks} = "
                          "resources.train ranks_per_node × nodes): every rank takes an equal share of a batch")


def launch_ranks(config: dict) -> dict[str, int]:
    """Training processes per node (default: one per GPU, 1 on CPU) and nodes (normgrow.launch)."""
    train = config["resources"]["train"]
    return {"ranks_per_node": train["ranks_per_node"] or max(train["gpus"], 1), "nodes": train["nodes"]}


def training_ranks(config: dict) -> int:
    """Processes that train one phase: ranks per node × nodes."""
    launch = launch_ranks(config)
    return launch["ranks_per_node"] * launch["nodes"]


def rank_batch_size(config: dict) -> int:
    """Documents of one training rank's share of a batch: what one GPU holds next to the teacher
    (also the teacher check's batch and the benchmark's)."""
    return max(1, config["train"]["batch_size"] // training_ranks(config))


def job_resources(config: dict, group: str) -> dict:
    """Snakemake resources of a job of `group` (train, model, data) for the SLURM executor plugin.

    One node: `gpu` (sbatch --gpus) and `cpus_per_gpu`. Several nodes: an `mpi="srun"` job of one
    task per node with `gres=gpu:N` per node — the plugin then does not wrap the job in srun and
    normgrow.launch starts torchrun on every node itself."""
    spec = config["resources"][group]
    resources = {"mem_mb": spec["mem_mb"], "runtime": spec["runtime"]}
    if spec["partition"]:
        resources["slurm_partition"] = spec["partition"]
    if spec["account"]:
        resources["slurm_account"] = spec["account"]
    nodes, gpus = spec.get("nodes", 1), spec["gpus"]
    if nodes > 1:
        resources.update(nodes=nodes, tasks=nodes, mpi="srun", tasks_per_gpu=0)
        if gpus:
            resources.update(gres=f"gpu:{gpus}", cpus_per_gpu=spec["cpus_per_gpu"])
    elif gpus:
        resources.update(gpu=gpus, cpus_per_gpu=spec["cpus_per_gpu"])
    return resources
