"""Configuration: schema validation with defaults, key-naming errors, phases and data budgets."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO, SCHEMA
from snakemake.cli import parse_config
from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

from normgrow.design.config import (
    ConfigError,
    built_runs,
    check_pinned_revisions,
    check_teacher_files,
    command_line_config,
    job_resources,
    launch_ranks,
    offline_gaps,
    pretrain_recipe,
    pretrain_seed,
    rank_batch_size,
    train_docs_required,
    validate_config,
)
from normgrow.design.curriculum import shard_docs
from normgrow.model.family import PREFIXES


def load(path) -> dict:
    return yaml.safe_load(path.read_text())


def merge(base: dict, override: dict) -> dict:
    """Recursive dict merge, as Snakemake merges --configfile over the embedded configfile."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@pytest.fixture
def raw() -> dict:
    """config.yaml as read, before validation fills its defaults (conftest's `default` is validated)."""
    return load(REPO / "config.yaml")


@pytest.fixture
def ci(raw) -> dict:
    return merge(raw, load(REPO / "configs" / "ci.yaml"))


def error_of(config: dict) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(config, SCHEMA)
    return str(info.value)


# ---------------------------------------------------------------- valid configurations
def test_default_config_is_valid(raw):
    assert validate_config(raw, SCHEMA) is raw
    assert raw["threads"] == 1
    assert raw["data"]["train_docs"] is None


def test_ci_config_merged_over_default_is_valid(raw, ci):
    validated = validate_config(ci, SCHEMA)
    assert validated["train"]["phase_steps"] == 12
    assert validated["train"]["min_lr"] == raw["train"]["min_lr"]  # inherited from config.yaml
    assert validated["runs"] == raw["runs"]
    assert raw["data"]["source"].items() <= validated["data"]["source"].items()
    assert train_docs_required(validated) <= validated["data"]["train_docs"]


def test_defaults_are_filled_in(raw):
    del raw["threads"]
    raw["objective"] = {}
    del raw["train"]["betas"], raw["train"]["eps"], raw["train"]["weight_decay"]
    del raw["data"]["split_seed"], raw["data"]["train_docs"]
    del raw["teacher"]["min_margin_nats"], raw["student"]["attn_implementation"]
    config = validate_config(raw, SCHEMA)
    assert config["threads"] == 1
    assert config["objective"] == {"alpha": 0.7, "gamma": 0.3, "temperature": 1.0}
    assert config["train"]["betas"] == [0.9, 0.95]
    assert config["train"]["eps"] == 1e-8
    assert config["train"]["weight_decay"] == 0.0
    assert config["data"]["split_seed"] == 42
    assert config["data"]["train_docs"] is None
    assert config["teacher"]["min_margin_nats"] == 0.5
    assert config["student"]["attn_implementation"] == "sdpa"
    # the phases of every curriculum get their defaults too
    for phases in config["curricula"].values():
        for phase in phases:
            assert phase["lr_restart"] is True
            assert phase["trainable"] in ("all", "newest")
            assert phase["data"] in ("continue", "reset", "fresh")
    assert config["curricula"]["grow"][0] == {"active_blocks": 1, "trainable": "all", "data": "continue",
                                              "lr_restart": True}


def test_given_values_are_not_overwritten_by_defaults(raw):
    raw["threads"] = 3
    raw["objective"] = {"alpha": 0.5}
    config = validate_config(raw, SCHEMA)
    assert config["threads"] == 3
    assert config["objective"] == {"alpha": 0.5, "gamma": 0.3, "temperature": 1.0}


def test_datasets_source_is_valid(raw):
    raw["data"]["source"] = {"loader": "datasets", "path": "HuggingFaceFW/fineweb-edu",
                                 "name": "sample-10BT", "streaming": True, "text_field": "text"}
    config = validate_config(raw, SCHEMA)
    assert config["data"]["source"]["split"] == "train"


# ---------------------------------------------------------------- errors name the key
def test_unknown_top_level_key(raw):
    raw["epochs"] = 3
    message = error_of(raw)
    assert "(top level)" in message and "'epochs'" in message


def test_wrong_type(raw):
    raw["train"]["batch_size"] = "x"
    message = error_of(raw)
    assert "train.batch_size" in message and "'x' is not of type 'integer'" in message


