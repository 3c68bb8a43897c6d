"""Air-gapped runs that keep their pins (docs/cluster.md, Air-gapped compute nodes): with the teacher,
its tokenizer and the FineWeb-Edu sample in a hub cache and `HF_HUB_OFFLINE=1`, configs/paper.yaml as
it is — teacher.name and data.source.path hub ids, both at their pinned revisions — loads the
teacher, the tokenizer and the corpus from the cache's `snapshots/<sha>/` without the network, and a
revision the cache does not hold is refused.

The cache is a fake built here under the paper's own hub ids and revisions: a tiny Qwen3 and a small
tokenizer saved into `models--Qwen--Qwen3-8B-Base/snapshots/<sha>/`, a parquet file and the dataset
card's configs into `datasets--HuggingFaceFW--fineweb-edu/snapshots/<sha>/`, each `refs/main` naming
the sha, as `hf download --revision <sha>` leaves them."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO
from transformers import Qwen3Config, Qwen3ForCausalLM

from normgrow.train.data import train_tokenizer

PAPER = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
TEACHER, SOURCE = PAPER["teacher"], PAPER["data"]["source"]
TEXTS = [f"document {i}: the residual stream is normalised before or after each sub-layer." for i in range(480)]
CARD = """---
configs:
- config_name: sample-10BT
  data_files:
  - split: train
    path: sample/10BT/*
---
"""


def cached_repo(cache: Path, kind: str, repo_id: str, sha: str) -> Path:
    """`snapshots/<sha>/` of `repo_id` in a hub cache, with refs/main naming it."""
    repo = cache / "hub" / f"{kind}--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    return repo / "snapshots" / sha


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("hf")
    teacher = cached_repo(cache, "models", TEACHER["name"], TEACHER["revision"])
    tokenizer = train_tokenizer(TEXTS, vocab_size=300, boundary_token="<|endoftext|>")
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, intermediate_size=48, max_position_embeddings=64)
    Qwen3ForCausalLM(config).save_pretrained(teacher)
    tokenizer.save_pretrained(teacher)
    data = cached_repo(cache, "datasets", SOURCE["path"], SOURCE["revision"])
    (data / "sample" / "10BT").mkdir(parents=True)
    pq.write_table(pa.table({"text": TEXTS, "url": ["x"] * len(TEXTS)}), data / "sample" / "10BT" / "000_00000.parquet")
    (data / "README.md").write_text(CARD)
    return cache


def offline(cache: Path) -> dict:
    """The environment of an air-gapped job reading `cache` (HF_HOME; HF_HUB_OFFLINE)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    return {**environment, "HF_HOME": str(cache), "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), environment.get("PYTHONPATH", "")])}


LOADS = """
import json, sys
import yaml
from transformers import AutoTokenizer
from normgrow.design.config import merge, validate_config
from normgrow.train.data import load_corpus
from normgrow.train.teacher import load_teacher

config = {}
for name in ("config.yaml", "configs/paper.yaml"):
    merge(config, yaml.safe_load(open(name)))
config = validate_config(config)  # the paper's config as it is: hub ids at their revisions
teacher, source = config["teacher"], config["data"]["source"]
out = {"name": teacher["name"], "revision": teacher["revision"], "data": [source["path"], source["revision"]]}
out["parameters"] = sum(p.numel() for p in load_teacher(teacher["name"], revision=teacher["revision"]).parameters())
out["tokenizer"] = len(AutoTokenizer.from_pretrained(teacher["name"], revision=teacher["revision"]))
out["documents"] = [record["text"] for record in load_corpus(source)]
for what, load in (("teacher", lambda: load_teacher(teacher["name"], revision="f" * 40)),
                   ("data", lambda: load_corpus({**source, "revision": "f" * 40}))):
    try:
        load()
        out[what + " at another revision"] = "loaded"
    except OSError as error:
        out[what + " at another revision"] = type(error).__name__ + ": " + str(error)
print(json.dumps(out))
"""


def test_the_papers_config_loads_its_pinned_teacher_tokenizer_and_data_offline(hub_cache):
    result = subprocess.run([sys.executable, "-c", LOADS], cwd=REPO, env=offline(hub_cache), capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    assert (out["name"], out["revision"]) == (TEACHER["name"], TEACHER["revision"])  # the config unchanged
    assert out["data"] == [SOURCE["path"], SOURCE["revision"]]
    assert out["parameters"] == Qwen3ForCausalLM(Qwen3Config(**json.loads(
        (hub_cache / "hub" / "models--Qwen--Qwen3-8B-Base" / "snapshots" / TEACHER["revision"] / "config.json")
        .read_text()))).num_parameters()  # the cached snapshot, not a hub download
    assert out["tokenizer"] == 300 and out["documents"] == TEXTS
    assert out["teacher at another revision"].startswith("OSError")  # not silently the cached one
    assert out["data at another revision"].startswith("FileNotFoundError: data.source: offline (HF_HUB_OFFLINE)")
    assert f"hf download {SOURCE['path']} --repo-type dataset --revision {'f' * 40}" in out["data at another revision"]


def download_commands() -> list[str]:
    """The `hf download` lines of docs/cluster.md's air-gapped recipe."""
    text = (REPO / "docs" / "cluster.md").read_text()
    return re.findall(r"^(hf download .+)$", text, re.M)


def test_the_docs_download_lines_name_the_configs_pins_and_resolve_in_the_cache(hub_cache):
    """Each `hf download` line of the recipe pins the revision configs/paper.yaml reads and, offline, finds
    its snapshot in a cache holding it (the options parse; the files are the fake's)."""
    commands = download_commands()
    assert len(commands) == 2
    teacher, data = (shlex.split(command) for command in commands)
    assert teacher[2] == TEACHER["name"] and teacher[teacher.index("--revision") + 1] == TEACHER["revision"]
    assert data[2] == SOURCE["path"] and data[data.index("--revision") + 1] == SOURCE["revision"]
    assert "--repo-type" in data and "README.md" in data  # the card names the sample-10BT files
    hf = str(Path(sys.executable).parent / "hf")
    for command, sha in ((teacher, TEACHER["revision"]), (data, SOURCE["revision"])):
        result = subprocess.run([hf, *command[1:]], env=offline(hub_cache), capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip().endswith(f"snapshots/{sha}"), result.stdout


def test_the_local_data_example_reads_parquet_files_on_disk(tmp_path):
    """configs/local-data.yaml's source, its data_files pointed at parquet files here: the corpus, in order."""
    from normgrow.train.data import load_corpus

    half = len(TEXTS) // 2
    for part in range(2):
        pq.write_table(pa.table({"text": TEXTS[half * part:half * (part + 1)]}), tmp_path / f"{part:03}.parquet")
    source = yaml.safe_load((REPO / "configs" / "local-data.yaml").read_text())["data"]["source"]
    assert source["data_files"]["train"].endswith("/*.parquet")
    source["data_files"]["train"] = str(tmp_path / "*.parquet")
    assert [record["text"] for record in load_corpus(source)] == TEXTS


@pytest.mark.slow
def test_the_workflow_runs_offline_at_the_papers_pins(hub_cache, tmp_path):
    """The CI-sized workflow with configs/paper.yaml's teacher and corpus (hub ids at their revisions),
    offline from the fake cache: the corpus, the teacher's tokenizer, the teacher check, a pre/post grow
    pair on one teacher forward and the diagnostics, to results/paper; the teacher check read the cached
    snapshot. The teacher is random, so the check's margin is waived."""
    from conftest import snakemake_command

    overrides = tmp_path / "offline.yaml"
    overrides.write_text(yaml.safe_dump({
        "data": {"source": SOURCE, "train_docs": None},
        "teacher": {"name": TEACHER["name"], "revision": TEACHER["revision"], "dtype": "float32",
                    "min_margin_nats": -100.0},
        "tokenizer": {"train": False}, "build": ["pre-grow", "post-grow"], "diagnostics": {"runs": ["post-grow"]},
        "resources": {"train": {"group_size": 2}}}))
    workdir = tmp_path / "run"
    workdir.mkdir()
    command = snakemake_command(workdir, "--cores", "2", "--configfile", str(REPO / "configs" / "ci.yaml"),
                                str(overrides), "--", "results/paper", config=None)
    result = subprocess.run(command, env=offline(hub_cache), capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    check = json.loads((workdir / "results" / "teacher" / "check.json").read_text())
    assert check["tokenizer_size"] == 300 and check["hidden_size"] == 32
    assert (workdir / "results" / "paper" / "tables" / "table2.csv").exists()
