"""The Snakemake workflow: its DAG (dry runs), config errors, lint, and one end-to-end CI run.

Snakemake runs as a subprocess of this interpreter's environment, on the repository's Snakefile, in
a temporary working directory (`--directory`), so the repository's own results/ are never touched.
The job list is parsed from the dry run's per-job blocks ("rule NAME:" then indented "key: value").
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO

from normgrow.config import run_phases

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
CI = REPO / "configs" / "ci.yaml"
DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())
ONE_EACH = ("corpus", "tokenizer", "tokenize", "pretrain_teacher", "check_teacher", "collect_metrics",
            "paper", "all")
PHASE_FILES = ("student.safetensors", "state.json", "train.csv", "eval.csv")


@dataclass
class Job:
    rule: str
    fields: dict[str, str] = field(default_factory=dict)

    @property
    def resources(self) -> dict[str, str]:
        text = self.fields.get("resources", "")
        return dict(part.split("=", 1) for part in text.split(", ")) if text else {}

    @property
    def wildcards(self) -> dict[str, str]:
        text = self.fields.get("wildcards", "")
        return dict(part.split("=", 1) for part in text.split(", ")) if text else {}

    @property
    def outputs(self) -> list[str]:
        text = self.fields.get("output", "")
        return text.split(", ") if text else []

    def phase_key(self) -> tuple[str, int, int]:
        w = self.wildcards
        return w["run"], int(w["seed"]), int(w["phase"])


def snakemake(workdir: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, cwd=workdir)


def parse_jobs(output: str) -> list[Job]:
    jobs: list[Job] = []
    for line in output.splitlines():
        start = re.match(r"^(?:local)?rule (\S+):$", line)
        if start:
            jobs.append(Job(start.group(1)))
            continue
        item = re.match(r"^    (\w+): (.*)$", line)
        if item and jobs:
            jobs[-1].fields[item.group(1)] = item.group(2)
    return jobs


def dry_run(workdir: Path, *args: str) -> list[Job]:
    proc = snakemake(workdir, "-n", *args)
    assert proc.returncode == 0, proc.stdout
    jobs = parse_jobs(proc.stdout)
    stats = job_stats(proc.stdout)
    assert stats == Counter(job.rule for job in jobs), "parsed jobs disagree with Snakemake's job stats"
    return jobs


def job_stats(output: str) -> Counter:
    """Snakemake's own 'Job stats' table of a dry run."""
    lines = output.splitlines()
    start = lines.index("Job stats:") + 3
    stats = Counter()
    for line in lines[start:]:
        name, _, count = line.rpartition(" ")
        if name.strip() == "total":
            break
        stats[name.strip()] = int(count)
    return stats


def expected_phases(config: dict, seeds) -> set[tuple[str, int, int]]:
    return {(run, seed, p) for run in config["runs"] for seed in seeds
            for p in range(len(run_phases(config, run)))}


def phase_jobs(jobs: list[Job]) -> list[tuple[str, int, int]]:
    return [job.phase_key() for job in jobs if job.rule == "train_phase"]


# ---------------------------------------------------------------- dry runs
def test_default_dag_has_every_phase_of_every_run(tmp_path):
    jobs = dry_run(tmp_path)
    counts = Counter(job.rule for job in jobs)
    for rule in ONE_EACH:
        assert counts[rule] == 1, rule
    phases = phase_jobs(jobs)
    assert len(phases) == len(set(phases)) == 25
    assert set(phases) == expected_phases(DEFAULT, [42])
    assert len({run for run, _, _ in phases}) == 10
    assert Counter(run for run, _, _ in phases) == {
        "pre-joint": 1, "post-joint": 1, "pre-grow": 3, "post-grow": 3, "pre-freeze": 3, "post-freeze": 3,
        "pre-grow-reset": 3, "post-grow-reset": 3, "post-joint-long": 2, "post-joint-longer": 3}
    # each phase job writes the four phase files into its own directory
    for job in jobs:
        if job.rule == "train_phase":
            run, seed, p = job.phase_key()
            folder = f"results/runs/{run}/seed{seed}/phase{p}"
            assert {f"{folder}/{name}" for name in PHASE_FILES} <= set(job.outputs)


def test_phase_jobs_chain_within_a_run(tmp_path):
    jobs = dry_run(tmp_path)
    for job in jobs:
        if job.rule != "train_phase":
            continue
        run, seed, p = job.phase_key()
        inputs = job.fields["input"].split(", ")
        assert "results/data/tokens" in inputs and "results/teacher/check.json" in inputs
        previous = [i for i in inputs if i.startswith("results/runs/")]
        if p == 0:
            assert previous == []
        else:
            assert sorted(previous) == [f"results/runs/{run}/seed{seed}/phase{p - 1}/{name}"
                                        for name in ("state.json", "student.safetensors")]