def test_several_schema_errors_one_line_each(raw):
    raw["train"]["batch_size"] = "x"
    raw["student"]["blocks"] = 0
    lines = error_of(raw).splitlines()
    assert lines[0] == "invalid configuration:"
    assert len(lines) == 3
    assert any(line.strip().startswith("train.batch_size:") for line in lines)
    assert any(line.strip().startswith("student.blocks:") for line in lines)


def test_phase_with_unknown_key(raw):
    raw["curricula"]["grow"][1]["lr"] = 0.1
    message = error_of(raw)
    assert "curricula.grow.1" in message and "'lr'" in message


def test_phase_with_unknown_data_policy(raw):
    raw["curricula"]["grow"][2]["data"] = "shuffle"
    message = error_of(raw)
    assert "curricula.grow.2.data" in message and "'shuffle'" in message


def test_unknown_placement(raw):
    raw["runs"]["pre-joint"]["placement"] = "peri-norm"
    message = error_of(raw)
    assert "\n  runs.pre-joint.placement: 'peri-norm' does not match" in message


def command_line(*entries: str) -> dict:
    """`snakemake --config ENTRY ...` as the workflow reads it: Snakemake's own reading, then command_line_config."""
    return command_line_config(parse_config(list(entries)), list(entries))


def test_command_line_values_are_read_as_a_yaml_file_reads_them():
    """Snakemake hands on nested values and a top-level null or true as strings ('null', '7', 'true')."""
    assert parse_config(['teacher={"revision": null}']) == {"teacher": {"revision": "null"}}  # what is fixed
    assert command_line('teacher={"name": null, "revision": null}') == {"teacher": {"name": None, "revision": None}}
    assert command_line('teacher={"name": "null"}') == {"teacher": {"name": "null"}}  # quoted: a string, as in YAML
    assert command_line('train={"resume_every": 7, "lr": 0.5, "activation_checkpointing": true}') == {
        "train": {"resume_every": 7, "lr": 0.5, "activation_checkpointing": True}}
    assert command_line("build=null", "seeds=[1, 2]", "flag=true", "threads=2", "lr=1e-3") == {
        "build": None, "seeds": [1, 2], "flag": True, "threads": 2, "lr": 1e-3}  # Snakemake's top-level 1e-3 stays
    assert command_line('teacher={"name": "a", "revision": "b"}', 'teacher={"revision": null}') == {
        "teacher": {"name": "a", "revision": None}}  # merged in order, as Snakemake merges them
    assert command_line('teacher={"name": "x"') == parse_config(['teacher={"name": "x"'])  # not YAML: as Snakemake
    # Through Snakemake's API the values are typed already and the entries are their repr: nothing is re-read.
    assert command_line_config({"teacher": {"name": None}}, ["teacher={'name': None}"]) == {"teacher": {"name": None}}


def test_a_number_or_boolean_where_a_string_is_wanted_is_refused_naming_the_fix(raw):
    """A YAML file (and --config, read alike) turns an unquoted all-digit revision into a number, yes into true."""
    raw["teacher"]["revision"] = 1234567
    assert ("teacher.revision: 1234567 is not of type 'string', 'null' (YAML reads the unquoted value as a number: "
            "quote it for a string)") in error_of(raw)
    raw["teacher"]["revision"], raw["tracking"] = "1234567", {"project": True}
    assert "tracking.project: True is not of type 'string' (YAML reads the unquoted value as a boolean" in error_of(raw)
    raw["tracking"], raw["train"]["resume_every"] = {}, "7"  # a quoted "7" in a file is a string, as YAML reads it
    assert "train.resume_every: '7' is not of type 'integer'\n" in error_of(raw) + "\n"


def test_min_lr_above_lr_is_refused(raw):
    raw["train"]["min_lr"] = 1.0
    assert "train.min_lr (1.0) is larger than train.lr (0.02)" in error_of(raw)


def test_build_selects_runs_in_the_order_of_runs(raw):
    raw["build"] = ["post-grow", "pre-grow"]
    config = validate_config(raw, SCHEMA)
    assert built_runs(config) == ["pre-grow", "post-grow"]
    assert len(config["runs"]) == 10  # the others stay defined


def test_build_names_an_unknown_run(raw):
    raw["build"] = ["pre-grow", "post-growth"]
    assert "build: 'post-growth' not defined under runs" in error_of(raw)


