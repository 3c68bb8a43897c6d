"""The Snakemake workflow: its DAG (dry runs), config errors, lint, and one end-to-end CI run.

Snakemake runs as a subprocess of this interpreter's environment, on the repository's Snakefile, in
a temporary working directory (`--directory`), so the repository's own results/ are never touched.
The job list is parsed from the dry run's per-job blocks ("rule NAME:" then indented "key: value").
"""

from __future__ import annotations

import json
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
from conftest import REPO, SNAKEMAKE, snakemake_command

from normgrow.design.config import merge, validate_config
from normgrow.design.curriculum import PhaseTable
from normgrow.design.job_names import job_name, job_names, sharers

CI = REPO / "configs" / "ci.yaml"
DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())
ONE_EACH = ("corpus", "build_tokenizer", "tokenize_corpus", "pretrain_teacher", "check_teacher", "collect_metrics",
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



def snakemake(workdir: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_command(workdir, *args, config=None), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout, cwd=workdir)


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


def phases_of(*configs: Path | dict) -> PhaseTable:
    """The distinct phases of the default config merged with `configs` (as --configfile merges)."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    for extra in configs:
        merge(config, extra if isinstance(extra, dict) else yaml.safe_load(Path(extra).read_text()))
    return PhaseTable.from_config(validate_config(config))


def is_training(rule: str) -> bool:
    """Whether `rule` is a training job's (workflow/rules/train.smk: train_{runs}_seed{S}_phase{P}_{id}, one a job)."""
    return re.fullmatch(r"train_\S+_seed\S+_phase\S+_[0-9a-f]{16}", rule) is not None


def training_jobs(jobs: list[Job]) -> dict[str, Job]:
    """Every phase a (dry) run trains, by key: the training job that writes it."""
    return {out.split("/")[2]: job for job in jobs if is_training(job.rule)
            for out in job.outputs if out.startswith("results/phases/") and out.endswith("/state.json")}


def phase_jobs(jobs: list[Job]) -> list[str]:
    """The key of every phase a (dry) run trains, once per job that trains it."""
    return [out.split("/")[2] for job in jobs if is_training(job.rule)
            for out in job.outputs if out.startswith("results/phases/") and out.endswith("/state.json")]


# A dry run prints no params: this builds the DAG as a dry run does, through Snakemake's API and the
# workflow object behind it (snakemake is pinned in pyproject.toml), in a process of its own (the
# Snakefile changes sys.path and the environment), and prints each job's rule, wildcards, input, params and
# resources (evaluated at the given attempt, as Snakemake evaluates them for a retry) as JSON.
JOB_FIELDS = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

snakefile, workdir, configfiles, targets = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
attempt = int(sys.argv[5])
with SnakemakeApi(OutputSettings()) as api:
    workflow_api = api.workflow(resource_settings=ResourceSettings(), snakefile=Path(snakefile), workdir=Path(workdir),
                                config_settings=ConfigSettings(configfiles=[Path(c) for c in configfiles]))
    workflow_api.dag(DAGSettings(targets=set(targets)))
    workflow = workflow_api._workflow
    workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True)
    workflow._build_dag()
    jobs = []
    for job in workflow.dag.jobs:
        job.attempt = attempt
        jobs.append({"rule": job.rule.name, "wildcards": dict(job.wildcards.items()), "input": list(job.input),
                     "params": dict(job.params.items()), "resources": dict(job.resources.items())})
    print(json.dumps(jobs, default=str))