def test_ci_dag_has_every_phase_of_every_run(tmp_path):
    jobs = dry_run(tmp_path, "--configfile", str(CI))
    counts = Counter(job.rule for job in jobs)
    for rule in ONE_EACH:
        assert counts[rule] == 1, rule
    assert sorted(phase_jobs(jobs)) == sorted(expected_phases(DEFAULT, [42]))


def test_paper_config_dag_has_every_phase_of_every_run(tmp_path):
    """The paper-scale config (hub teacher, streamed FineWeb-Edu) dry-runs here without network."""
    jobs = dry_run(tmp_path, "--configfile", str(REPO / "configs" / "paper.yaml"))
    counts = Counter(job.rule for job in jobs)
    assert counts["pretrain_teacher"] == 0  # the teacher comes from the hub
    assert counts["check_teacher"] == 1 and counts["paper"] == 1
    assert sorted(phase_jobs(jobs)) == sorted(expected_phases(DEFAULT, [42]))


def test_paper_dag_through_the_slurm_profile_gives_every_phase_its_gpus(tmp_path):
    """`snakemake --profile slurm results/paper` from the repository root, on the paper config: every
    phase of every run is a cluster job with 8 GPUs and the configured CPUs, memory and runtime;
    model jobs get one GPU. (That tables, figures and the report run locally is checked by the real
    SLURM test: a dry run does not mark local rules.)"""
    paper = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    command = [SNAKEMAKE, "--profile", "slurm", "--directory", str(tmp_path), "-n", "results/paper",
               "--configfile", str(REPO / "configs" / "paper.yaml")]
    proc = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    jobs = parse_jobs(proc.stdout)
    config = {**DEFAULT, **paper}
    phases = {job.phase_key(): job for job in jobs if job.rule == "train_phase"}
    assert set(phases) == expected_phases(config, DEFAULT["seeds"]) and len(phases) == 25
    train = paper["resources"]["train"]
    for key, job in phases.items():
        resources = job.resources
        assert resources["gpu"] == str(train["gpus"]) == "8", key
        assert resources["cpus_per_gpu"] == str(train["cpus_per_gpu"]), key
        assert resources["mem_mb"] == str(train["mem_mb"]) and resources["runtime"] == str(train["runtime"]), key
    for job in jobs:
        if job.rule in ("check_teacher", "diagnose"):
            assert job.resources["gpu"] == "1", job