def test_schema_accepts_exactly_the_registered_placements():
    from normgrow.model.layout import PATTERN

    schema = yaml.safe_load(SCHEMA.read_text())
    placement = schema["properties"]["runs"]["additionalProperties"]["properties"]["placement"]
    assert placement["pattern"] == PATTERN, (  # docs/placements.md, Your own placement
        f"set runs.*.placement's pattern in src/normgrow/design/config.schema.yaml to normgrow.model.layout.PATTERN, "
        f"{PATTERN!r}, and name the new placement in its description")


def test_undefined_curriculum(raw):
    raw["runs"]["post-grow"]["curriculum"] = "grow-twice"
    message = error_of(raw)
    assert message.startswith("runs.post-grow.curriculum:")
    assert "'grow-twice' is not defined under curricula" in message


def test_more_active_blocks_than_the_student_has(raw):
    raw["curricula"]["grow"].append({"active_blocks": 4})
    message = error_of(raw)
    assert message.startswith("curricula.grow[3].active_blocks:")
    assert "student.blocks is 3" in message


def test_blocks_cannot_be_removed(raw):
    raw["curricula"]["grow"][2]["active_blocks"] = 1
    message = error_of(raw)
    assert message.startswith("curricula.grow[2].active_blocks:")
    assert "removed (2 → 1)" in message


def test_eval_every_larger_than_phase_steps(raw):
    raw["train"]["eval_every"] = 101
    message = error_of(raw)
    assert message.startswith("train.eval_every")
    assert "(101)" in message and "train.phase_steps (100)" in message


def test_diagnosed_run_must_be_defined(raw):
    raw["diagnostics"]["runs"].append("post-grow-twice")
    message = error_of(raw)
    assert message.startswith("diagnostics.runs:") and "'post-grow-twice'" in message


def test_package_source_requires_its_checksum(raw):
    del raw["data"]["source"]["sha256"]
    message = error_of(raw)
    assert "data.source" in message and "'sha256' is a required property" in message


def test_bad_checksum_format(raw):
    raw["data"]["source"]["sha256"] = "ABC"
    assert "data.source.sha256" in error_of(raw)


def test_teacher_pretrain_required_without_a_teacher_name(raw):
    del raw["teacher"]["pretrain"]
    message = error_of(raw)
    assert "teacher" in message and "'pretrain' is a required property" in message
    raw["teacher"]["name"] = "Qwen/Qwen3-0.6B-Base"
    validate_config(raw, SCHEMA)



def test_a_renamed_key_still_runs_and_says_its_new_name(raw):
    """train.state_every (an old config's name for train.resume_every), merged over the default's new key as
    Snakemake merges a user's file: its value is used, with a FutureWarning naming both keys."""
    old = merge(raw, {"train": {"state_every": 7}})
    with pytest.warns(FutureWarning, match=r"train.state_every is renamed train.resume_every: .* \(the value 7"):
        config = validate_config(old, SCHEMA)
    assert config["train"]["resume_every"] == 7 and "state_every" not in config["train"]


def test_a_trained_tokenizer_needs_its_size(raw):
    del raw["tokenizer"]["vocab_size"]
    message = error_of(raw)
    assert "tokenizer" in message and "'vocab_size' is a required property" in message
    raw["tokenizer"]["train"] = False
    raw["teacher"]["name"] = "Qwen/Qwen3-0.6B-Base"
    validate_config(raw, SCHEMA)


def test_the_teachers_tokenizer_needs_a_named_teacher(raw):
    raw["tokenizer"]["train"] = False
    assert "tokenizer.train: false" in error_of(raw) and "teacher.name is null" in error_of(raw)

# ---------------------------------------------------------------- data budgets
def test_shard_is_one_phase_of_documents(raw):
    assert shard_docs(raw) == raw["train"]["phase_steps"] * raw["train"]["batch_size"] == 100 * 14


def test_train_docs_required_default(raw):
    # Shard runs (joint, grow, freeze, grow-reset) never leave the first 100 × 14 documents;
    # post-joint-long reads the shard then one fresh shard (2 × 1400); post-joint-longer reads the
    # shard then two fresh shards, one after the other: 3 × 100 × 14 = 4200 documents.
    config = validate_config(raw, SCHEMA)
    assert train_docs_required(config) == 3 * config["train"]["phase_steps"] * config["train"]["batch_size"]
    assert train_docs_required(config) == 4200