"""


def job_fields(workdir: Path, configfiles: list[Path], targets: list[str], snakefile: Path = REPO / "Snakefile",
               attempt: int = 1) -> list[dict]:
    """Every job that building `targets` of `snakefile` under its config and `configfiles` would run: its rule,
    wildcards, input, params and resources (at `attempt`), as `JOB_FIELDS` prints them."""
    proc = subprocess.run([sys.executable, "-c", JOB_FIELDS, str(snakefile), str(workdir),
                           json.dumps([str(c) for c in configfiles]), json.dumps(targets), str(attempt)],
                          capture_output=True, text=True, timeout=300, cwd=workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def job_params(workdir: Path, configfiles: list[Path], targets: list[str]) -> list[tuple[str, dict]]:
    """(rule, params) of every job that building `targets` under the default and `configfiles` would run."""
    return [(job["rule"], job["params"]) for job in job_fields(workdir, configfiles, targets)]


# ---------------------------------------------------------------- dry runs
def test_default_dag_trains_each_distinct_phase_once(tmp_path):
    jobs = dry_run(tmp_path)
    counts = Counter(job.rule for job in jobs)
    for rule in ONE_EACH:
        assert counts[rule] == 1, rule
    table = phases_of()
    phases = phase_jobs(jobs)
    assert len(phases) == len(set(phases)) == 18  # 25 phases of 10 runs, 7 of them shared
    assert set(phases) == set(table.specs)
    assert counts["run_index"] == 10  # every run keeps its own view of its phases
    names = job_names(table, 1)
    for key, job in training_jobs(jobs).items():  # a phase alone: its job, named for its run phases and key,
        assert job.rule == names[key]             # writes the four phase files into its content-keyed directory
        assert job.rule.endswith(f"_{key}") and job.fields["log"] == f"logs/train/{names[key][6:]}.log"
        assert {f"results/phases/{key}/{name}" for name in PHASE_FILES} <= set(job.outputs)


def test_phase_jobs_chain_along_the_curriculum(tmp_path):
    jobs = dry_run(tmp_path)
    table = phases_of()
    for key, job in training_jobs(jobs).items():
        spec = table.specs[key]
        inputs = job.fields["input"].split(", ")
        assert "results/data/tokens" in inputs and "results/teacher/check.json" in inputs
        previous = [i for i in inputs if i.startswith("results/phases/")]
        if spec.index == 0:
            assert previous == []
        else:
            assert sorted(previous) == [f"results/phases/{spec.previous.key}/{name}"
                                        for name in ("state.json", "student.safetensors")]


def test_ci_dag_trains_each_distinct_phase_once(tmp_path):
    jobs = dry_run(tmp_path, "--configfile", str(CI))
    counts = Counter(job.rule for job in jobs)
    for rule in ONE_EACH:
        assert counts[rule] == 1, rule
    assert sorted(phase_jobs(jobs)) == sorted(phases_of(CI).specs)
    assert len(phase_jobs(jobs)) == 18


def test_paper_config_dag_has_every_phase_of_every_run(tmp_path):
    """The paper-scale config (hub teacher, streamed FineWeb-Edu) dry-runs here without network."""
    jobs = dry_run(tmp_path, "--configfile", str(REPO / "configs" / "paper.yaml"))
    counts = Counter(job.rule for job in jobs)
    assert counts["pretrain_teacher"] == 0  # the teacher comes from the hub
    assert counts["check_teacher"] == 1 and counts["paper"] == 1
    assert sorted(phase_jobs(jobs)) == sorted(phases_of(REPO / "configs" / "paper.yaml").specs)
    assert len(phase_jobs(jobs)) == 18


def test_paper_dag_through_the_slurm_profile_gives_every_phase_its_gpus(tmp_path):
    """`snakemake --profile slurm results/paper` from the repository root, on the paper config: every
    phase of every run is a cluster job with 8 GPUs on one node (sbatch --nodes=1: SLURM may not split
    them 4 + 4) and the configured CPUs, memory and runtime; model jobs get one GPU on one node. (That
    tables, figures and the report run locally is checked by the real SLURM test: a dry run does not mark
    local rules.)"""
    paper = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    command = [SNAKEMAKE, "--profile", "slurm", "--directory", str(tmp_path), "-n", "results/paper",
               "--configfile", str(REPO / "configs" / "paper.yaml")]
    proc = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    jobs = parse_jobs(proc.stdout)
    phases = training_jobs(jobs)
    assert set(phases) == set(phases_of(paper).specs) and len(phases) == 18
    train = paper["resources"]["train"]
    for key, job in phases.items():
        resources = job.resources
        assert resources["gpu"] == str(train["gpus"]) == "8", key
        assert resources["nodes"] == "1", key
        assert resources["cpus_per_gpu"] == str(train["cpus_per_gpu"]), key
        assert resources["mem_mb"] == str(train["mem_mb"]) and resources["runtime"] == str(train["runtime"]), key
        assert resources["slurm_extra"] == "--signal=TERM@600", key  # saves a state 10 min before the limit
        assert resources["attempt"] == "1", key  # what the job reads to know a retry (normgrow.train.attempts)
    for job in jobs:
        if job.rule in ("check_teacher", "diagnose"):
            assert job.resources["gpu"] == "1" and job.resources["nodes"] == "1", job


def test_the_site_template_through_the_slurm_profile_gives_each_job_its_partition_account_and_qos(tmp_path):
    """configs/site-template.yaml after configs/paper.yaml, as its header says: every phase and model job
    asks for the GPU partition, the data jobs for the CPU one, all with the account and QoS."""
    command = [SNAKEMAKE, "--profile", "slurm", "--directory", str(tmp_path), "-n", "results/paper",
               "--configfile", str(REPO / "configs" / "paper.yaml"), str(REPO / "configs" / "site-template.yaml")]
    proc = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    jobs = [job for job in parse_jobs(proc.stdout) if "mem_mb" in job.resources and job.rule != "paper"]
    partitions = {"train" if is_training(job.rule) else job.rule: job.resources.get("slurm_partition") for job in jobs}
    assert partitions["train"] == partitions["check_teacher"] == partitions["diagnose"] == "gpu"
    assert partitions["corpus"] == partitions["tokenize_corpus"] == "cpu"
    for job in jobs:
        assert (job.resources.get("slurm_account"), job.resources.get("qos")) == ("my-project", "normal"), job.rule



def test_the_site_template_dag_names_every_training_job_for_its_run_phases(tmp_path):
    """The paper DAG through the slurm profile and the site template: every training job's name (the SLURM
    plugin sends `--comment rule_{name}`) and log file name every run sharing its phase, its seed and its phase
    index (normgrow.cli phases gives the same names from the config alone)."""
    configs = [REPO / "configs" / "paper.yaml", REPO / "configs" / "site-template.yaml"]
    command = [SNAKEMAKE, "--profile", "slurm", "--directory", str(tmp_path), "-n", "results/paper",
               "--configfile", *map(str, configs)]
    proc = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    table = phases_of(*configs)
    phases = training_jobs(parse_jobs(proc.stdout))
    assert set(phases) == set(table.specs) and len(phases) == 18
    for key, job in phases.items():
        sharing = sharers(table, key)
        runs, seeds, indexes = zip(*sharing, strict=True)
        label = f"{'+'.join(runs)}_seed{seeds[0]}_phase{indexes[0]}_{key}"
        assert job.rule == f"train_{label}" and job.fields["log"] == f"logs/train/{label}.log", (key, sharing)
    assert len({job.rule for job in phases.values() if "+" in job.rule}) == 4  # phases 0 and 1 shared by 2 or 3 runs


def test_the_gpu_type_constraint_and_sbatch_flags_reach_every_job_of_their_group(tmp_path):
    """A GPU model, a constraint, a reservation and sbatch flags under resources.train, after the site
    template: every phase job of the paper DAG carries them as the SLURM plugin's resources (gpu_model →
    --gpus=MODEL:N, constraint → -C, the rest after --signal in slurm_extra); the model jobs keep the
    template's GPU model and no constraint."""
    site = tmp_path / "site.yaml"
    site.write_text('resources:\n  train: {constraint: "h100&ib", reservation: maint, slurm_extra: "--exclusive"}\n')
    command = [SNAKEMAKE, "--profile", "slurm", "--directory", str(tmp_path), "-n", "results/paper",
               "--configfile", str(REPO / "configs" / "paper.yaml"), str(REPO / "configs" / "site-template.yaml"),
               str(site)]
    proc = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    jobs = parse_jobs(proc.stdout)
    phases = training_jobs(jobs)
    assert len(phases) == 18
    for key, job in phases.items():
        assert (job.resources["gpu"], job.resources["gpu_model"]) == ("8", "h100"), key
        assert job.resources["constraint"] == "h100&ib", key
        assert job.resources["slurm_extra"] == "--signal=TERM@600 --reservation=maint --exclusive", key
    for job in jobs:
        if job.rule in ("check_teacher", "diagnose"):
            assert (job.resources["gpu"], job.resources["gpu_model"]) == ("1", "h100"), job
            assert "constraint" not in job.resources and "slurm_extra" not in job.resources, job


