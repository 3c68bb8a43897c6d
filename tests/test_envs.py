"""The conda environment the rules name pins exactly the project's Python dependencies."""

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib

import pytest
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
        rule_count = sum(re.match(r"\s*rule\b", line) is not None for line in lines)  # named, or in a loop
        assert rule_count == sum('"../../envs/normgrow.yaml"' in line for line in lines), rules


def imported_top_level_modules(paths) -> set[str]:
    """The top-level modules the files import (absolute imports, wherever they appear in a file)."""
    modules = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules


def test_every_imported_package_is_declared():
    """Each third-party module the package or the rules' scripts import comes from a distribution
    pyproject.toml declares itself (not one that arrives only as another's dependency)."""
    declared = {re.split(r"[=<>!\[; ]", r, maxsplit=1)[0].lower().replace("_", "-")
                for r in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    files = [*(REPO / "src" / "normgrow").rglob("*.py"), *(REPO / "workflow" / "scripts").glob("*.py")]
    distributions = importlib.metadata.packages_distributions()
    undeclared = {}
    for module in imported_top_level_modules(files) - set(sys.stdlib_module_names) - {"normgrow"}:
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not names & declared:
            undeclared[module] = sorted(names)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


@pytest.mark.slow
def test_every_module_imports_in_an_environment_built_from_pyproject_alone(tmp_path):
    """A fresh virtual environment with `pip install .` (no extras, no editable checkout): every module of
    the package imports, from outside the repository."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = str(env / "bin" / "python")
    # --no-compile: the imports below compile what they load; the rest of torch's byte code is not needed
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-compile", str(REPO)],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    package = REPO / "src" / "normgrow"
    modules = sorted(".".join(("normgrow", *p.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
                     for p in package.rglob("*.py"))
    script = f"import importlib\nfor m in {modules!r}:\n    importlib.import_module(m)\nprint(len({modules!r}))"
    imported = subprocess.run([python, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert int(imported.stdout) == len(modules) > 30
