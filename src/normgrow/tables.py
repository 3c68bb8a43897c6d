"""The paper's tables, built from the collected phase results.

Every cell holds one value per seed; the table shows the mean, and "mean ± std" (sample std over
seeds) when there are several. Differences (Δ, interaction) are taken per seed first, so they are
paired by seed. The paper's own number, where it reports one, stands beside ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import pandas as pd
import yaml

from normgrow.results import final_phases


def paper_reference() -> dict:
    """The paper's reported numbers (the one reference file, for side-by-side display only)."""
    return yaml.safe_load(resources.files("normgrow").joinpath("paper_reference.yaml").read_text())


@dataclass
class Cell:
    row: str
    column: str
    values: pd.Series | None = None  # one value per seed, indexed by seed
    text: str | None = None
    paper: float | str | None = None


@dataclass
class Table:
    name: str
    title: str
    cells: list[Cell] = field(default_factory=list)
    digits: int = 4

    def add(self, row, column, values=None, paper=None, text=None) -> None:
        self.cells.append(Cell(row, column, values, text, paper))

    def frame(self) -> pd.DataFrame:
        """Long numeric form: row, column, mean, std, seeds, text, paper."""
        records = []
        for c in self.cells:
            v = c.values
            records.append({"row": c.row, "column": c.column,
                            "mean": None if v is None else float(v.mean()),
                            "std": None if v is None or len(v) < 2 else float(v.std(ddof=1)),
                            "seeds": None if v is None else len(v), "text": c.text, "paper": c.paper})
        return pd.DataFrame(records)

    def format(self, c: Cell) -> str:
        if c.text is not None:
            return c.text
        mean = c.values.mean()
        if abs(mean) >= 1e5:
            return f"{mean:,.0f}"
        out = f"{mean:+.{self.digits}f}" if c.row.startswith(("Δ", "Interaction")) else f"{mean:.{self.digits}f}"
        if len(c.values) > 1:
            out += f" ± {c.values.std(ddof=1):.{self.digits}f}"
        return out

    def display(self) -> pd.DataFrame:
        """Wide form: one column per measured column, followed by the paper's columns."""
        rows = list(dict.fromkeys(c.row for c in self.cells))
        columns = list(dict.fromkeys(c.column for c in self.cells))
        wide = pd.DataFrame("", index=rows, columns=columns)
        has_paper = any(c.paper is not None for c in self.cells)
        for col in columns:
            if has_paper:
                wide[f"{col} (paper)"] = ""
        for c in self.cells:
            wide.loc[c.row, c.column] = self.format(c)
            if c.paper is not None:
                wide.loc[c.row, f"{c.column} (paper)"] = (
                    c.paper if isinstance(c.paper, str) else f"{c.paper:+.4f}" if c.row.startswith(("Δ", "Interaction"))
                    else f"{c.paper:.{self.digits}f}" if isinstance(c.paper, float) else str(c.paper))
        ordered = [x for col in columns for x in (col, f"{col} (paper)") if x in wide.columns]
        wide = wide[ordered]
        wide.index.name = ""
        return wide

    def markdown(self) -> str:
        return f"**{self.title}**\n\n" + self.display().to_markdown(disable_numparse=True) + "\n"

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.frame().to_csv(directory / f"{self.name}.csv", index=False)
        (directory / f"{self.name}.md").write_text(self.markdown())


class Results:
    """Per-seed access to the collected phase results."""

    def __init__(self, phases: pd.DataFrame):
        self.phases = phases
        self.final = final_phases(phases)
        self.runs = set(phases["run"])

    def has(self, *runs: str) -> bool:
        return all(r in self.runs for r in runs)

    def final_metric(self, run: str, metric: str = "ce") -> pd.Series:
        return self.final[self.final["run"] == run].set_index("seed")[metric].sort_index()

    def phase_metric(self, run: str, phase: int, metric: str = "ce") -> pd.Series:
        rows = self.phases[(self.phases["run"] == run) & (self.phases["phase"] == phase)]
        return rows.set_index("seed")[metric].sort_index()


