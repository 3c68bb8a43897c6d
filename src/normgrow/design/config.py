"""The validated config: schema (with defaults), the checks a JSON schema cannot express, and
what jobs ask a cluster for. Phases and their identity are in normgrow.design.curriculum.

Imports neither torch nor transformers (the DAG is built from it).
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import jsonschema
import yaml

from normgrow.design.curriculum import DataPosition, run_phases, shard_docs, snapshot_steps
from normgrow.design.kinds import SCHEMA, without_execution


class ConfigError(ValueError):
    """A configuration that cannot describe a valid experiment."""


# Keys renamed so that a word has one meaning (CONTRIBUTING.md, words), old → new: an old config still
# runs, with a FutureWarning naming both. `train.state_every` set how often a phase saves a *resume* state,
# not its state.json.
RENAMED = {("train", "state_every"): ("train", "resume_every")}


def rename_old_keys(config: dict) -> None:
    """Move each old key of RENAMED (where set) to its new name, in place. The old key wins over the new
    one: Snakemake merges a user's old config over the default's new key, so an old value is the user's."""
    for (section, old), (new_section, new) in RENAMED.items():
        if isinstance(config.get(section), dict) and old in config[section]:
            config.setdefault(new_section, {})[new] = config[section].pop(old)
            warnings.warn(f"{section}.{old} is renamed {new_section}.{new}: set that instead (the value "
                          f"{config[new_section][new]!r} is used)", FutureWarning, stacklevel=2)


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


def validate_config(config: dict, schema_path: Path = SCHEMA) -> dict:
    """Validate `config` against the JSON schema (Draft 2020-12), fill in defaults, then run the
    semantic checks. Raises ConfigError with one line per problem, naming the key.

    (Snakemake's own `validate` prints the whole schema with each error; this names the key.)
    """
    rename_old_keys(config)
    schema = yaml.safe_load(schema_path.read_text())
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError("invalid configuration:\n" + "\n".join(_error_line(error) for error in errors))
    check_config(config)
    drop_null_revisions(config)
    return config


def _error_line(error: jsonschema.ValidationError) -> str:
    """One schema error on a line naming its key; a number or boolean where a string is wanted also names the
    fix (YAML, in a file as on the command line, reads an all-digit revision as a number, yes and no as booleans)."""
    key = ".".join(str(part) for part in error.absolute_path) or "(top level)"
    wanted = error.validator_value if error.validator == "type" else ()
    if "string" in wanted and isinstance(error.instance, (bool, int, float)):
        read = "a boolean" if isinstance(error.instance, bool) else "a number"
        return f"  {key}: {error.message} (YAML reads the unquoted value as {read}: quote it for a string)"
    return f"  {key}: {error.message}"


def built_runs(config: dict) -> list[str]:
    """The runs the DAG builds, in the order of `runs`: those named by `build`, or all. (`build`
    exists because Snakemake merges a --configfile's `runs:` into the default's, so runs cannot be
    removed by another config file.) Runs left out stay defined, so that what a phase shares with
    them (its snapshots, the corpus a streamed source reads) does not change with `build`."""
    build = config.get("build")
    return [run for run in config["runs"] if build is None or run in build]


