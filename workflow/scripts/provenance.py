"""The run's provenance for `snakemake --report`: the resolved configuration (every config file and
--config override merged, usable again as a --configfile), the software that ran (Python, platform,
git commit of the workflow, every installed distribution) and one HTML page showing both."""

import html
import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path

import yaml

from normgrow.logs import job_log

# Shown first; the full list of installed distributions follows.
KEY_PACKAGES = ("snakemake", "torch", "transformers", "tokenizers", "datasets", "safetensors", "numpy", "pandas",
                "scipy", "matplotlib", "pyyaml", "jsonschema")


def git(workflow_dir: Path, *args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(workflow_dir), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def workflow_commit(workflow_dir: Path) -> str:
    commit = git(workflow_dir, "rev-parse", "HEAD")
    if not commit:
        return "unknown (not a git checkout)"
    return commit + (" (with uncommitted changes)" if git(workflow_dir, "status", "--porcelain") else "")


def distributions() -> dict[str, str]:
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(name.lower(), dist.version)
    return dict(sorted(found.items()))


def table(rows: dict[str, str]) -> str:
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows.items())
    return f"<table><tr><th>name</th><th>version / value</th></tr>{body}</table>"


HEADER = ("# The resolved configuration of this run (config.yaml, every --configfile and --config merged).\n"
          "# Rerun it with: snakemake --cores 2 results/paper --configfile config.yaml\n")
CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3;text-align:left}pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:0.85em}"""

with job_log(snakemake.log[0]):
    out = snakemake.output
    workflow_dir = Path(snakemake.scriptdir).resolve().parents[1]
    installed = distributions()
    system = {"python": sys.version.split()[0], "platform": platform.platform(),
              "workflow git commit": workflow_commit(workflow_dir)}
    key = {name: installed.get(name, "not installed") for name in KEY_PACKAGES}

    config = yaml.safe_dump(snakemake.config, sort_keys=False, allow_unicode=True)
    Path(out.config).write_text(HEADER + config)
    lines = ["kind\tname\tversion"]
    lines += [f"system\t{k}\t{v}" for k, v in system.items()]
    lines += [f"package\t{k}\t{v}" for k, v in installed.items()]
    Path(out.versions).write_text("\n".join(lines) + "\n")
    Path(out.page).write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>normgrow provenance</title><style>{CSS}</style>"
        "</head><body><h1>Provenance of this run</h1>"
        "<p>The software that built the tables and figures, and the configuration they were built from "
        "(also in <code>versions.tsv</code> and <code>config.yaml</code> beside this page).</p>"
        f"<h2>Software</h2>{table(system)}{table(key)}"
        f"<h2>Resolved configuration</h2><pre>{html.escape(config)}</pre>"
        f"<h2>Every installed distribution ({len(installed)})</h2><details><summary>show</summary>"
        f"{table(installed)}</details></body></html>")
    print(f"wrote {out.config}, {out.versions} ({len(installed)} distributions) and {out.page}")