def test_two_seeds_double_the_phase_jobs(tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("seeds: [1, 2]\n")
    jobs = dry_run(tmp_path, "--configfile", str(CI), str(seeds))
    phases = phase_jobs(jobs)
    assert len(phases) == 50
    assert set(phases) == expected_phases(DEFAULT, [1, 2])
    counts = Counter(job.rule for job in jobs)
    for rule in ONE_EACH:  # data, teacher and paper are shared by the seeds
        assert counts[rule] == 1, rule


def test_config_error_is_one_clear_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  eval_every: 500\n")
    proc = snakemake(tmp_path, "-n", "--configfile", str(bad))
    assert proc.returncode != 0
    lines = proc.stdout.splitlines()
    assert "train.eval_every (500) is larger than train.phase_steps (150)" in lines
    assert "Job stats:" not in proc.stdout
    assert "$schema" not in proc.stdout  # not Snakemake's whole-schema dump


def test_schema_error_names_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("runs:\n  post-grow: {placement: post, curriculum: grow, lr: 1}\n")
    proc = snakemake(tmp_path, "-n", "--configfile", str(bad))
    assert proc.returncode != 0
    assert any(line.strip().startswith("runs.post-grow:") and "'lr'" in line
               for line in proc.stdout.splitlines()), proc.stdout


def test_lint_is_clean():
    proc = subprocess.run([SNAKEMAKE, "--lint", "-s", str(REPO / "Snakefile")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout
    assert "Lints for" not in proc.stdout, proc.stdout


# ---------------------------------------------------------------- end to end (CI config)
@pytest.fixture
def ci_run(ci_workdir):
    """The CI config run end to end once per session (conftest.ci_workdir)."""
    return ci_workdir


@pytest.mark.slow
def test_ci_run_table1(ci_run):
    table = pd.read_csv(ci_run / "results" / "paper" / "tables" / "table1.csv")
    rows = set(table["row"])
    assert {"Pre-norm", "Post-norm"} <= rows
    assert any(r.startswith("Δ") for r in rows)
    assert any(r.startswith("Interaction") for r in rows)
    assert len(table) == 7
    assert all(math.isfinite(v) for v in table["mean"])
    assert (table["seeds"] == 1).all()
    # the interaction is the difference of the two Δ, paired by seed
    means = {(r, c): m for r, c, m in zip(table["row"], table["column"], table["mean"], strict=True)}
    delta = {c: means[(r, c)] for r, c in means if r.startswith("Δ")}
    interaction = next(m for (r, _), m in means.items() if r.startswith("Interaction"))
    assert interaction == pytest.approx(delta["Grow"] - delta["Joint"], abs=1e-9)
    assert delta["Joint"] == pytest.approx(means[("Post-norm", "Joint")] - means[("Pre-norm", "Joint")])


@pytest.mark.slow
def test_ci_run_teacher_beats_the_unigram_baseline(ci_run):
    check = yaml.safe_load((ci_run / "results" / "teacher" / "check.json").read_text())
    assert check["problems"] == []
    assert check["margin_nats"] > check["min_margin_nats"] == 0.2


@pytest.mark.slow
def test_ci_run_writes_every_phase(ci_run):
    runs = ci_run / "results" / "runs"
    for run, seed, p in expected_phases(DEFAULT, [42]):
        folder = runs / run / f"seed{seed}" / f"phase{p}"
        for name in PHASE_FILES:
            assert (folder / name).is_file(), folder / name
    assert len(list(runs.glob("*/seed*/phase*"))) == 25


@pytest.mark.slow
def test_ci_run_rerun_has_nothing_to_do(ci_run):
    proc = snakemake(ci_run, "--configfile", str(CI), "--cores", "2", "results/paper")
    assert proc.returncode == 0, proc.stdout
    assert "Nothing to be done" in proc.stdout, proc.stdout
    assert parse_jobs(proc.stdout) == []


@pytest.mark.slow
def test_ci_run_forcerun_one_phase_reruns_it_and_downstream_only(ci_run):
    target = "results/runs/post-grow/seed42/phase1/state.json"
    jobs = dry_run(ci_run, "results/paper", "--configfile", str(CI), "--forcerun", target)
    assert sorted(phase_jobs(jobs)) == [("post-grow", 42, 1), ("post-grow", 42, 2)]
    counts = Counter(job.rule for job in jobs)
    assert counts["collect_metrics"] == counts["paper"] == 1
    for upstream in ("corpus", "tokenizer", "tokenize", "pretrain_teacher", "check_teacher"):
        assert counts[upstream] == 0, upstream
    # nothing of another run (or of post-grow's phase 0) is rebuilt
    for job in jobs:
        if "run" in job.wildcards:
            assert job.wildcards["run"] == "post-grow", (job.rule, job.wildcards)


@pytest.mark.slow
def test_a_phase_job_with_two_ranks_launches_torchrun_and_matches_one_process(ci_run, tmp_path):
    """The train rule with `resources.train.ranks_per_node: 2` starts the phase under torchrun (two
    gloo ranks on the CPU) and reproduces the one-process phase of the CI run."""
    import shutil

    for part in ("data", "teacher"):
        shutil.copytree(ci_run / "results" / part, tmp_path / "results" / part)
    phase = "results/runs/pre-joint/seed42/phase0"
    proc = snakemake(tmp_path, "--configfile", str(CI), str(REPO / "tests" / "slurm" / "resources.yaml"),
                     "--cores", "2", "--", f"{phase}/state.json")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "1 of 1 steps (100%) done" in proc.stdout  # only the phase ran
    log = (tmp_path / "logs" / "runs" / "pre-joint" / "seed42" / "phase0.log").read_text()
    assert "torch.distributed.run --standalone --nproc_per_node=2" in log
    assert yaml.safe_load((tmp_path / phase / "state.json").read_text())["ranks"] == 2
    for table in ("train.csv", "eval.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / phase / table), pd.read_csv(ci_run / phase / table),
                                      check_exact=False, atol=1e-5, rtol=1e-6)


@pytest.mark.slow
def test_ci_run_diagnostic_documents_have_their_own_length_limit(ci_run):
    from normgrow.data import TokenStore

    tokens = ci_run / "results" / "data" / "tokens"
    meta = yaml.safe_load((tokens / "meta.json").read_text())
    assert meta["diag_max_length"] == 32 and meta["max_length"] == 48
    assert TokenStore(tokens / "diag").lengths.max() <= 32
    assert meta["splits"]["diag"]["truncated_documents"] >= 1  # the limit was applied, not just unneeded
    assert TokenStore(tokens / "train").lengths.max() == 48  # training documents keep the longer limit