def test_group_jobs_through_the_slurm_profile_ask_for_their_students_memory_and_runtime(tmp_path):
    """With resources.train.group_size: 2, each group of the paper DAG is one cluster job (train_{id};
    a phase with no partner is a group of one) on a phase's GPUs and CPUs per GPU, asking for its
    students × the phase's mem_mb and runtime (normgrow.design.config.job_resources; the GPU memory is
    the trace's, docs/cluster.md)."""
    groups_yaml = tmp_path / "groups.yaml"
    groups_yaml.write_text("resources:\n  train: {group_size: 2}\n")
    paper = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())
    table = phases_of(paper, groups_yaml)
    groups = {job_name(table, g): g for g in table.groups(2)}
    command = [SNAKEMAKE, "--profile", "slurm", "--directory", str(tmp_path), "-n", "results/paper",
               "--configfile", str(REPO / "configs" / "paper.yaml"), str(groups_yaml)]
    proc = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    jobs = {job.rule: job for job in parse_jobs(proc.stdout) if is_training(job.rule)}
    assert groups and set(jobs) == set(groups)
    assert sorted(len(g.keys) for g in groups.values()) == [1, 1] + [2] * 8  # two phases have no partner
    train = paper["resources"]["train"]
    for name, job in jobs.items():
        students = len(groups[name].keys)
        assert job.resources["gpu"] == "8", name
        assert job.resources["cpus_per_gpu"] == str(train["cpus_per_gpu"]), name
        assert job.resources["mem_mb"] == str(students * train["mem_mb"]), name
        assert job.resources["runtime"] == str(students * train["runtime"]), name


