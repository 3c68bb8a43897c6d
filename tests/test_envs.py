"""The conda environment the rules name pins exactly the project's Python dependencies."""

import tomllib

import yaml
from conftest import REPO


def normalise(requirement: str) -> str:
    return requirement.replace(" ", "").lower()


def test_conda_env_pins_the_project_dependencies():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((REPO / "envs" / "normgrow.yaml").read_text())
    pip = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict) and "pip" in item)
    pinned = {normalise(r) for r in pip}
    # snakemake runs the workflow; it is not needed inside the jobs' environment
    expected = {normalise(r) for r in project if not r.startswith("snakemake")}
    assert pinned == expected


def test_every_rule_names_the_env():
    for rules in (REPO / "workflow" / "rules").glob("*.smk"):
        lines = rules.read_text().splitlines()
        rule_count = sum(line.startswith("rule ") for line in lines)
        assert rule_count == sum('"../../envs/normgrow.yaml"' in line for line in lines), rules