def merge(base: dict, update: dict) -> dict:
    """Recursive dict update in place, as Snakemake merges config files; returns `base`."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def command_line_config(parsed: Mapping, entries: Sequence[str]) -> dict:
    """`--config KEY=VALUE ...` as a YAML file reads it. Snakemake (snakemake.cli.parse_config) reads a
    top-level VALUE as a number or True/False, and otherwise as YAML with every scalar a string, so that
    `teacher={"revision": null}` arrives as 'null', `train={"resume_every": 7}` as '7' and `x=true` as 'true'.
    Each string it left is read again from the VALUE as typed, by yaml.safe_load (null is None, 7 an int,
    true a bool, a quoted "null" a string); what it read as another type stays (a top-level 1e-3, a value
    given through its API). `parsed` is Snakemake's reading (workflow.config_settings.config), `entries`
    the KEY=VALUE strings as typed (workflow.config_settings.config_args), merged in order as Snakemake
    merges them."""
    typed: dict = {}
    for entry in entries:
        key, _, text = entry.partition("=")
        try:
            merge(typed, {key: yaml.safe_load(text)})
        except yaml.YAMLError:  # Snakemake kept such a VALUE as a string; so does the schema's check
            continue
    return _strings_read_as_typed(dict(parsed), typed)


def _strings_read_as_typed(parsed, typed):
    """`parsed` with each string replaced by what `typed` holds at the same place, where it holds one."""
    if isinstance(parsed, str):
        return typed
    if isinstance(parsed, dict) and isinstance(typed, dict):
        return {key: _strings_read_as_typed(value, typed[key]) if key in typed else value
                for key, value in parsed.items()}
    if isinstance(parsed, list) and isinstance(typed, list) and len(parsed) == len(typed):
        return [_strings_read_as_typed(value, read) for value, read in zip(parsed, typed, strict=True)]
    return parsed


def train_docs_required(config: dict, runs: list[str] | None = None) -> int:
    """The most training documents any of `runs` reads (default: every run defined), its data positions
    replayed without training."""
    batch, shard = config["train"]["batch_size"], shard_docs(config)
    needed = 0
    for run in config["runs"] if runs is None else runs:
        position = DataPosition()
        for phase in run_phases(config, run):
            position = phase.start_position(position).advanced(phase.steps * batch, shard)
            needed = max(needed, position.high_water)
    return needed


def science_config(config: dict) -> dict:
    """The config without its execution settings (the schema's keys of kind `execution`,
    normgrow.design.kinds), its keys sorted: a rule's params, and what a report records, so that changing
    how jobs run rebuilds nothing."""
    return json.loads(json.dumps(without_execution(config), sort_keys=True))  # `--config` reorders keys


def pretrain_recipe(config: dict) -> dict | None:
    """The teacher's pretraining settings without its seed (`teacher.pretrain.seed`, which
    `pretrain_seed` resolves), so that a config leaving the seed unset keeps the params it had before
    the key existed; None for a hub or local teacher."""
    pretrain = without_execution(config)["teacher"].get("pretrain")
    return None if pretrain is None else {k: v for k, v in pretrain.items() if k != "seed"}


def pretrain_seed(config: dict) -> int:
    """The seed of the teacher's pretraining: `teacher.pretrain.seed`, or `data.split_seed` when unset."""
    seed = (config["teacher"].get("pretrain") or {}).get("seed")
    return config["data"]["split_seed"] if seed is None else seed


def check_growth(phase: dict, where: str, appends: bool, steps: int, snapshots: int) -> None:
    """A phase's growth operator (normgrow.design.curriculum.Growth): only where the phase appends blocks,
    `from` only for zero, `steps` for a ramp and only there, a ramp no longer than the phase."""
    growth = phase.get("growth")
    if growth is None or growth["operator"] == "random":
        return
    operator = growth["operator"]
    if not appends:
        raise ConfigError(f"{where}: operator {operator} on a phase that appends no block (phase 0, or as many "
                          "active_blocks as the phase before): a growth operator says how an appended block starts")
    if "from" in growth and operator != "zero":
        raise ConfigError(f"{where}.from: only the zero operator starts from a fresh block or a copy (operator "
                          f"{operator})")
    if operator == "ramp" and "steps" not in growth:
        raise ConfigError(f"{where}.steps: the ramp operator needs the updates over which c rises from 0 to 1")
    if operator != "ramp" and "steps" in growth:
        raise ConfigError(f"{where}.steps: only the ramp operator has steps (operator {operator})")
    if operator == "ramp" and growth["steps"] > steps:
        raise ConfigError(f"{where}.steps: a ramp of {growth['steps']} updates is longer than the phase ({steps}): "
                          "the phase would end with the block still mixed in")
    first = snapshot_steps(steps, snapshots)[0] if snapshots else steps
    if operator == "ramp" and growth["steps"] > first:
        raise ConfigError(f"{where}.steps: a ramp of {growth['steps']} updates outlasts the phase's first "
                          f"snapshot (update {first} of {steps}, diagnostics.snapshots_per_phase "
                          f"{snapshots}), which is diagnosed as the plain block: shorten the ramp")