def test_train_docs_required_by_run(raw):
    def only(*runs):
        config = copy.deepcopy(raw)
        config["runs"] = {r: raw["runs"][r] for r in runs}
        return train_docs_required(config)

    assert only("pre-joint", "post-grow", "pre-freeze", "post-grow-reset") == 1400
    assert only("post-joint-long") == 2800
    assert only("post-joint-longer") == 4200
    # the runs built: a run left out by `build` reads nothing (the corpus rule checks these)
    assert train_docs_required(raw, built_runs({**raw, "build": ["pre-joint", "post-grow"]})) == 1400


def test_train_docs_required_with_longer_phases(raw):
    raw["curricula"]["joint-long"][1]["steps"] = 300  # the fresh phase reads two shards' worth
    raw["curricula"]["grow"][2]["steps"] = 1000  # wraps within the shard: no new documents
    raw["runs"] = {r: raw["runs"][r] for r in ("post-joint-long", "post-grow")}
    assert train_docs_required(raw) == 1400 + 300 * 14


def test_ci_config_budgets(ci):
    config = validate_config(ci, SCHEMA)
    assert train_docs_required(config) == 3 * 12 * 4


# ---------------------------------------------------------------- cluster resources
def test_resources_default_to_one_cpu_process(raw):
    config = validate_config(raw, SCHEMA)
    assert launch_ranks(config) == {"ranks_per_node": 1, "nodes": 1, "shutdown_timeout": 300,
                                    "gpus_per_node": 0, "cpus_per_gpu": 8}
    assert job_resources(config, "train") == {"mem_mb": 4000, "runtime": 60, "slurm_extra": "--signal=TERM@600"}


def test_paper_resources_ask_for_eight_gpus_on_one_node(raw):
    config = validate_config(merge(raw, load(REPO / "configs" / "paper.yaml")), SCHEMA)
    assert launch_ranks(config) == {"ranks_per_node": 8, "nodes": 1, "shutdown_timeout": 300,
                                    "gpus_per_node": 8, "cpus_per_gpu": 8}
    assert rank_batch_size(config) == 8  # one GPU's share of 64 documents: also the teacher check's batch
    signal = {"slurm_extra": "--signal=TERM@600"}  # SIGTERM 10 minutes before the time limit: save, then retry
    one_node = {"nodes": 1, "gpu": 8, "cpus_per_gpu": 8}  # sbatch --nodes=1: SLURM may not split the 8 GPUs 4 + 4
    assert job_resources(config, "train") == {"mem_mb": 480000, "runtime": 2880, **one_node, **signal}
    # a group of 3 students on one teacher forward: 3 phases' host memory and run time, the same GPUs
    assert job_resources(config, "train", students=3) == {"mem_mb": 3 * 480000, "runtime": 3 * 2880, **one_node,
                                                          **signal}
    assert (job_resources(config, "model")["gpu"], job_resources(config, "model")["nodes"]) == (1, 1)
    assert "gpu" not in job_resources(config, "data")


def test_multi_node_training_is_one_srun_task_per_node(raw):
    config = merge(raw, {"train": {"batch_size": 64},
                             "resources": {"train": {"gpus": 4, "nodes": 2, "partition": "gpu", "account": "lab"}}})
    config = validate_config(config, SCHEMA)
    assert launch_ranks(config) == {"ranks_per_node": 4, "nodes": 2, "shutdown_timeout": 300,
                                    "gpus_per_node": 4, "cpus_per_gpu": 8}
    assert job_resources(config, "train") == {
        "mem_mb": 4000, "runtime": 60, "slurm_partition": "gpu", "slurm_account": "lab",
        "nodes": 2, "tasks": 2, "mpi": "srun", "tasks_per_gpu": 0, "gres": "gpu:4", "cpus_per_gpu": 8,
        "slurm_extra": "--signal=TERM@600"}


def test_the_site_templates_partition_account_and_qos_reach_every_job_class(raw):
    """configs/site-template.yaml over the paper's config: each job class asks the SLURM plugin for its own
    partition, account and QoS as the plugin's resources (the plugin refuses -p, -A and --qos in slurm_extra)."""
    config = merge(merge(raw, load(REPO / "configs" / "paper.yaml")), load(REPO / "configs" / "site-template.yaml"))
    config = validate_config(config, SCHEMA)
    for job_class, partition in (("train", "gpu"), ("model", "gpu"), ("data", "cpu")):
        resources = job_resources(config, job_class)
        assert (resources["slurm_partition"], resources["slurm_account"], resources["qos"]) == (
            partition, "my-project", "normal"), job_class
        validate_slurm_extra(SimpleNamespace(resources=SimpleNamespace(**resources)))  # what the plugin checks
    assert "qos" not in job_resources(validate_config(raw, SCHEMA), "train")  # null: the account's default