def test_every_job_that_loads_a_hub_teacher_gets_its_pinned_revision(tmp_path):
    """The paper config names its teacher by hub id at teacher.revision: every job that loads it (its
    check and probe, every phase alone or in a group, the diagnostics, the export, the trace) and the
    tokenizer taken from it read that commit, not the hub's default branch."""
    groups = tmp_path / "groups.yaml"
    groups.write_text("resources:\n  train: {group_size: 2}\n")
    teacher = yaml.safe_load((REPO / "configs" / "paper.yaml").read_text())["teacher"]
    pinned = {"name": teacher["name"], "revision": teacher["revision"]}
    assert pinned["revision"]
    jobs = job_params(tmp_path, [REPO / "configs" / "paper.yaml", groups],
                      ["results/paper", "results/trace/trace.json", "results/export/post-grow/seed42"])
    loads = {rule for rule, params in jobs if isinstance(params.get("teacher"), dict)}
    assert {"check_teacher", "probe_teacher", "diagnose", "export_student", "trace"} <= loads
    trained = {len(params["phases"]) for rule, params in jobs if is_training(rule) and rule in loads}
    assert trained == {1, 2}  # phases alone and in groups
    for rule, params in jobs:
        if rule in loads:
            assert params["teacher"] == pinned, rule
        if "hub_teacher" in params:
            assert params["hub_teacher"] == pinned, rule
    # the rerun trigger of the jobs no phase key names: another hub teacher or revision reruns them
    assert {rule for rule, params in jobs if "hub_teacher" in params} == {"build_tokenizer", "check_teacher",
                                                                          "check_teacher_files", "probe_teacher",
                                                                          "trace"}


@pytest.fixture(scope="module")
def retried_jobs(tmp_path_factory) -> list[dict]:
    """The default's jobs up to one phase, its teacher pretrained from teacher.pretrain.seed 1042 (the
    comparison's teacher B), every resource evaluated at attempt 2: a retry."""
    work = tmp_path_factory.mktemp("retried")
    seeded = work / "seeded.yaml"
    seeded.write_text("teacher:\n  pretrain: {seed: 1042}\n")
    key = next(iter(phases_of(seeded).specs))
    return job_fields(work, [seeded], [f"results/phases/{key}/state.json"], attempt=2)


def test_a_training_job_reads_the_attempt_snakemake_runs_it_as(retried_jobs):
    """resources.attempt is Snakemake's attempt (workflow/scripts/train_phase.py passes it to launch_phases):
    a retry's 2, not 1, so that it restores a finished phase or fails at once after an exception."""
    training = [job for job in retried_jobs if is_training(job["rule"])]
    assert training and all(job["resources"]["attempt"] == 2 for job in training)