def check_config(config: dict) -> None:
    """Raise ConfigError naming the key for what the schema cannot express."""
    blocks = config["student"]["blocks"]
    for run, spec in config["runs"].items():
        where = f"runs.{run}"
        if spec["curriculum"] not in config["curricula"]:
            raise ConfigError(f"{where}.curriculum: {spec['curriculum']!r} is not defined under "
                              f"curricula ({', '.join(sorted(config['curricula']))})")
    for name, phases in config["curricula"].items():
        active_before = 0
        for i, phase in enumerate(phases):
            where = f"curricula.{name}[{i}].active_blocks"
            active = phase["active_blocks"]
            if active > blocks:
                raise ConfigError(f"{where}: {active} blocks, but student.blocks is {blocks}")
            if active < active_before:
                raise ConfigError(f"{where}: blocks cannot be removed ({active_before} → {active})")
            check_growth(phase, f"curricula.{name}[{i}].growth", appends=i > 0 and active > active_before,
                         steps=phase.get("steps", config["train"]["phase_steps"]),
                         snapshots=config["diagnostics"]["snapshots_per_phase"])
            active_before = active
    for run in config["diagnostics"]["runs"]:
        if run not in config["runs"]:
            raise ConfigError(f"diagnostics.runs: {run!r} is not a run defined under runs")
    unknown = [run for run in config.get("build") or [] if run not in config["runs"]]
    if unknown:
        raise ConfigError(f"build: {', '.join(map(repr, unknown))} not defined under runs "
                          f"({', '.join(config['runs'])})")
    check_teacher_name(config["teacher"]["name"])
    check_revisions(config)
    if not config["tokenizer"]["train"] and config["teacher"]["name"] is None:
        raise ConfigError("tokenizer.train: false takes the teacher's tokenizer, but teacher.name is null (a teacher "
                          "pretrained here has no tokenizer of its own): set tokenizer.train: true or teacher.name")
    every, steps = config["train"]["eval_every"], config["train"]["phase_steps"]
    if every > steps:
        raise ConfigError(f"train.eval_every ({every}) is larger than train.phase_steps ({steps})")
    lr, min_lr = config["train"]["lr"], config["train"]["min_lr"]
    if min_lr > lr:
        raise ConfigError(f"train.min_lr ({min_lr}) is larger than train.lr ({lr}): the cosine schedule would rise "
                          "instead of decaying to it")
    if config["student"]["attn_implementation"] in VARLEN_ATTENTION and not config["resources"]["train"]["gpus"]:
        raise ConfigError(f"student.attn_implementation: {config['student']['attn_implementation']!r} trains only on "
                          "a GPU (torch's FlexAttention has no backward on CPU), but resources.train.gpus is 0: use "
                          "sdpa, or train on GPUs")
    ranks, batch = training_ranks(config), config["train"]["batch_size"]
    if batch % ranks:
        raise ConfigError(f"train.batch_size ({batch}) is not a multiple of the training ranks ({ranks} = "
                          "resources.train ranks_per_node × nodes): every rank takes an equal share of a batch")


# Attention kernels (student.attn_implementation) whose cost follows each document's own length in a row of
# several: with train.padding_free a rank's documents go in one row (normgrow.train.data.Batch.packed).
VARLEN_ATTENTION = frozenset({"flex_attention"})

# A Hugging Face hub id: `name` or `namespace/name`, of letters, digits, '-', '_' and '.'.
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def check_teacher_name(name: str | None) -> None:
    """teacher.name is null, an existing local directory, or a hub id (fetched when the job loads
    it); a path that exists nowhere (absolute, relative to the working directory, or with ~) is
    refused before any job runs."""
    if name is None or Path(name).expanduser().is_dir():
        return
    if Path(name).expanduser().exists():
        raise ConfigError(f"teacher.name: {name!r} is a file; give the directory that holds the teacher's config.json")
    if not HUB_ID.fullmatch(name):
        raise ConfigError(f"teacher.name: {name!r} is neither an existing local directory nor a Hugging Face hub id "
                          "(namespace/name)")


