"""The tables of a finished run recomputed from its raw outputs (every phase's eval.csv and train.csv, the
runs' phases.json) from the paper's definitions, importing nothing of normgrow: final validation CE per
run, Δ_joint, Δ_grow and the interaction (Table 1), phase 0 of grow (Table 2), the budget controls (Table 3),
freeze (Table A3) and iterator reset (Table B3), steps and tokens summed from every update's logged count
(Table A2). Each value's mean over the seeds must be the `mean` of its own cell (row, column) of its
table's CSV (results/paper/tables/), to 1e-9.

    python tests/recompute_tables.py RUN_DIRECTORY
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

PLACEMENT_ROWS = {"pre": "Pre-norm", "post": "Post-norm"}
CONTROLS = {"post-joint-long": ("table3", "Post-Joint-long (active-layer tokens)", "CE"),
            "post-joint-longer": ("table3", "Post-Joint-longer (total tokens)", "CE"),
            "pre-freeze": ("tableA3", "Pre-norm", "Freeze"), "post-freeze": ("tableA3", "Post-norm", "Freeze"),
            "pre-grow-reset": ("tableB3", "Pre-norm", "Grow-reset"),
            "post-grow-reset": ("tableB3", "Post-norm", "Grow-reset")}
PHASE0 = {"ce": "CE", "kd_soft": "KD (soft CE)", "kd": "KL", "ppl": "PPL"}

Cell = tuple[str, str, str]  # table, row, column


def read_rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def recompute(root: Path) -> dict[Cell, list[float]]:
    """Each recomputed value, one per seed, by the table cell that must hold its mean."""
    runs = {}
    for path in root.glob("results/runs/*/seed*/phases.json"):
        index = json.loads(path.read_text())
        runs[(index["run"], index["seed"])] = [root / p["dir"] for p in index["phases"]]

    def final(run: str, seed: int, phase: int = -1, column: str = "ce") -> float:
        return float(read_rows(runs[(run, seed)][phase] / "eval.csv")[-1][column])

    values: dict[Cell, list[float]] = {}

    def add(cell: Cell, value: float) -> None:
        values.setdefault(cell, []).append(value)

    for seed in sorted({s for _, s in runs}):
        ce = {(p, c): final(f"{p}-{c}", seed) for p in PLACEMENT_ROWS for c in ("joint", "grow")}
        for (p, c), v in ce.items():
            add(("table1", PLACEMENT_ROWS[p], c.capitalize()), v)
        d_joint, d_grow = ce["post", "joint"] - ce["pre", "joint"], ce["post", "grow"] - ce["pre", "grow"]
        add(("table1", "Δ (Post−Pre)", "Joint"), d_joint)
        add(("table1", "Δ (Post−Pre)", "Grow"), d_grow)
        add(("table1", "Interaction (Δ_grow − Δ_joint)", "Grow"), d_grow - d_joint)
        for run, cell in CONTROLS.items():
            if (run, seed) in runs:
                add(cell, final(run, seed))
        for p in PLACEMENT_ROWS:
            for column, name in PHASE0.items():
                add(("table2", p.capitalize(), name), final(f"{p}-grow", seed, 0, column))
    for (run, _), phases in runs.items():
        updates = [row for folder in phases for row in read_rows(folder / "train.csv")]
        add(("tableA2", run, "steps"), len(updates))
        add(("tableA2", run, "total tokens"), sum(int(u["tokens"]) for u in updates))
    return values


def seed_means(root: Path) -> dict[Cell, float]:
    """The recomputed values' means over the seeds (what a table shows), by cell."""
    return {cell: sum(v) / len(v) for cell, v in recompute(root).items()}


def not_in_tables(root: Path) -> list[Cell]:
    """The cells whose `mean` in the table's CSV is missing or differs from the recomputed mean."""
    tables = root / "results" / "paper" / "tables"
    cells = {}
    for path in tables.glob("*.csv"):
        for row in read_rows(path):
            if row["mean"]:
                cells[(path.stem, row["row"], row["column"])] = float(row["mean"])
    return [cell for cell, v in seed_means(root).items()
            if cell not in cells or abs(cells[cell] - v) > 1e-9 * max(1.0, abs(v))]


if __name__ == "__main__":
    root = Path(sys.argv[1])
    means, wrong = seed_means(root), not_in_tables(root)
    for cell, v in means.items():
        print(f"{' / '.join(cell):60s} {v:18.10f} {'NOT IN ITS TABLE' if cell in wrong else ''}")
    print(f"{len(means) - len(wrong)} of {len(means)} recomputed cells equal the tables")
    sys.exit(1 if wrong or not means else 0)