def test_the_teacher_pretrains_from_its_configured_seed(retried_jobs):
    """pretrain_teacher's seed is teacher.pretrain.seed (1042, not data.split_seed's 42), and its recipe
    carries no second copy of it."""
    [pretrain] = [job["params"] for job in retried_jobs if job["rule"] == "pretrain_teacher"]
    assert pretrain["seed"] == 1042 and DEFAULT["data"]["split_seed"] == 42
    assert "seed" not in pretrain["pretrain"]


def test_two_seeds_double_the_phase_jobs(tmp_path):
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("seeds: [1, 2]\n")
    jobs = dry_run(tmp_path, "--configfile", str(CI), str(seeds))
    phases = phase_jobs(jobs)
    assert len(phases) == 36
    assert set(phases) == set(phases_of(CI, {"seeds": [1, 2]}).specs)
    counts = Counter(job.rule for job in jobs)
    for rule in ONE_EACH:  # data, teacher and paper are shared by the seeds
        assert counts[rule] == 1, rule


def test_build_selects_the_runs_a_dag_builds(tmp_path):
    jobs = dry_run(tmp_path, "--configfile", str(CI), "--config", "build=[pre-joint,post-joint,pre-grow,post-grow]")
    table = phases_of(CI, {"build": ["pre-joint", "post-joint", "pre-grow", "post-grow"]})
    assert sorted(phase_jobs(jobs)) == sorted(table.specs) and len(table.specs) == 8
    counts = Counter(job.rule for job in jobs)
    assert counts["run_index"] == 4 and counts["diagnose"] == 8 and counts["paper"] == 1


def test_config_error_is_one_clear_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  eval_every: 500\n")
    proc = snakemake(tmp_path, "-n", "--configfile", str(bad))
    assert proc.returncode != 0
    lines = proc.stdout.splitlines()
    assert "train.eval_every (500) is larger than train.phase_steps (100)" in lines
    assert "Job stats:" not in proc.stdout
    assert "$schema" not in proc.stdout  # not Snakemake's whole-schema dump


def test_an_unsupported_local_teacher_fails_the_dry_run_naming_the_key(tmp_path):
    """normgrow.design.config.check_teacher_files, wired into the DAG: the teacher's family refused by `snakemake -n`,
    not by every phase job after the data preparation (issue 46)."""
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / "config.json").write_text('{"model_type": "made_up_decoder"}')
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"teacher: {{name: {teacher}, dtype: float32}}\n")
    proc = snakemake(tmp_path, "-n", "--configfile", str(bad))
    assert proc.returncode != 0
    assert any(line.startswith("teacher.name:") and "'made_up_decoder'" in line for line in proc.stdout.splitlines()), \
        proc.stdout


def test_another_teacher_under_the_papers_pinned_revision_fails_the_dry_run_naming_the_key(tmp_path):
    """configs/paper.yaml pins Qwen3-8B-Base's commit: a teacher.name given on the command line without its own
    revision would keep that commit of another repository (normgrow.design.config.check_pinned_revisions)."""
    paper = ("--configfile", str(REPO / "configs" / "paper.yaml"))
    proc = snakemake(tmp_path, "-n", "results/paper", *paper, "--config",
                     'teacher={"name": "ibm-granite/granite-3.3-2b-base"}')
    assert proc.returncode != 0
    assert any(line.startswith("teacher.revision: '49e3418") and "(--config)" in line
               for line in proc.stdout.splitlines()), proc.stdout
    dry_run(tmp_path, "results/paper", *paper, "--config",
            'teacher={"name": "ibm-granite/granite-3.3-2b-base", "revision": "' + "0" * 40 + '"}')