def check_teacher_files(config: dict, supported: Collection[str]) -> None:
    """Refuse, before any job runs, a teacher whose own files say that its jobs would fail: a
    `model_type` outside `supported` (normgrow.model.family's families, passed in: this room imports no
    other), and with tokenizer.train false a data.boundary_token its tokenizer lacks. Without this, the
    data preparation, teacher check and probe run first and every phase job then fails on the family
    (the tokenizer job on the boundary token).

    Read only where the files already are at parse time: a local directory, or a hub id in the hub
    cache (no download: `try_to_load_from_cache`, transformers' `local_files_only`). A hub id not
    cached, a teacher pretrained here, or a DAG built without huggingface_hub or transformers (the
    dry-run environment, envs/dry-run.txt) is left to the jobs."""
    name, revision = config["teacher"]["name"], config["teacher"].get("revision")
    if name is None:
        return
    path = teacher_file(name, revision, "config.json")
    if path is not None:
        check_teacher_family(name, json.loads(path.read_text()).get("model_type"), supported)
    tokenizer = None if config["tokenizer"]["train"] else teacher_tokenizer(name, revision)
    if tokenizer is not None:
        check_boundary_token(config, tokenizer)


def check_teacher_family(name: str, model_type: str | None, supported: Collection[str]) -> None:
    """Refuse a teacher whose config.json's `model_type` is none of the `supported` families."""
    if model_type not in supported:
        raise ConfigError(f"teacher.name: {name!r} is a {model_type!r} model (its config.json's model_type), not a "
                          f"supported decoder family ({', '.join(supported)}; normgrow.model.family): every phase "
                          "would fail on it")


def check_boundary_token(config: dict, tokenizer) -> None:
    """Refuse a data.boundary_token that the teacher's own `tokenizer` (tokenizer.train false) lacks."""
    boundary = config["data"]["boundary_token"]
    if boundary not in tokenizer.get_vocab():
        raise ConfigError(f"data.boundary_token: {boundary!r} is not in the vocabulary of the tokenizer of "
                          f"teacher.name {config['teacher']['name']!r} (tokenizer.train: false): name one of its "
                          f"tokens, such as its EOS token {tokenizer.eos_token!r}")


def teacher_file(name: str, revision: str | None, filename: str) -> Path | None:
    """`filename` of the teacher `name` (at `revision`) where it can be read without a download: in its
    local directory, or in the hub cache for a hub id; None elsewhere."""
    local = Path(name).expanduser()
    if local.is_dir():
        return local / filename if (local / filename).is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    cached = try_to_load_from_cache(name, filename, revision=revision)
    return Path(cached) if isinstance(cached, str) else None  # None, or a cached "no such file"


def teacher_tokenizer(name: str, revision: str | None):
    """The teacher's tokenizer where its files can be read without a download (`teacher_file`), loaded as
    the tokenizer job loads it (transformers' AutoTokenizer, local files only); None where they cannot,
    or without transformers."""
    if teacher_file(name, revision, "tokenizer_config.json") is None and teacher_file(
            name, revision, "tokenizer.json") is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return None
    try:
        return AutoTokenizer.from_pretrained(name, revision=revision, local_files_only=True)
    except (OSError, ValueError):  # files incomplete in the cache, or a tokenizer class this install lacks
        return None


def drop_null_revisions(config: dict) -> None:
    """`revision: null` and no revision are one config (the default branch): the null is dropped, so
    that neither a phase key nor a rule's params tell them apart (and configs written before revisions
    existed keep their keys)."""
    for holder in (config["teacher"], config["data"]["source"]):
        if "revision" in holder and holder["revision"] is None:
            del holder["revision"]


