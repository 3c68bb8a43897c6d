"""tests/recompute_tables.py's verdict on a finished run: it exits non-zero when a value it recomputes is
missing from its table, differs from it by more than 1e-9 (relative, at least absolute), or when it
recomputed nothing. The run is a tiny one written here: the 2 × 2 over two seeds, grow in two phases."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from recompute_tables import seed_means

SEEDS = (1, 2)
PHASES = {"pre-joint": 1, "post-joint": 1, "pre-grow": 2, "post-grow": 2}


def write_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def finished_run(root: Path) -> Path:
    """Every run's phases.json, each phase's eval.csv and train.csv, and tables whose every recomputed
    cell holds the recomputed mean (as a report that agrees with the recomputation writes them)."""
    for r, (run, phases) in enumerate(PHASES.items()):
        for seed in SEEDS:
            folders = [f"results/phases/{run}-{seed}-{p}" for p in range(phases)]
            for p, folder in enumerate(folders):
                ce = 3.0 + 0.1 * r + 0.01 * seed - 0.5 * p
                write_rows(root / folder / "eval.csv", [
                    {"step": 1, "ce": ce + 1, "kd": 1.0, "kd_soft": 2.0, "ppl": 30.0},
                    {"step": 2, "ce": ce, "kd": 0.1 * r + seed, "kd_soft": 1.5 + seed, "ppl": 20.0 + r}])
                write_rows(root / folder / "train.csv", [{"step": t, "tokens": 10 * seed + t + p} for t in (1, 2)])
            index = root / "results" / "runs" / run / f"seed{seed}" / "phases.json"
            index.parent.mkdir(parents=True)
            index.write_text(json.dumps({"run": run, "seed": seed, "phases": [{"dir": f} for f in folders]}))
    tables: dict[str, list[dict]] = {}
    for (table, row, column), mean in seed_means(root).items():
        tables.setdefault(table, []).append({"row": row, "column": column, "mean": repr(mean), "seeds": len(SEEDS)})
    for table, rows in tables.items():
        write_rows(root / "results" / "paper" / "tables" / f"{table}.csv", rows)
    return root


def recompute_tables(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "tests" / "recompute_tables.py"), str(root)],
                          capture_output=True, text=True, timeout=120)


def edit_cell(root: Path, table: str, row: str, change) -> None:
    """Rewrite table `table`'s cell of row `row` and column Grow with `change` (which returns the new
    row, or None to drop it)."""
    path = root / "results" / "paper" / "tables" / f"{table}.csv"
    with open(path) as f:
        rows = list(csv.DictReader(f))
    cell = next(r for r in rows if r["row"] == row and r["column"] == "Grow")
    edited = change(dict(cell))
    rows = [edited if r is cell else r for r in rows if r is not cell or edited is not None]
    write_rows(path, rows)


@pytest.fixture
def run(tmp_path) -> Path:
    return finished_run(tmp_path)


def test_tables_that_hold_every_recomputed_value_pass(run):
    proc = recompute_tables(run)
    cells = len(seed_means(run))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert cells == 23 and f"{cells} of {cells} recomputed cells equal the tables" in proc.stdout


@pytest.mark.parametrize("change", [lambda cell: None, lambda cell: {**cell, "mean": ""}], ids=["no row", "no mean"])
def test_a_recomputed_value_missing_from_its_table_fails(run, change):
    edit_cell(run, "table1", "Interaction (Δ_grow − Δ_joint)", change)
    proc = recompute_tables(run)
    cells = len(seed_means(run))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{cells - 1} of {cells} recomputed cells equal the tables" in proc.stdout
    wrong = [line for line in proc.stdout.splitlines() if line.endswith("NOT IN ITS TABLE")]
    assert len(wrong) == 1 and wrong[0].startswith("table1 / Interaction")


def test_a_table_value_off_by_a_millionth_fails(run):
    """The tolerance is 1e-9 of the value (at least 1e-9): the tables are the recomputed means up to
    rounding, so a difference in the sixth decimal is a wrong number."""
    edit_cell(run, "table1", "Post-norm", lambda cell: {**cell, "mean": repr(float(cell["mean"]) + 1e-6)})
    proc = recompute_tables(run)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    wrong = [line for line in proc.stdout.splitlines() if line.endswith("NOT IN ITS TABLE")]
    assert len(wrong) == 1 and wrong[0].startswith("table1 / Post-norm / Grow")


def test_a_run_with_nothing_to_recompute_fails(tmp_path):
    """No run's phases.json (a wrong directory, a run not finished): nothing compared is no pass."""
    (tmp_path / "results" / "paper" / "tables").mkdir(parents=True)
    proc = recompute_tables(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "0 of 0 recomputed cells equal the tables" in proc.stdout