def test_command_line_nulls_mean_what_they_mean_in_a_config_file(tmp_path):
    """`--config` values are read as a YAML file reads them (normgrow.design.config.command_line_config), not as
    the strings Snakemake hands on: teacher.revision null is the default branch (every phase's key as under a
    file's `revision: null`, not a revision named 'null'), teacher.name null a teacher pretrained here
    (refused under configs/paper.yaml's tokenizer.train: false, as from a file; not a hub teacher named 'null')."""
    paper = REPO / "configs" / "paper.yaml"
    as_file = tmp_path / "teacher.yaml"
    as_file.write_text("teacher: {revision: null}\n")
    from_file = training_jobs(dry_run(tmp_path, "results/paper", "--configfile", str(paper), str(as_file)))
    from_line = training_jobs(dry_run(tmp_path, "results/paper", "--configfile", str(paper), "--config",
                                      'teacher={"revision": null}'))
    assert set(from_line) == set(from_file)
    assert set(from_file).isdisjoint(training_jobs(dry_run(tmp_path, "results/paper", "--configfile", str(paper))))
    as_file.write_text("teacher: {name: null, revision: null}\n")
    refusals = [snakemake(tmp_path, "-n", "results/paper", "--configfile", str(paper), *rest).stdout
                for rest in ([str(as_file)], ["--config", 'teacher={"name": null, "revision": null}'])]
    for output in refusals:
        assert "tokenizer.train: false takes the teacher's tokenizer, but teacher.name is null" in output, output


def test_an_offline_dry_run_names_what_the_hub_cache_lacks(tmp_path):
    """HF_HUB_OFFLINE=1 and an empty hub cache: the paper's dry run plans its jobs and warns, naming the teacher
    and the corpus that its jobs would not find (normgrow.design.config.offline_gaps)."""
    import os

    environment = {**{k: v for k, v in os.environ.items() if not k.startswith("HF_")},
                   "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "-n", "results/paper",
           "--configfile", str(REPO / "configs" / "paper.yaml")]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                          cwd=tmp_path, env=environment)
    assert proc.returncode == 0, proc.stdout
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("offline (HF_HUB_OFFLINE): ")]
    assert len(warnings) == 2, proc.stdout
    assert "teacher.name: 'Qwen/Qwen3-8B-Base'" in warnings[0] and "'HuggingFaceFW/fineweb-edu'" in warnings[1]
    assert "offline (HF_HUB_OFFLINE)" not in snakemake(tmp_path, "-n", "results/paper", "--configfile",
                                                       str(REPO / "configs" / "paper.yaml")).stdout


@pytest.mark.slow
def test_a_named_teacher_is_refused_by_its_files_check_before_the_corpus_job(tmp_path):
    """A teacher the dry run passes (a Gemma 2 directory: a supported family) but whose config sets what the
    student cannot keep (a final logit cap): refused by check_teacher_files, the job the corpus waits for,
    from its config.json alone; the corpus job never starts."""
    from transformers import Gemma2Config

    teacher = tmp_path / "teacher"
    Gemma2Config(hidden_size=16, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1,
                 final_logit_softcapping=30.0).save_pretrained(teacher)
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"teacher: {{name: {teacher}, dtype: float32}}\n")
    corpus = next(job for job in dry_run(tmp_path, "results/data/tokens", "--configfile", str(mine))
                  if job.rule == "corpus")
    assert corpus.fields["input"] == "results/teacher/files.json"  # the corpus job waits for the check
    proc = snakemake(tmp_path, "--cores", "1", "results/data/tokens", "--configfile", str(mine))
    assert proc.returncode != 0
    log = (tmp_path / "logs" / "teacher" / "check_files.log").read_text()
    assert "final_logit_softcapping=30.0 is not supported" in log
    assert not (tmp_path / "logs" / "data" / "corpus.log").exists()


MODULE = """configfile: "{workflow}/config.yaml"

module normgrow:
    snakefile: "{workflow}/Snakefile"
    config: config

use rule * from normgrow

import os
print("PYTHONPATH=" + os.environ["PYTHONPATH"])
"""