def check_revisions(config: dict) -> None:
    """A revision names a snapshot of a hub repository: teacher.revision needs a hub id as teacher.name
    (a local directory or a teacher pretrained here has none), data.source.revision the datasets loader."""
    name, revision = config["teacher"]["name"], config["teacher"].get("revision")
    if revision is not None and (name is None or Path(name).expanduser().is_dir()):
        where = "is null (a teacher pretrained here)" if name is None else f"{name!r} is a local directory"
        offline = ("; offline, keep the hub id as teacher.name and read it from the hub cache at its revision "
                   "(HF_HUB_OFFLINE=1; docs/cluster.md, Air-gapped compute nodes)") if name else ""
        raise ConfigError(f"teacher.revision: {revision!r} names a hub snapshot, but teacher.name {where}: set "
                          f"teacher.revision: null{offline}")
    source = config["data"]["source"]
    if source.get("revision") is not None and source["loader"] != "datasets":
        raise ConfigError(f"data.source.revision: {source['revision']!r} is for loader: datasets (a hub dataset); "
                          f"loader {source['loader']!r} checks its file by data.source.sha256 instead")
    if source.get("revision") is not None and not is_hub_dataset(source["path"]):
        raise ConfigError(f"data.source.revision: {source['revision']!r} names a hub snapshot, but data.source.path "
                          f"{source['path']!r} is a local path or a builder: set data.source.revision: null")


def is_hub_dataset(path: str) -> bool:
    """Whether data.source.path names a hub dataset (`namespace/name` that is no local path; a builder
    such as `parquet` has no namespace)."""
    return "/" in path and HUB_ID.fullmatch(path) is not None and not Path(path).expanduser().exists()


# Each pinned hub snapshot with the key naming its repository: a revision is a commit of that repository only.
PINNED_REVISIONS = {("teacher",): "name", ("data", "source"): "path"}


def check_pinned_revisions(layers: list[tuple[str, dict]]) -> None:
    """Refuse a revision pinned for another repository: `layers` are the config's sources as Snakemake merges
    them, in order, each (where it came from, its raw dict): config.yaml, each --configfile, --config. A
    layer that names another teacher.name (data.source.path) than the one a revision was pinned with, and
    sets no revision itself, would keep that commit of the old repository (configs/paper.yaml's Qwen
    revision under `--config 'teacher={"name": ...}'`)."""
    for section, key in PINNED_REVISIONS.items():
        where = ".".join(section)
        repository = pinned = None  # (value, origin) of the repository's key; (revision, repository) pinned
        for origin, layer in layers:
            holder = layer
            for part in section:
                holder = holder.get(part) if isinstance(holder, dict) else None
            if not isinstance(holder, dict):
                continue
            if key in holder:
                repository = (holder[key], origin)
            if "revision" in holder:
                pinned = (holder["revision"], repository)
        if pinned is None or pinned[0] is None or pinned[1] is None or pinned[1][0] == repository[0]:
            continue
        (revision, (old, old_origin)), (new, new_origin) = pinned, repository
        raise ConfigError(f"{where}.revision: {revision!r} is a commit of {where}.{key} {old!r} ({old_origin}), "
                          f"but {where}.{key} is {new!r} ({new_origin}): set {where}.revision with it, null for "
                          f"the default branch of {new!r} or one of its commits")


def offline_gaps(config: dict) -> list[str]:
    """With the hub switched off (HF_HUB_OFFLINE), what the jobs would read from the hub and the hub cache
    lacks: the teacher (its config.json at teacher.revision) and a hub dataset (its snapshot at
    data.source.revision), one line each naming the key and the download. Nothing when online, or without
    huggingface_hub (the dry-run environment)."""
    try:
        from huggingface_hub import constants, snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return []
    if not constants.HF_HUB_OFFLINE:
        return []
    gaps = []
    name, revision = config["teacher"]["name"], config["teacher"].get("revision")
    if name is not None and not Path(name).expanduser().is_dir() and teacher_file(name, revision,
                                                                                  "config.json") is None:
        gaps.append(f"teacher.name: {name!r} at revision {revision or 'main'} is not in the hub cache "
                    f"({constants.HF_HUB_CACHE}): `hf download {name} --revision {revision or 'main'}`")
    source = config["data"]["source"]
    if source["loader"] == "datasets" and is_hub_dataset(source["path"]):
        try:
            snapshot_download(source["path"], repo_type="dataset", revision=source.get("revision"),
                              local_files_only=True)
        except LocalEntryNotFoundError:
            gaps.append(f"data.source.path: dataset {source['path']!r} at revision {source.get('revision') or 'main'} "
                        f"is not in the hub cache ({constants.HF_HUB_CACHE}): `hf download {source['path']} "
                        f"--repo-type dataset --revision {source.get('revision') or 'main'}`")
    return gaps


