"""The recipe for a user's CI (docs/cluster.md, "Dry-running the paper's DAG in your own CI"): its
requirements are pyproject's pins, the GitHub Actions example runs the documented commands, and
(slow) the documented lines, run as written in a fresh virtual environment built from
envs/dry-run.txt alone, dry-run the paper's DAG under the SLURM profile with no torch and no SLURM."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO

REQUIREMENTS = REPO / "envs" / "dry-run.txt"
EXAMPLE = REPO / "docs" / "examples" / "dry-run.yml"
MARKER = "<!-- user-ci commands:"


def requirement_name(requirement: str) -> str:
    return re.split(r"[=<>!\[; ]", requirement, maxsplit=1)[0].lower()


def documented_commands() -> list[str]:
    """The lines of the bash block right after the user-ci marker in docs/cluster.md."""
    text = (REPO / "docs" / "cluster.md").read_text()
    block = re.search(re.escape(MARKER) + r"[^\n]*\n```bash\n(.*?)\n```", text, re.S)
    assert block, f"docs/cluster.md has no bash block after {MARKER!r}"
    return block.group(1).splitlines()


def test_the_requirements_are_pyprojects_pins():
    declared = {requirement_name(r): r.replace(" ", "")
                for r in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    wanted = [line.strip() for line in REQUIREMENTS.read_text().splitlines() if line.strip() and line[0] != "#"]
    assert {requirement_name(r) for r in wanted} == {"snakemake", "snakemake-executor-plugin-slurm", "pyyaml",
                                                       "jsonschema"}
    for requirement in wanted:
        assert requirement.replace(" ", "") == declared[requirement_name(requirement)], requirement


def test_the_github_example_runs_the_documented_commands():
    steps = [step["run"] for step in yaml.safe_load(EXAMPLE.read_text())["jobs"]["dry-run"]["steps"] if "run" in step]
    commands = documented_commands()
    assert commands[0].startswith("python3 -m venv")  # setup-python's place in the example
    assert steps == commands[1:]
    assert "--profile slurm" in steps[-1] and "configs/paper.yaml" in steps[-1]


def without_torch_or_slurm(tmp_path: Path) -> str:
    """A PATH of the few commands a CI runner has: a shell, git, the base Python (not this venv's,
    which has torch), and no SLURM command."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    for tool in ("bash", "sh", "env", "which", "uname", "git"):
        (bin_dir / tool).symlink_to(shutil.which(tool, path="/usr/bin:/bin"))
    return str(bin_dir)


@pytest.mark.slow
def test_the_documented_commands_dry_run_the_paper_dag_without_torch(tmp_path):
    checkout = tmp_path / "checkout"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, checkout / name)
    # PIP_NO_COMPILE=0 is --no-compile (pip reads the variables of its --no- options inverted)
    environment = {"HOME": str(tmp_path), "PATH": without_torch_or_slurm(tmp_path),
                   "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_COMPILE": "0"}
    script = "set -euo pipefail\n" + "\n".join(documented_commands()) + "\n" + \
        "if python -c 'import torch' 2>/dev/null; then echo 'torch is importable'; exit 3; fi\n"
    proc = subprocess.run(["bash", "-c", script], cwd=checkout, env=environment, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900, executable="/bin/bash")
    assert proc.returncode == 0, proc.stdout[-4000:]
    total = re.search(r"^total\s+(\d+)$", proc.stdout, re.M)
    # a training job per phase (Snakemake prints the job stats twice in a dry run: count distinct rules)
    phases = set(re.findall(r"^(train_\S+_[0-9a-f]{16})\s+1$", proc.stdout, re.M))
    assert total and len(phases) == 18, proc.stdout[-3000:]
    assert "This was a dry-run" in proc.stdout
