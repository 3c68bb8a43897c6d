"""The container the jobs run in under `--sdm apptainer` (containers/normgrow.def, the Snakefile's `container:`):
its definition parses and pins pyproject.toml's dependencies, every rule names its image, and a run that would
fail in it (no image built, GPU jobs without --nv) is refused at the dry run. Building it needs apptainer and
the network (docs/cluster.md, "Installing on a cluster")."""

import json
import shlex
import subprocess
import sys
import tomllib

import pytest
from conftest import REPO, snakemake_command
from test_envs import normalise

DEFINITION = REPO / "containers" / "normgrow.def"
IMAGE = REPO / "containers" / "normgrow.sif"


def parse_definition(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """An Apptainer definition file: its header (`Bootstrap: docker`, ...) and its sections (`%post`, ...), each
    section's lines with continuations joined and comments left out."""
    header, sections, current = {}, {}, None
    for line in text.replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("%"):
            current = stripped[1:].split()[0]
            assert current not in sections, f"%{current} twice"
            sections[current] = []
        elif current is None:
            key, colon, value = stripped.partition(":")
            assert colon and key.strip() and value.strip(), f"not a header line: {line!r}"
            header[key.strip()] = value.strip()
        else:
            sections[current].append(stripped)
    return header, sections


def pip_installs(post: list[str]) -> list[list[str]]:
    """The requirements of each `python -m pip install` command of %post, in order (options left out)."""
    installs = []
    for line in post:
        words = shlex.split(line)
        if words[:4] == ["python", "-m", "pip", "install"]:
            rest = words[4:]
            installs.append([w for i, w in enumerate(rest) if not w.startswith("-") and rest[i - 1] != "--index-url"])
    return installs


def test_the_definition_pins_the_project_dependencies():
    text = DEFINITION.read_text()
    header, sections = parse_definition(text)
    assert header["Bootstrap"] == "docker" and header["From"].startswith("python:3.11")
    assert {"arguments", "post", "test"} <= set(sections)
    arguments = dict(line.split("=", 1) for line in sections["arguments"])
    assert arguments == {"TORCH_INDEX": "https://pypi.org/simple"}  # PyPI's own torch build unless told otherwise
    for name, value in arguments.items():  # as `apptainer build` renders them
        text = text.replace("{{ " + name + " }}", value)
    _, sections = parse_definition(text)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(r for r in project if r.startswith("torch=="))
    cuda_build, dependencies = pip_installs(sections["post"])
    assert cuda_build == [torch] and f"--index-url {arguments['TORCH_INDEX']}" in sections["post"][1]  # CUDA first
    assert {normalise(r) for r in dependencies} == {normalise(r) for r in project}
    assert len(dependencies) == len(project)


RULE_IMAGES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(), snakefile=Path(sys.argv[1]),
                            workdir=Path(sys.argv[2]))._workflow
    print(json.dumps({rule.name: rule.container_img for rule in workflow.rules}))
"""


def test_every_rule_runs_in_the_image(tmp_path):
    proc = subprocess.run([sys.executable, "-c", RULE_IMAGES, str(REPO / "Snakefile"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    images = json.loads(proc.stdout.splitlines()[-1])
    assert len(images) > 10 and set(images.values()) == {str(IMAGE)}, images
    assert IMAGE.with_suffix(".def") == DEFINITION


@pytest.mark.skipif(IMAGE.exists(), reason="an image is built here: the refusal of a missing one is not reachable")
def test_a_run_its_container_would_fail_is_refused_at_the_dry_run(tmp_path):
    """Under --sdm apptainer: GPU jobs without --nv, then a missing image, each refused naming the fix; without
    the flag, the jobs run in this environment and nothing is asked of an image."""
    def dry_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(snakemake_command(tmp_path, "-n", "results/paper", *args, config=None),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, cwd=tmp_path)

    paper = ("--configfile", str(REPO / "configs" / "paper.yaml"))
    gpus = dry_run(*paper, "--sdm", "apptainer")
    assert gpus.returncode != 0 and 'resources.train.gpus: 8 under --sdm apptainer needs --apptainer-args=--nv' \
        in gpus.stdout, gpus.stdout
    for args in ([*paper, "--apptainer-args=--nv"], []):
        missing = dry_run(*args, "--sdm", "apptainer")
        assert missing.returncode != 0 and f"`apptainer build {IMAGE} {DEFINITION}`" in missing.stdout, missing.stdout
    assert dry_run().returncode == 0
