"""Where a finished workflow run's time went: per rule, the jobs, their summed wall time and CPU
time, from the Snakemake benchmark files every rule writes (`benchmark:` → logs/benchmarks/RULE/*.tsv
under the run's directory), and the run's own wall time from its newest Snakemake log.

    python tools/run_time.py RUN_DIR

RUN_DIR is the directory Snakemake ran in (the repository root for the README's first command).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd


def rule_times(run_dir: Path) -> pd.DataFrame:
    """One row per rule directory under RUN_DIR/logs/benchmarks: jobs, wall seconds, CPU seconds."""
    rows = []
    for rule in sorted(p for p in (run_dir / "logs" / "benchmarks").iterdir() if p.is_dir()):
        frames = [pd.read_csv(f, sep="\t") for f in sorted(rule.rglob("*.tsv"))]
        if frames:
            jobs = pd.concat(frames, ignore_index=True)
            rows.append({"rule directory": rule.name, "jobs": len(jobs), "wall s": jobs["s"].sum(),
                         "CPU s": jobs["cpu_time"].sum()})
    return pd.DataFrame(rows)


def elapsed(run_dir: Path) -> str | None:
    """The 'Elapsed time' Snakemake printed at the end of its newest log, if any."""
    logs = sorted((run_dir / ".snakemake" / "log").glob("*.snakemake.log"))
    for log in reversed(logs):
        found = re.findall(r"Elapsed time: (\S+)", log.read_text())
        if found:
            return found[-1]
    return None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    table = rule_times(args.run_dir)
    total = table[["jobs", "wall s", "CPU s"]].sum()
    print(table.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    print(f"all jobs: {int(total['jobs'])}, {total['wall s']:.0f} s of job wall time, {total['CPU s']:.0f} s of CPU; "
          f"the run's wall time: {elapsed(args.run_dir) or 'not found'}")


if __name__ == "__main__":
    main(sys.argv[1:])
