"""Every Snakemake command written in the README, the docs and the configs' header comments dry-runs as
written (with `-n` added, in a scratch directory): a target misplaced after `--configfile`, a
missing file or a stale option fails here, not for a user; where a doc says how many jobs a command
lists, the dry run lists that many."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SNAKEMAKE


def written_commands() -> list[tuple[str, str]]:
    """(where, command) of every `snakemake …` command in README.md, CONTRIBUTING.md and docs/*.md
    (code spans and blocks) and in
    the comment headers of configs/*.yaml."""
    found = []
    for doc in [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text()
        for command in re.findall(r"`(snakemake [^`]+)`", text) + re.findall(r"^(snakemake .+)$", text, re.M):
            found.append((doc.name, " ".join(command.split())))  # a span wrapped over lines is one command
    for config in sorted((REPO / "configs").glob("*.yaml")):
        for line in config.read_text().splitlines():
            match = re.match(r"#\s+(snakemake .+?)(\s{2,}\(.*)?$", line)
            if match:
                found.append((config.name, match.group(1)))
    return sorted(set(found))


WRITTEN = written_commands()
COMMANDS = sorted({command for _, command in WRITTEN})  # each distinct command dry-runs once
WHERE = {command: sorted(w for w, c in WRITTEN if c == command) for command in COMMANDS}


def written_job_counts() -> dict[tuple[str, str], int]:
    """(where, command) → N of every "`snakemake …` lists N jobs" in README.md and docs/*.md."""
    counts = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for command, jobs in re.findall(r"`(snakemake [^`]+)`\s+lists\s+(\d+)\s+jobs", doc.read_text()):
            counts[(doc.name, command)] = int(jobs)
    return counts


JOB_COUNTS = written_job_counts()


def local_teachers(args) -> list[str]:
    """The relative teacher directories (teacher.name) of the repository's configs a command names."""
    names = []
    for arg in map(str, args):
        if arg.startswith("configs/") and arg.endswith(".yaml"):
            name = (yaml.safe_load((REPO / arg).read_text()) or {}).get("teacher", {}).get("name")
            if name and not Path(name).is_absolute() and name.startswith("results/"):
                names.append(name)
    return names


def test_the_commands_are_found():
    where = {w for w, _ in WRITTEN}
    assert {"workflow.md", "cluster.md", "miniature.md", "ci.yaml", "mid.yaml", "paper.yaml"} <= where
    assert len(COMMANDS) >= 6
    assert JOB_COUNTS and set(JOB_COUNTS) <= set(WRITTEN)


def skipped(command: str) -> str | None:
    """Why a written command is not dry-run here, if it is not."""
    if "$(" in command:
        return "needs the links of a finished run (shell substitution)"
    if "--report" in command:
        return "reports a finished run (tests/test_snakemake_report.py runs it on the CI run)"
    if "--sdm conda" in command:
        return "needs conda (Snakemake builds the environment first)"
    if "--sdm apptainer" in command:
        return "needs apptainer and the built image (tests/test_container.py dry-runs the refusals without them)"
    return None


def dry_run(command: str, directory: Path) -> subprocess.CompletedProcess:
    """`command` with `-n`, in the scratch `directory`."""
    (directory / "my.yaml").write_text("{}\n")  # the docs' placeholder for a user's own config
    args = [directory / "my.yaml" if a == "my.yaml" else a for a in shlex.split(command)[1:]]
    for teacher in local_teachers(args):  # written by a step before the command (its config's header says which)
        (directory / teacher).mkdir(parents=True)
    dry = [SNAKEMAKE, "-n", "--directory", str(directory), *map(str, args)]
    return subprocess.run(dry, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every written command's dry run, two at a time (each is one single-threaded Snakemake process).
    The scratch directories are made before the threads start: pytest's temporary-directory factory is not
    thread-safe (its first call on an xdist worker empties and remakes the worker's base directory; with this
    fixture the first to call it, from two threads, one run lost that directory mid-fixture: 38 errors)."""
    commands = [c for c in COMMANDS if skipped(c) is None]
    directories = [tmp_path_factory.mktemp("dry") for _ in commands]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(commands, pool.map(dry_run, commands, directories), strict=True))


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{', '.join(WHERE[c])}: {c}" for c in COMMANDS])
def test_written_command_dry_runs(command, dry_runs):
    where = ", ".join(WHERE[command])
    if skipped(command):
        pytest.skip(skipped(command))
    proc = dry_runs[command]
    assert proc.returncode == 0, f"{where}: {command}\n{proc.stdout[-3000:]}"
    for place in WHERE[command]:
        if (place, command) in JOB_COUNTS:  # the number of jobs the doc says it lists
            total = re.search(r"^total\s+(\d+)$", proc.stdout, re.M)
            assert total and int(total.group(1)) == JOB_COUNTS[(place, command)], (place, command,
                                                                                   proc.stdout[-2000:])


# ---------------------------------------------------------------- the rerun and retrain recipes
WORKFLOW_DOC = REPO / "docs" / "workflow.md"


def recipes() -> tuple[str, list[str]]:
    """docs/workflow.md's `CONFIGS="…"` (the config files its recipes name) and each recipe that uses it: every
    bash block that runs `snakemake … $CONFIGS …`."""
    text = WORKFLOW_DOC.read_text()
    configs = re.search(r'^CONFIGS="([^"]+)"', text, re.M).group(1)
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
    return configs, [block.strip() for block in blocks if block.startswith("snakemake ") and "$CONFIGS" in block]


CONFIGS_AS_WRITTEN, RECIPES = recipes()


def test_the_recipes_are_found():
    assert CONFIGS_AS_WRITTEN == "config.yaml configs/paper.yaml"
    assert len(RECIPES) == 4
    assert sum("--forcerun" in r for r in RECIPES) == 3 and sum("--touch" in r for r in RECIPES) == 1


@pytest.mark.parametrize("configs", [CONFIGS_AS_WRITTEN, "config.yaml"], ids=["paper", "embedded default"])
def test_the_rerun_and_retrain_recipes_dry_run_as_written(configs, tmp_path):
    """Each recipe, word for word, from the repository root with `CONFIGS` set as docs/workflow.md says (the
    paper's, and the embedded default alone), with `snakemake` run as `snakemake -n --directory SCRATCH`: it
    dry-runs (a job name the DAG lacks is a MissingRuleException), and the jobs it forces or touches are those
    it says: one phase's (post-grow seed 42 phase 1), every training job, or none trained by other code (none
    has trained in the scratch directory)."""
    from normgrow.cli import read_configs
    from normgrow.design.curriculum import PhaseTable
    from normgrow.design.job_names import job_names

    config = read_configs([REPO / name for name in configs.split()])
    table = PhaseTable.from_config(config)
    jobs = set(job_names(table, config["resources"]["train"]["group_size"]).values())
    one = job_names(table, config["resources"]["train"]["group_size"])[table.runs[("post-grow", 42)][1]]
    arguments = tmp_path / "arguments"
    script = (f'snakemake() {{ printf "%s\\n" "$@" > {arguments}; command {SNAKEMAKE} -n --directory {tmp_path} "$@"; '
              '}\n'
              f'export PATH={Path(sys.executable).parent}:$PATH PYTHONPATH={REPO / "src"}\nset -euo pipefail\n')
    for recipe in RECIPES:
        proc = subprocess.run(["bash", "-c", script + recipe], cwd=REPO, env={**os.environ, "CONFIGS": configs},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        assert proc.returncode == 0, f"{recipe}\n{proc.stdout[-3000:]}"
        assert "This was a dry-run" in proc.stdout, proc.stdout[-2000:]
        given = arguments.read_text().splitlines()
        assert given[given.index("--configfile") + 1:][:len(configs.split())] == configs.split(), (recipe, given)
        option = "--touch" if "--touch" in recipe else "--forcerun"
        named = set(given[given.index(option) + 1:]) - {"--", "results/paper"}
        expected = {"--run": {one}, "--other-code": set(), "--jobs": jobs}
        assert named == next(v for k, v in expected.items() if k in recipe), (recipe, named)
    assert len(jobs) == 18