def table1(r: Results, ref: dict) -> Table | None:
    """Final validation CE of pre/post × joint/grow; Δ = post − pre; interaction = Δ_grow − Δ_joint."""
    if not r.has("pre-joint", "post-joint", "pre-grow", "post-grow"):
        return None
    t = Table("table1", "Table 1: placement × curriculum interaction (validation CE ↓)")
    p = ref["table1"]
    for placement, label in (("pre", "Pre-norm"), ("post", "Post-norm")):
        for curriculum, col in (("joint", "Joint"), ("grow", "Grow")):
            run = f"{placement}-{curriculum}"
            t.add(label, col, r.final_metric(run), p["ce"][run])
    d_joint = r.final_metric("post-joint") - r.final_metric("pre-joint")
    d_grow = r.final_metric("post-grow") - r.final_metric("pre-grow")
    t.add("Δ (Post−Pre)", "Joint", d_joint, p["delta_joint"])
    t.add("Δ (Post−Pre)", "Grow", d_grow, p["delta_grow"])
    t.add("Interaction (Δ_grow − Δ_joint)", "Grow", d_grow - d_joint, p["interaction"])
    return t


def table2(r: Results, ref: dict) -> Table | None:
    """Single-block control: phase 0 of the grow runs (one active block)."""
    if not r.has("pre-grow", "post-grow"):
        return None
    t = Table("table2", "Table 2: single-block control, phase 0 of grow (↓)")
    for placement, label in (("pre", "Pre"), ("post", "Post")):
        for metric in ("ce", "kd", "ppl"):
            t.add(label, metric.upper(), r.phase_metric(f"{placement}-grow", 0, metric),
                  ref["table2"][placement][metric])
    return t


def table3(r: Results, ref: dict) -> Table | None:
    """Post-joint budget controls against post-grow (final validation CE)."""
    rows = [("post-joint", "Post-Joint (unique tokens)"),
            ("post-joint-long", "Post-Joint-long (active-layer tokens)"),
            ("post-joint-longer", "Post-Joint-longer (total tokens)"),
            ("post-grow", "Post-Grow")]
    if not r.has(*(run for run, _ in rows)):
        return None
    t = Table("table3", "Table 3: post-joint budget controls (validation CE ↓)")
    for run, label in rows:
        t.add(label, "CE", r.final_metric(run), ref["table3"]["ce"][run])
    return t


def tableA2(r: Results, ref: dict) -> Table:
    """Budgets of every run from the logged token counters (sums over its phases)."""
    t = Table("tableA2", "Table A2: training budgets from the logged token counts", digits=0)
    per_run = r.phases.sort_values("phase").groupby(["run", "seed"])
    for (run, _seed), rows in per_run:
        if any(c.row == run for c in t.cells):
            continue
        t.add(run, "phases", text=str(len(rows)))
        t.add(run, "active layers", text="→".join(map(str, rows["active_layers"])))
        final = r.final[r.final["run"] == run].set_index("seed")
        for counter, col in (("run_steps", "steps"), ("run_tokens", "total tokens"),
                             ("run_unique_tokens", "unique tokens"),
                             ("run_active_layer_tokens", "active-layer tokens")):
            t.add(run, col, final[counter].astype(float))
    return t


def tableA3(r: Results, ref: dict) -> Table | None:
    """Freeze control (only the newest block trains) against grow."""
    if not r.has("pre-freeze", "post-freeze", "pre-grow", "post-grow"):
        return None
    t = Table("tableA3", "Table A3: freeze control (validation CE ↓)")
    p = ref["tableA3"]
    for placement, label in (("pre", "Pre-norm"), ("post", "Post-norm")):
        for curriculum, col in (("freeze", "Freeze"), ("grow", "Grow")):
            run = f"{placement}-{curriculum}"
            t.add(label, col, r.final_metric(run), p["ce"][run])
    for curriculum, col in (("freeze", "Freeze"), ("grow", "Grow")):
        delta = r.final_metric(f"post-{curriculum}") - r.final_metric(f"pre-{curriculum}")
        t.add("Δ (Post−Pre)", col, delta, p[f"delta_{curriculum}"])
    return t


BUILDERS = (table1, table2, table3, tableA2, tableA3)


def build_tables(phases: pd.DataFrame) -> list[Table]:
    results, ref = Results(phases), paper_reference()
    return [t for t in (build(results, ref) for build in BUILDERS) if t is not None]
