"""Reruns on code follow the science (workflow/rules/train.smk, profiles/default): in a fresh copy of the
checkout holding a finished CI run, a comment in the training script or a docstring in a phase module
plans no training job, a one-line change of the objective's code plans every phase.

The finished run is Snakemake's own record of one: every output of the CI config's DAG made (empty) and
`snakemake --touch` run over them, which records each job's metadata (params included) as a finished
job does; the rerun decision reads only that record and the files' times, not their contents."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SNAKEMAKE
from test_workflow import is_training, parse_jobs, phase_jobs, phases_of

CI = REPO / "configs" / "ci.yaml"
CHECKOUT = ("Snakefile", "config.yaml", "configs", "envs", "profiles", "slurm", "src", "workflow")

# Every output of the DAG, with whether it is a directory() output: built as a dry run builds the DAG,
# through Snakemake's API (as test_workflow.JOB_PARAMS does), in a process of its own.
OUTPUTS = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.io import is_flagged
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

snakefile, configfile = Path(sys.argv[1]), Path(sys.argv[2])
with SnakemakeApi(OutputSettings()) as api:
    workflow_api = api.workflow(resource_settings=ResourceSettings(), snakefile=snakefile, workdir=snakefile.parent,
                                config_settings=ConfigSettings(configfiles=[configfile]))
    workflow_api.dag(DAGSettings(targets={"results/paper"}))
    workflow = workflow_api._workflow
    workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True)
    workflow._build_dag()
    print(json.dumps([[str(f), is_flagged(f, "directory")] for job in workflow.dag.jobs for f in job.output]))
"""


def snakemake(checkout: Path, *args: str) -> subprocess.CompletedProcess:
    command = [SNAKEMAKE, "-s", str(checkout / "Snakefile"), "--configfile", str(checkout / "configs" / "ci.yaml"),
               *args]
    return subprocess.run(command, cwd=checkout, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)


def planned(checkout: Path, *args: str) -> list[str]:
    """The rule of every job a dry run of results/paper plans in `checkout`."""
    proc = snakemake(checkout, "-n", *args, "--", "results/paper")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return [job.rule for job in parse_jobs(proc.stdout)]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A copy of the checkout's workflow holding a finished CI run (Snakemake's record of one, above)."""
    checkout = tmp_path_factory.mktemp("clone")
    for name in CHECKOUT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, checkout / name)
    proc = subprocess.run([sys.executable, "-c", OUTPUTS, str(checkout / "Snakefile"), str(CI)], capture_output=True,
                          text=True, timeout=300, cwd=checkout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for path, is_directory in json.loads(proc.stdout.splitlines()[-1]):
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).mkdir() if is_directory else (checkout / path).touch()
    proc = snakemake(checkout, "--cores", "1", "--touch", "--", "results/paper")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert planned(checkout) == [], "the finished run has nothing to do"
    return checkout


@pytest.fixture
def clone(finished, tmp_path) -> Path:
    """A fresh copy of the finished checkout (its files' times kept), for one edit."""
    copy = tmp_path / "clone"
    shutil.copytree(finished, copy, symlinks=True)
    return copy


@pytest.mark.parametrize("profile", [(), ("--profile", "slurm")], ids=["local", "slurm"])
def test_a_comment_in_the_training_script_retrains_nothing(clone, profile):
    """Locally and through the cluster profile (slurm/, on top of the workflow profile)."""
    with open(clone / "workflow" / "scripts" / "train_phase.py", "a") as f:
        f.write("# a comment pulled with git\n")
    assert planned(clone, *profile) == []


def test_a_docstring_in_a_phase_module_retrains_nothing(clone):
    objective = clone / "src" / "normgrow" / "train" / "objective.py"
    source = objective.read_text()
    objective.write_text(source.replace('"""Loss terms', '"""Loss terms (an edited docstring)', 1))
    assert objective.read_text() != source
    assert planned(clone) == []


def test_a_one_line_change_of_the_objectives_code_retrains_every_phase(clone):
    with open(clone / "src" / "normgrow" / "train" / "objective.py", "a") as f:
        f.write("FIX = 1\n")
    proc = snakemake(clone, "-n", "--", "results/paper")
    assert proc.returncode == 0, proc.stdout[-3000:]
    jobs = parse_jobs(proc.stdout)
    assert sorted(phase_jobs(jobs)) == sorted(phases_of(CI).specs)
    assert "paper" in {job.rule for job in jobs}
    assert all(is_training(job.rule) or job.rule in ("run_index", "collect_metrics", "paper", "provenance", "all",
                                                     "diagnose", "export_student")
               for job in jobs), sorted({job.rule for job in jobs})
