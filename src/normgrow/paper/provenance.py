"""What ran: the git commit of the workflow's checkout, the installed software, and the code that
trained each phase (normgrow.design.science_code, as results.code_columns collects it). The report (index.html,
report.md) shows the key packages and warns when its phases come from other code; rule `provenance`
writes every distribution and the resolved configuration for `snakemake --report` (results/provenance/)."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from normgrow.paper.document import Block, Code, Grid, Heading, Paragraph
from normgrow.paper.results import CODE_COLUMNS, UNRECORDED

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


def phase_code(phases: pd.DataFrame, current: dict[str, str]) -> list[dict]:
    """The code that trained the run phases of `phases` (results/metrics/phases.csv): one entry per
    distinct science code digest, torch and transformers (`CODE_COLUMNS`; a phase trained before phases
    recorded their code is `unrecorded`), with the run phases it trained, their runs, and whether it is
    `current` (this checkout's digest and the installed torch and transformers), this checkout's first."""
    frame = phases.copy()
    for column in CODE_COLUMNS:
        frame[column] = frame[column].fillna(UNRECORDED).astype(str) if column in frame else UNRECORDED
    entries = []
    for values, rows in frame.groupby(list(CODE_COLUMNS), sort=True):
        code = dict(zip(CODE_COLUMNS.values(), values, strict=True))
        entries.append({**code, "phases": len(rows), "runs": list(dict.fromkeys(rows["run"])),
                        "current": code == {item: current.get(item) for item in CODE_COLUMNS.values()}})
    return sorted(entries, key=lambda entry: not entry["current"])


def code_label(code: dict) -> str:
    return f"science code {code['digest']} (torch {code['torch']}, transformers {code['transformers']})"


def code_warning(entries: list[dict], current: dict[str, str]) -> str | None:
    """What the report says when its phases were trained by more than one code version, or by code
    other than this checkout's; None when every phase was trained by this checkout's code."""
    others = [entry for entry in entries if not entry["current"]]
    if not others:
        return None
    total = sum(entry["phases"] for entry in entries)
    found = "; ".join(f"{code_label(e)}: {e['phases']} of {total} run phases ({', '.join(e['runs'])})"
                      for e in others)
    lead = (f"the phases come from {len(entries)} code versions, not all this checkout's" if len(entries) > 1
            else "every phase was trained by code other than this checkout's")
    return (f"Phases from other code: {lead} ({code_label(current)}). Other code: {found}. A phase is reused by "
            "its key, which does not include its code: these numbers are not this checkout's until those phases "
            "are retrained (docs/workflow.md, Which code trained a phase, and retraining after a code fix: "
            "python -m normgrow.cli phases CONFIGS --other-code lists them).")


def code_blocks(entries: list[dict], current: dict[str, str]) -> list[Block]:
    """The Provenance section's table of the code that trained the phases."""
    return [Paragraph("Code that trained the phases (normgrow.design.science_code; this checkout: "
                      f"{code_label(current)}):"),
            Grid(["science code", "torch", "transformers", "run phases", "runs", "this checkout's"],
                 [[e["digest"], e["torch"], e["transformers"], str(e["phases"]), ", ".join(e["runs"]),
                   "yes" if e["current"] else "no"] for e in entries])]


# datasets' packaged builders: a `data.source.path` that reads files named by data_files, not a hub dataset
BUILDERS = {"json", "csv", "parquet", "text", "arrow", "pandas", "webdataset", "xml", "sql", "imagefolder",
            "audiofolder", "videofolder"}
SHA = re.compile(r"[0-9a-f]{40}")


def revision_text(revision: str | None) -> str:
    """A hub revision as the report shows it: a commit sha pins; a branch or tag can move; none is unpinned."""
    if revision is None:
        return "unpinned (the default branch when it was read; pin a commit sha)"
    return revision if SHA.fullmatch(revision) else f"{revision} (a branch or tag: can move; pin a commit sha)"


def hub_sources(config: dict) -> dict[str, str]:
    """What the run read from the Hugging Face hub, each with its revision (teacher.revision,
    data.source.revision): the teacher (and its tokenizer, when tokenizer.train is false) and the
    dataset. A teacher in a local directory or pretrained here, a corpus file or builder: nothing."""
    found = {}
    name = config["teacher"]["name"]
    if name is not None and not Path(name).expanduser().exists():
        what = "teacher and tokenizer" if not config["tokenizer"]["train"] else "teacher"
        found[f"{what}: {name}"] = revision_text(config["teacher"].get("revision"))
    source = config["data"]["source"]
    path = source.get("path")
    if source["loader"] == "datasets" and path not in BUILDERS and not Path(path).expanduser().exists():
        label = f"{path} ({source['name']})" if source.get("name") else path
        found[f"dataset: {label}"] = revision_text(source.get("revision"))
    return found