def test_no_warning_signal_when_warning_seconds_is_zero(raw):
    config = validate_config(merge(raw, {"resources": {"train": {"warning_seconds": 0}}}), SCHEMA)
    assert "slurm_extra" not in job_resources(config, "train")
    assert "slurm_extra" not in job_resources(config, "model")  # only training saves a state on SIGTERM


def test_batch_that_does_not_split_over_the_ranks_is_a_config_error(raw):
    message = error_of(merge(raw, {"resources": {"train": {"gpus": 3}}}))
    assert "train.batch_size (14) is not a multiple of the training ranks (3" in message


@pytest.mark.parametrize("name", ["/nonexistent/teacher", "./missing-teacher", "~/no/such/teacher", "a/b/c"])
def test_a_teacher_path_that_does_not_exist_is_refused(raw, name):
    raw["teacher"]["name"] = name
    message = error_of(raw)
    assert message.startswith("teacher.name:") and "neither an existing local directory nor" in message


def test_a_teacher_may_be_a_hub_id_or_a_local_directory(raw, tmp_path):
    for name in ("Qwen/Qwen3-8B-Base", "gpt2", str(tmp_path)):
        raw["teacher"]["name"] = name
        validate_config(raw, SCHEMA)
    (tmp_path / "config.json").write_text("{}")
    raw["teacher"]["name"] = str(tmp_path / "config.json")
    assert "is a file" in error_of(raw)


def test_a_revision_needs_a_hub_teacher_or_a_hub_dataset(raw, tmp_path):
    sha = "0123456789abcdef0123456789abcdef01234567"
    raw["teacher"]["revision"] = sha  # the default pretrains its teacher here
    assert error_of(copy.deepcopy(raw)).startswith("teacher.revision:")
    raw["teacher"]["name"] = str(tmp_path)
    local = error_of(copy.deepcopy(raw))
    assert "is a local directory" in local and "HF_HUB_OFFLINE=1" in local  # the air-gapped way to keep the pin
    raw["teacher"]["name"] = "Qwen/Qwen3-0.6B-Base"
    config = validate_config(copy.deepcopy(raw), SCHEMA)
    assert config["teacher"]["revision"] == sha
    raw["data"]["source"]["revision"] = sha  # loader: package is checked by its SHA-256
    assert error_of(copy.deepcopy(raw)).startswith("data.source.revision:")


def test_a_dataset_revision_needs_a_hub_dataset(raw, tmp_path):
    """The paper's data.source.revision pins a hub dataset: a builder (`parquet`) or a local directory as
    data.source.path has none, so the revision is refused there; configs/local-data.yaml drops it."""
    paper = merge(raw, load(REPO / "configs" / "paper.yaml"))
    for path in ("parquet", str(tmp_path)):
        config = merge(copy.deepcopy(paper), {"data": {"source": {"path": path, "name": None}}})
        assert error_of(config).startswith("data.source.revision: '87f09149ef4734204d70ed1d046ddc9ca3f2b8f9' names a "
                                           f"hub snapshot, but data.source.path {path!r} is a local path or a builder")
    config = validate_config(merge(paper, load(REPO / "configs" / "local-data.yaml")), SCHEMA)
    assert config["data"]["source"]["path"] == "parquet" and "revision" not in config["data"]["source"]


def test_flex_attention_trains_only_on_gpus(raw):
    """torch's FlexAttention has no backward on CPU: a CPU run with it stops before any job, naming the key."""
    raw["student"]["attn_implementation"] = "flex_attention"
    assert error_of(copy.deepcopy(raw)).startswith("student.attn_implementation: 'flex_attention' trains only on a "
                                                       "GPU")
    raw["resources"] = {"train": {"gpus": 1}}
    assert validate_config(raw, SCHEMA)["student"]["attn_implementation"] == "flex_attention"


def test_a_null_revision_is_no_revision(raw):
    raw["teacher"].update(name="Qwen/Qwen3-0.6B-Base", revision=None)
    raw["data"]["source"]["revision"] = None
    config = validate_config(raw, SCHEMA)
    assert "revision" not in config["teacher"] and "revision" not in config["data"]["source"]