@pytest.mark.parametrize("copy", [False, True])
def test_the_workflow_as_a_module_of_another_workflow_dry_runs(tmp_path, copy):
    """`module` from another directory: the repository's Snakefile (its src/ beside it, put first on the jobs'
    PYTHONPATH), or a copy of the workflow without src/ (as from a remote source), which uses the normgrow
    the environment provides; the same jobs as the workflow run directly."""
    import os
    import shutil

    workflow = REPO
    if copy:
        workflow = tmp_path / "copy"
        workflow.mkdir()
        for name in ("Snakefile", "config.yaml", "workflow", "envs"):
            if (REPO / name).is_dir():
                shutil.copytree(REPO / name, workflow / name)
            else:
                shutil.copy(REPO / name, workflow / name)
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "Snakefile").write_text(MODULE.format(workflow=workflow))
    environment = {**os.environ, "PYTHONPATH": str(REPO / "src")}  # the stand-in for an installed normgrow
    proc = subprocess.run([SNAKEMAKE, "-n"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, cwd=outer, env=environment)
    assert proc.returncode == 0, proc.stdout
    path = next(line for line in proc.stdout.splitlines() if line.startswith("PYTHONPATH="))
    assert path.removeprefix("PYTHONPATH=").split(os.pathsep)[0] == str(REPO / "src")
    assert not copy or str(workflow / "src") not in path
    direct = Counter(job.rule for job in dry_run(tmp_path))
    assert Counter(job.rule for job in parse_jobs(proc.stdout)) == direct


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
def test_ci_run_writes_every_phase_once_and_every_run_sees_its_phases(ci_run):
    table = phases_of(CI)
    assert sorted(p.name for p in (ci_run / "results" / "phases").iterdir()) == sorted(table.specs)
    runs = ci_run / "results" / "runs"
    for (run, seed), keys in table.runs.items():
        index = yaml.safe_load((runs / run / f"seed{seed}" / "phases.json").read_text())
        assert [entry["key"] for entry in index["phases"]] == keys
        for entry in index["phases"]:
            folder = ci_run / entry["dir"]
            assert folder == ci_run / "results" / "phases" / entry["key"]
            for name in PHASE_FILES:
                assert (folder / name).is_file(), folder / name
    assert sum(len(keys) for keys in table.runs.values()) == 25
    assert not list(runs.glob("*/seed*/phase[0-9]*")), "a run's folder holds only its index (no undeclared links)"


@pytest.mark.slow
def test_ci_run_rerun_has_nothing_to_do(ci_run):
    proc = snakemake(ci_run, "--configfile", str(CI), "--cores", "2", "results/paper")
    assert proc.returncode == 0, proc.stdout
    assert "Nothing to be done" in proc.stdout, proc.stdout
    assert parse_jobs(proc.stdout) == []


@pytest.mark.slow
def test_ci_run_forcerun_one_phase_reruns_it_and_downstream_only(ci_run):
    keys = phases_of(CI).runs[("post-grow", 42)]
    target = f"results/phases/{keys[1]}/state.json"
    jobs = dry_run(ci_run, "results/paper", "--configfile", str(CI), "--forcerun", target)
    assert sorted(phase_jobs(jobs)) == sorted(keys[1:])
    counts = Counter(job.rule for job in jobs)
    assert counts["collect_metrics"] == counts["paper"] == counts["run_index"] == 1
    for upstream in ("corpus", "build_tokenizer", "tokenize_corpus", "pretrain_teacher", "check_teacher"):
        assert counts[upstream] == 0, upstream
    # nothing of another run (or of post-grow's phase 0) is rebuilt
    for job in jobs:
        if "run" in job.wildcards:
            assert job.wildcards["run"] == "post-grow", (job.rule, job.wildcards)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["threads=2", 'train={"resume_every": 7}', 'train={"loss_chunk": 100}',
                                     'train={"lr": 0.001}',  # the same value, moved first by --config
                                     'resources={"train": {"runtime": 600}}'])
def test_ci_run_execution_settings_rerun_nothing(ci_run, setting):
    proc = snakemake(ci_run, "-n", "--configfile", str(CI), "--config", setting, "--", "results/paper")
    assert proc.returncode == 0, proc.stdout
    assert "Nothing to be done" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_ci_run_a_science_setting_reruns_every_phase(ci_run):
    jobs = dry_run(ci_run, "--configfile", str(CI), "--config", 'train={"lr": 0.002}', "--", "results/paper")
    assert sorted(phase_jobs(jobs)) == sorted(phases_of(CI, {"train": {"lr": 0.002}}).specs)
    assert len(phase_jobs(jobs)) == 18


@pytest.mark.slow
def test_ci_run_a_run_extending_a_curriculum_trains_only_its_new_phase(ci_run, tmp_path):
    extra = {"curricula": {"grow-more": [*DEFAULT["curricula"]["grow"], {"active_blocks": 3, "data": "fresh"}]},
             "runs": {"post-grow-more": {"placement": "post", "curriculum": "grow-more"}}}
    (tmp_path / "more.yaml").write_text(yaml.safe_dump(extra))
    jobs = dry_run(ci_run, "--configfile", str(CI), str(tmp_path / "more.yaml"), "--", "results/paper")
    keys = phases_of(CI, extra).runs[("post-grow-more", 42)]
    assert keys[:3] == phases_of(CI).runs[("post-grow", 42)]
    assert phase_jobs(jobs) == [keys[3]]
    counts = Counter(job.rule for job in jobs)
    assert counts["run_index"] == 1 and counts["corpus"] == counts["check_teacher"] == 0