def launch_ranks(config: dict) -> dict[str, int]:
    """Training processes per node (default: one per GPU, 1 on CPU), nodes, torchrun's grace after a SIGTERM,
    and the GPUs (with their CPUs) per node the job asked for (normgrow.cluster.launch.launch_phases; none for
    stand-in GPUs, which train on the CPU)."""
    train = config["resources"]["train"]
    return {"ranks_per_node": train["ranks_per_node"] or max(train["gpus"], 1), "nodes": train["nodes"],
            "shutdown_timeout": train["shutdown_timeout"],
            "gpus_per_node": 0 if train["stand_in_gpus"] else train["gpus"], "cpus_per_gpu": train["cpus_per_gpu"]}


def training_ranks(config: dict) -> int:
    """Processes that train one phase: ranks per node × nodes."""
    launch = launch_ranks(config)
    return launch["ranks_per_node"] * launch["nodes"]


def rank_batch_size(config: dict) -> int:
    """Documents of one training rank's share of a batch: what one GPU holds next to the teacher
    (also the teacher check's batch and the benchmark's)."""
    return max(1, config["train"]["batch_size"] // training_ranks(config))


def job_resources(config: dict, job_class: str, students: int = 1) -> dict:
    """Snakemake resources of a job of `job_class` (train, model, data: the jobs that share one `resources.*`
    section) for the SLURM executor plugin.

    A training job of several `students` (a group on one teacher forward per batch) asks for
    `students` times the memory and run time of one phase: an upper bound (the teacher and the
    batches are shared; the trace measures the GPU memory, normgrow.cluster.trace).

    One node: `gpu` (sbatch --gpus, a total for the job), `cpus_per_gpu` and `nodes=1`, so that SLURM cannot
    split the GPUs over two nodes (4 + 4), where the job step's `srun --nodes=1 --gpus=N` would never be placed.
    Several nodes: an `mpi="srun"` job of one
    task per node with `gres=gpu:N` per node — the plugin then does not wrap the job in srun and
    normgrow.cluster.launch starts torchrun on every node itself. A training job asks SLURM for SIGTERM
    `warning_seconds` before its time limit (`--signal=TERM@N`; its processes save a state on SIGTERM).
    A `gpu_model` asks for that GPU type, a `constraint` for node features (sbatch -C); a `reservation`
    and the class's own `slurm_extra` flags follow the signal flag in the plugin's slurm_extra."""
    spec = config["resources"][job_class]
    resources = {"mem_mb": spec["mem_mb"] * students, "runtime": spec["runtime"] * students}
    if spec["partition"]:
        resources["slurm_partition"] = spec["partition"]
    if spec["account"]:
        resources["slurm_account"] = spec["account"]
    if spec["qos"]:  # the plugin's own resource: its slurm_extra may not carry -p, -A or --qos
        resources["qos"] = spec["qos"]
    nodes, gpus = spec.get("nodes", 1), spec["gpus"]
    if nodes > 1:
        resources.update(nodes=nodes, tasks=nodes, mpi="srun", tasks_per_gpu=0)
        if gpus:
            resources.update(gres=f"gpu:{gpus}", cpus_per_gpu=spec["cpus_per_gpu"])
    elif gpus:
        resources.update(nodes=1, gpu=gpus, cpus_per_gpu=spec["cpus_per_gpu"])
    model = spec.get("gpu_model")
    if gpus and model and nodes > 1:
        resources["gres"] = f"gpu:{model}:{gpus}"
    elif gpus and model:
        resources["gpu_model"] = model  # the plugin: --gpus=MODEL:N
    if spec.get("constraint"):  # the plugin's own resource (sbatch -C): its slurm_extra may not carry -C
        resources["constraint"] = spec["constraint"]
    extra = []
    if spec.get("warning_seconds"):  # a phase saves its state on SIGTERM: send it before the time limit
        extra.append(f"--signal=TERM@{spec['warning_seconds']}")
    if spec.get("reservation"):
        extra.append(f"--reservation={spec['reservation']}")
    if spec.get("slurm_extra"):
        extra.append(spec["slurm_extra"])
    if extra:
        resources["slurm_extra"] = " ".join(extra)
    return resources