# ---------------------------------------------------------------- the teacher's own files, at parse time
def local_teacher(folder, model_type: str, tokens: list[str] | None = None):
    """A teacher directory as far as the parse-time check reads it: config.json with `model_type` and,
    with `tokens`, a word-level tokenizer of that vocabulary (its EOS the last token)."""
    import json

    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    if tokens is not None:
        vocabulary = {token: i for i, token in enumerate(tokens)}
        tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token=tokens[0]))
        PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token=tokens[0], eos_token=tokens[-1]).save_pretrained(
            folder)
    return folder


def teacher_error(config: dict) -> str:
    with pytest.raises(ConfigError) as info:
        check_teacher_files(config, supported=PREFIXES)
    return str(info.value)


def test_an_unsupported_teacher_family_is_refused_naming_teacher_name(raw, tmp_path):
    teacher = local_teacher(tmp_path / "teacher", "made_up_decoder")
    config = validate_config(merge(raw, {"teacher": {"name": str(teacher)}}), SCHEMA)
    message = teacher_error(config)
    assert message.startswith("teacher.name:") and "'made_up_decoder'" in message
    assert all(family in message for family in PREFIXES)  # the supported set, read from normgrow.model.family


def test_a_supported_teacher_family_passes(raw, tmp_path):
    teacher = local_teacher(tmp_path / "teacher", next(iter(PREFIXES)))
    check_teacher_files(validate_config(merge(raw, {"teacher": {"name": str(teacher)}}), SCHEMA), PREFIXES)


def test_a_boundary_token_outside_the_teachers_tokenizer_is_refused_naming_the_key(raw, tmp_path):
    teacher = local_teacher(tmp_path / "teacher", "qwen3", ["<unk>", "a", "b", "<eos>"])
    config = validate_config(merge(raw, {"teacher": {"name": str(teacher)}, "tokenizer": {"train": False}}),
                             SCHEMA)
    message = teacher_error(config)
    assert message.startswith("data.boundary_token:") and "'<|endoftext|>'" in message and "'<eos>'" in message
    config["data"]["boundary_token"] = "<eos>"
    check_teacher_files(config, PREFIXES)
    config["tokenizer"] = {"train": True, "vocab_size": 300}  # a tokenizer trained here holds the token
    config["data"]["boundary_token"] = "<|endoftext|>"
    check_teacher_files(config, PREFIXES)


def hub_cache(cache: Path, monkeypatch, name: str, snapshots: dict[str, str]) -> None:
    """A Hugging Face hub cache at `cache` (used by huggingface_hub from now on) holding the repository `name`
    with a teacher's files per snapshot (commit → model_type); its default branch at the first."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    repo = cache / f"models--{name.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(next(iter(snapshots)))
    (repo / "snapshots").mkdir()
    for commit, model_type in snapshots.items():
        local_teacher(repo / "snapshots" / commit, model_type)


def test_a_cached_hub_teacher_is_checked_and_one_not_cached_is_left_to_the_jobs(raw, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    hub_cache(tmp_path / "hub", monkeypatch, "someone/gemma-like", {"0" * 40: "made_up_decoder"})
    config = validate_config(merge(raw, {"teacher": {"name": "someone/gemma-like"}}), SCHEMA)
    assert teacher_error(config).startswith("teacher.name: 'someone/gemma-like'")
    config["teacher"]["name"] = "someone/not-cached"
    check_teacher_files(config, PREFIXES)


def test_a_cached_hub_teacher_is_checked_at_its_revision(raw, tmp_path, monkeypatch):
    """teacher.revision names the snapshot the dry run reads: the default branch's is an unsupported family, the
    pinned commit's a supported one."""
    hub_cache(tmp_path / "hub", monkeypatch, "someone/two-snapshots",
              {"0" * 40: "made_up_decoder", "1" * 40: next(iter(PREFIXES))})
    config = validate_config(merge(raw, {"teacher": {"name": "someone/two-snapshots"}}), SCHEMA)
    assert "'made_up_decoder'" in teacher_error(config)
    config["teacher"]["revision"] = "1" * 40
    check_teacher_files(config, PREFIXES)


