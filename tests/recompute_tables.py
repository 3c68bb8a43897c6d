"""The tables of a finished run recomputed from its raw outputs (every phase's eval.csv and train.csv, the
runs' phases.json) from the paper's definitions, importing nothing of normgrow: final validation CE per
run and seed, Δ_joint, Δ_grow and the interaction (Table 1), phase 0 of grow (Table 2), the controls'
CEs (Tables 3, A3, B3), steps and tokens summed from every update's logged count (Table A2). Each value's
mean over the seeds must appear among the numbers of its table's CSV (results/paper/tables/).

    python tests/recompute_tables.py RUN_DIRECTORY
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

CONTROLS = {"post-joint-long": "table3", "post-joint-longer": "table3", "pre-freeze": "tableA3",
            "post-freeze": "tableA3", "pre-grow-reset": "tableB3", "post-grow-reset": "tableB3"}


def read_rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def recompute(root: Path) -> dict[str, tuple[str, float]]:
    """Each recomputed value by name and seed ("name/seed"), with the table that must hold its mean over
    the seeds."""
    runs = {}
    for path in root.glob("results/runs/*/seed*/phases.json"):
        index = json.loads(path.read_text())
        runs[(index["run"], index["seed"])] = [root / p["dir"] for p in index["phases"]]

    def final(run: str, seed: int, phase: int = -1, column: str = "ce") -> float:
        return float(read_rows(runs[(run, seed)][phase] / "eval.csv")[-1][column])

    values = {}
    for seed in sorted({s for _, s in runs}):
        pj, qj, pg, qg = (final(r, seed) for r in ("pre-joint", "post-joint", "pre-grow", "post-grow"))
        values |= {f"{name}/{seed}": ("table1", v) for name, v in (
            ("pre-joint", pj), ("post-joint", qj), ("pre-grow", pg), ("post-grow", qg), ("Δ_joint", qj - pj),
            ("Δ_grow", qg - pg), ("interaction", (qg - pg) - (qj - pj)))}
        values |= {f"{r}/{seed}": (table, final(r, seed)) for r, table in CONTROLS.items() if (r, seed) in runs}
        values |= {f"{r}/phase 0/{k}/{seed}": ("table2", final(r, seed, 0, k))
                   for r in ("pre-grow", "post-grow") for k in ("ce", "kd", "kd_soft", "ppl")}
    for (run, seed), phases in runs.items():
        updates = [row for folder in phases for row in read_rows(folder / "train.csv")]
        values |= {f"{run}/steps/{seed}": ("tableA2", len(updates)),
                   f"{run}/tokens/{seed}": ("tableA2", sum(int(u["tokens"]) for u in updates))}
    return values


def table_numbers(path: Path) -> list[float]:
    numbers = []
    for row in read_rows(path):
        for value in row.values():
            try:
                numbers.append(float(value))
            except (TypeError, ValueError):
                pass
    return numbers


def seed_means(root: Path) -> dict[str, tuple[str, float]]:
    """The recomputed values' means over the seeds (what a table shows), by name."""
    by_name = {}
    for key, (table, value) in recompute(root).items():
        by_name.setdefault(key.rsplit("/", 1)[0], (table, []))[1].append(value)
    return {name: (table, sum(values) / len(values)) for name, (table, values) in by_name.items()}


def not_in_tables(root: Path) -> list[str]:
    """The recomputed means that their table does not hold (to 1e-9, relative)."""
    tables = root / "results" / "paper" / "tables"
    numbers = {path.stem: table_numbers(path) for path in tables.glob("*.csv")}
    return [name for name, (table, v) in seed_means(root).items()
            if not any(abs(n - v) <= 1e-9 * max(1.0, abs(v)) for n in numbers.get(table, []))]


if __name__ == "__main__":
    root = Path(sys.argv[1])
    values, missing = seed_means(root), not_in_tables(root)
    for name, (table, v) in values.items():
        print(f"{name:40s} {table:8s} {v:18.10f} {'NOT IN ITS TABLE' if name in missing else ''}")
    print(f"{len(values) - len(missing)} of {len(values)} recomputed values are in the tables")
    sys.exit(1 if missing else 0)
