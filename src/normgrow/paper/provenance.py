"""What ran: the git commit of the workflow's checkout and the installed software. The report
(index.html, report.md) shows the key packages; rule `provenance` writes every distribution and the
resolved configuration for `snakemake --report` (results/provenance/)."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path

from normgrow.paper.document import Block, Code, Grid, Heading, Paragraph

KEY_PACKAGES = ("snakemake", "torch", "transformers", "tokenizers", "datasets", "safetensors", "numpy", "pandas",
                "matplotlib", "pyyaml", "jsonschema")


def _git(directory: Path, *args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def git_commit(directory: Path) -> str:
    """HEAD of the checkout at `directory`, flagged when it has uncommitted changes."""
    commit = _git(directory, "rev-parse", "HEAD")
    if not commit:
        return "unknown (not a git checkout)"
    return commit + (" (with uncommitted changes)" if _git(directory, "status", "--porcelain") else "")


def installed() -> dict[str, str]:
    """Every installed distribution and its version, by lower-case name."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(name.lower(), dist.version)
    return dict(sorted(found.items()))


def key_versions(distributions: dict[str, str]) -> dict[str, str]:
    return {name: distributions.get(name, "not installed") for name in KEY_PACKAGES}


def read_versions(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The system rows and the installed distributions, as rule `provenance` wrote them to versions.tsv."""
    rows: dict[str, dict[str, str]] = {"system": {}, "package": {}}
    for line in path.read_text().splitlines()[1:]:
        kind, name, version = line.split("\t", 2)
        rows[kind][name] = version
    return rows["system"], rows["package"]


def system(workflow_dir: Path) -> dict[str, str]:
    return {"python": sys.version.split()[0], "platform": platform.platform(),
            "workflow git commit": git_commit(workflow_dir)}


def provenance_document(system_rows: dict[str, str], distributions: dict[str, str], config_text: str) -> list[Block]:
    """The page of rule `provenance`: software first, then the resolved configuration."""
    return [Heading("Provenance of this run", 1),
            Paragraph("The software that built the tables and figures, and the configuration they were built from "
                      "(also in versions.tsv and config.yaml beside this page)."),
            Heading("Software"), Grid(["name", "version / value"], [[k, v] for k, v in system_rows.items()]),
            Grid(["package", "version"], [[k, v] for k, v in key_versions(distributions).items()]),
            Heading("Resolved configuration"), Code(config_text, "yaml"),
            Heading(f"Every installed distribution ({len(distributions)})"),
            Grid(["package", "version"], [[k, v] for k, v in distributions.items()])]