def test_the_teachers_pretraining_seed_is_its_own_or_the_split_seed(raw):
    """teacher.pretrain.seed, else data.split_seed; the recipe (the other params of pretrain_teacher) is the
    same whatever the seed, so that a config leaving it unset keeps its params."""
    config = validate_config(merge(raw, {"data": {"split_seed": 42}}), SCHEMA)
    seeded = validate_config(merge(raw, {"data": {"split_seed": 42}, "teacher": {"pretrain": {"seed": 1042}}}),
                             SCHEMA)
    assert pretrain_seed(config) == 42 and pretrain_seed(seeded) == 1042
    assert "seed" not in pretrain_recipe(seeded) and pretrain_recipe(seeded) == pretrain_recipe(config)


# ---------------------------------------------------------------- a revision pinned for another repository
PAPER_TEACHER = {"teacher": {"name": "Qwen/Qwen3-8B-Base", "revision": "4" * 40}}


def test_a_teacher_named_after_the_file_that_pinned_its_revision_is_refused_naming_the_key():
    layers = [("config.yaml", {"teacher": {"name": None}}), ("configs/paper.yaml", PAPER_TEACHER),
              ("--config", {"teacher": {"name": "ibm-granite/granite-3.3-2b-base"}})]
    with pytest.raises(ConfigError) as info:
        check_pinned_revisions(layers)
    message = str(info.value)
    assert message.startswith("teacher.revision: '4444") and "'Qwen/Qwen3-8B-Base' (configs/paper.yaml)" in message
    assert "'ibm-granite/granite-3.3-2b-base' (--config)" in message


@pytest.mark.parametrize("override", [{"name": "ibm-granite/granite-3.3-2b-base", "revision": None},
                                      {"name": "ibm-granite/granite-3.3-2b-base", "revision": "5" * 40},
                                      {"name": "Qwen/Qwen3-8B-Base"}, {"revision": "6" * 40}, {"dtype": "float32"}])
def test_a_revision_given_with_its_teacher_or_for_the_same_teacher_passes(override):
    check_pinned_revisions([("config.yaml", {"teacher": {"name": None}}), ("configs/paper.yaml", PAPER_TEACHER),
                            ("--config", {"teacher": override})])


def test_a_dataset_path_changed_under_a_pinned_revision_is_refused_naming_the_key():
    pinned = {"data": {"source": {"path": "HuggingFaceFW/fineweb-edu", "revision": "8" * 40}}}
    other = {"data": {"source": {"path": "someone/other-corpus"}}}
    with pytest.raises(ConfigError, match=r"^data\.source\.revision: '8888.*'someone/other-corpus' \(mine\.yaml\)"):
        check_pinned_revisions([("config.yaml", {}), ("paper.yaml", pinned), ("mine.yaml", other)])


# ---------------------------------------------------------------- offline, what the hub cache lacks
def test_offline_a_teacher_and_a_dataset_missing_from_the_cache_are_named(raw, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    paper = merge(raw, load(REPO / "configs" / "paper.yaml"))
    config = validate_config(paper, SCHEMA)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    assert offline_gaps(config) == []  # online, the jobs download them
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    teacher, data = offline_gaps(config)
    assert teacher.startswith("teacher.name: 'Qwen/Qwen3-8B-Base' at revision 49e3418") and "hf download" in teacher
    assert data.startswith("data.source.path: dataset 'HuggingFaceFW/fineweb-edu' at revision 87f0914") \
        and str(tmp_path / "hub") in data
    local = local_teacher(tmp_path / "teacher", "qwen3")
    config = validate_config(merge(raw, {"teacher": {"name": str(local)}}), SCHEMA)
    assert offline_gaps(config) == []  # a local directory and the embedded corpus need no hub


def test_the_docs_own_teacher_example_holds_on_top_of_the_papers_config():
    """docs/workflow.md, Your own teacher: the example, merged over configs/paper.yaml, pins no Qwen commit
    on another teacher (its `revision: null`)."""
    text = (REPO / "docs" / "workflow.md").read_text()
    example = yaml.safe_load(text.split("your own teacher is:\n\n```yaml\n", 1)[1].split("```", 1)[0])
    layers = [("config.yaml", load(REPO / "config.yaml")),
              ("configs/paper.yaml", load(REPO / "configs" / "paper.yaml")), ("docs/workflow.md", example)]
    check_pinned_revisions(layers)
    assert example["tokenizer"] == {"train": False} and "boundary_token" in example["data"]