@pytest.mark.slow
def test_a_phase_job_with_two_ranks_launches_torchrun_and_matches_one_process(ci_run, tmp_path):
    """The train rule with `resources.train.ranks_per_node: 2` starts the phase under torchrun (two
    gloo ranks on the CPU) and reproduces the one-process phase of the CI run."""
    import shutil

    for part in ("data", "teacher"):
        shutil.copytree(ci_run / "results" / part, tmp_path / "results" / part)
    key = phases_of(CI).runs[("pre-joint", 42)][0]
    phase = f"results/phases/{key}"
    proc = snakemake(tmp_path, "--configfile", str(CI), str(REPO / "tests" / "slurm" / "resources.yaml"),
                     "--cores", "2", "--", f"{phase}/state.json")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "1 of 1 steps (100%) done" in proc.stdout  # only the phase ran
    log = next((tmp_path / "logs" / "train").glob(f"*_{key}.log")).read_text()
    assert "torch.distributed.run --standalone --nproc_per_node=2" in log
    assert yaml.safe_load((tmp_path / phase / "state.json").read_text())["ranks"] == 2
    for table in ("train.csv", "eval.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / phase / table), pd.read_csv(ci_run / phase / table),
                                      check_exact=False, atol=1e-5, rtol=1e-6)


@pytest.mark.slow
def test_ci_run_diagnostic_documents_have_their_own_length_limit(ci_run):
    from normgrow.train.data import TokenStore

    tokens = ci_run / "results" / "data" / "tokens"
    meta = yaml.safe_load((tokens / "meta.json").read_text())
    assert meta["diag_max_length"] == 32 and meta["max_length"] == 48
    assert TokenStore(tokens / "diag").lengths.max() <= 32
    assert meta["splits"]["diag"]["truncated_documents"] >= 1  # the limit was applied, not just unneeded
    assert TokenStore(tokens / "train").lengths.max() == 48  # training documents keep the longer limit


@pytest.mark.slow
def test_the_trace_reruns_on_the_science_it_reads_not_on_execution_settings(ci_run, tmp_path):
    """The trace rule gets the science it reads (batch size, lengths, the student's shape, the
    objective, the teacher's dtype) through its params: a change reruns the trace alone; an execution
    setting it reads (train.loss_chunk) or not (threads) reruns nothing. Traced as for two GPUs of
    1 GB (fake tensors; the CI config's own one-process fp32 job keeps the student unsharded, which
    the trace's FSDP memory tracker does not take)."""
    import shutil

    for part in ("data", "teacher"):
        shutil.copytree(ci_run / "results" / part, tmp_path / "results" / part)
    gpus = 'resources={"train": {"gpus": 2, "gpu_gb": 1}}'
    proc = snakemake(tmp_path, "--configfile", str(CI), "--config", gpus, "--cores", "2", "--",
                     "results/trace/trace.json")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "1 of 1 steps (100%) done" in proc.stdout  # only the trace ran
    for setting in ('train={"batch_size": 2}', 'student={"attn_implementation": "eager"}',
                    'objective={"temperature": 2.0}'):  # (data.* is also the corpus's: it reruns the data)
        proc = snakemake(tmp_path, "-n", "--configfile", str(CI), "--config", gpus, setting, "--",
                         "results/trace/trace.json")
        assert proc.returncode == 0 and "Nothing to be done" not in proc.stdout, (setting, "reruns nothing")
        assert [job.rule for job in parse_jobs(proc.stdout)] == ["trace"], (setting, proc.stdout)
    for setting in ('train={"loss_chunk": 100}', "threads=2"):
        proc = snakemake(tmp_path, "-n", "--configfile", str(CI), "--config", gpus, setting, "--",
                         "results/trace/trace.json")
        assert proc.returncode == 0 and "Nothing to be done" in proc.stdout, (setting, proc.stdout)
