"""The paper's tables, built from the collected phase results.

Every cell holds one value per seed; the table shows the mean, and "mean ± std" (sample std over
seeds) when there are several. Differences (Δ, interaction) are taken per seed first, so they are
paired by seed. The paper's own number, where it reports one, stands beside ours.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from normgrow.paper.document import Block, Grid, Heading, Paragraph, to_markdown
from normgrow.paper.items import ITEMS
from normgrow.paper.latex import cell, column_groups, fit_to_width, header_lines, latex, value_lines, width
from normgrow.paper.reference import paper_reference
from normgrow.paper.results import NotBuilt, Results
from normgrow.paper.roles import Role, has_role
from normgrow.paper.stats import delta, effects, mean_ci


@dataclass
class Cell:
    row: str
    column: str
    values: pd.Series | None = None  # one value per seed, indexed by seed
    text: str | None = None
    paper: float | str | None = None
    digits: int | None = None  # overrides the table's digits


@dataclass(frozen=True)
class TexStyle:
    """How the `.tex` tables are set for a document (config report.tables): with the paper's reported values or
    without them, their labels' prefix (two runs' tables in one document need two), and captions by table name
    in place of the titles (plain text, mapped to LaTeX as the titles are)."""

    paper_rows: bool = True
    label_prefix: str = "tab:"
    captions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: dict) -> TexStyle:
        """report.tables; its paper_rows null: on for a reproduction (the paper's teacher, or a teacher pretrained
        here as the embedded miniature does), off with any other teacher."""
        tables = config["report"]["tables"]
        paper_rows = tables["paper_rows"]
        if paper_rows is None:
            paper_rows = reproduces_the_paper(config["teacher"]["name"])
        return cls(paper_rows, tables["label_prefix"], dict(tables["captions"]))


def reproduces_the_paper(teacher: str | None) -> bool:
    """Whether a run with this teacher (a hub id or a local path; None: pretrained by the workflow) reproduces
    the paper: the paper's teacher by its name (the last part of the id or path), or a teacher trained here."""
    return teacher is None or Path(teacher).name == paper_reference()["tableA1"]["teacher"]


@dataclass
class Table:
    name: str  # the file name in results/paper/tables and the key of its label in normgrow.paper.items
    cells: list[Cell] = field(default_factory=list)
    digits: int = 4
    note: str | None = None  # printed under the table: definitions that differ from the paper's words
    own_note: str | None = None  # the note without the paper's values, where `note` quotes them ("": none)

    @property
    def title(self) -> str:
        """What it shows, after its label: its `shows` in normgrow.paper.items."""
        return ITEMS[self.name].shows

    @property
    def heading(self) -> str:
        """'Table 1: ...': the label from normgrow.paper.items, then the title."""
        return f"{ITEMS[self.name].label}: {self.title}"

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
        """Mean; with several seeds "mean ± std", or for differences "mean [95% CI]"."""
        if c.text is not None:
            return c.text
        d = self.digits if c.digits is None else c.digits
        mean, low, high = mean_ci(c.values)
        if math.isnan(mean):
            return "not reached"
        if abs(mean) >= 1e5:
            return f"{mean:,.0f}"
        if is_difference(c.row):
            return f"{mean:+.{d}f}" + (f" [{low:+.{d}f}, {high:+.{d}f}]" if len(c.values) > 1 else "")
        return f"{mean:.{d}f}" + (f" ± {c.values.std(ddof=1):.{d}f}" if len(c.values) > 1 else "")

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
                    c.paper if isinstance(c.paper, str) else f"{c.paper:+.{self.digits}f}" if is_difference(c.row)
                    else f"{c.paper:.{self.digits}f}" if isinstance(c.paper, float) else str(c.paper))
        ordered = [x for col in columns for x in (col, f"{col} (paper)") if x in wide.columns]
        wide = wide[ordered]
        wide.index.name = ""
        return wide

    def blocks(self) -> list[Block]:
        """The table as a document: title, grid, and its note under it."""
        note = [Paragraph(self.note, "note")] if self.note else []
        return [Heading(self.heading, 3), Grid.from_frame(self.display()), *note]

    def markdown(self) -> str:
        return to_markdown(self.blocks())

    def latex(self, style: TexStyle = TexStyle()) -> str:
        """A booktabs table for pdflatex that fits the text width of a one-column article (it needs
        booktabs and graphicx, as its first line says): every character mapped to LaTeX
        (normgrow.paper.latex), a character with no mapping refused by name. LaTeX numbers the caption,
        so it is the title alone. With one measured column the paper's value stands beside it;
        otherwise it has a row of its own under ours. Column names and long texts wrap, a spread goes
        under its mean, and the columns are set in groups that fit the line, one tabular each, every
        tabular shrunk to the line width where it is still wider (normgrow.paper.latex). `style` (config
        report.tables): the paper's values and the note that quotes them left out, the label's prefix, the
        caption in place of the title."""
        label = ITEMS[self.name].label
        caption = style.captions.get(self.name) or self.title[:1].upper() + self.title[1:]
        note = self.note if style.paper_rows or self.own_note is None else self.own_note
        lines = [f"% {label} (normgrow): needs \\usepackage{{booktabs}} and \\usepackage{{graphicx}}",
                 "\\begin{table}[t]", "\\centering", f"\\caption{{{self.tex(caption)}}}",
                 f"\\label{{{style.label_prefix}{self.name}}}", self.tabulars(style)]
        if note:
            lines += ["\\par\\smallskip\\footnotesize " + self.tex(note)]
        lines += ["\\end{table}", ""]
        return "\n".join(lines)

    def tabulars(self, style: TexStyle = TexStyle()) -> str:
        """The table's tabulars alone (no float, caption, label or note), to set in a float of one's own, each
        shrunk to that float's line width where it is wider: the paper's values (style.paper_rows) beside ours,
        or on a row of their own under ours when there are several measured columns."""
        wide = self.display()
        if not style.paper_rows:
            wide = wide[[c for c in wide.columns if not c.endswith(PAPER)]]
        measured = [c for c in wide.columns if not c.endswith(PAPER)]
        paper_rows = len(measured) > 1
        columns = measured if paper_rows else list(wide.columns)
        widths = {c: self.column_width(wide, c, paper_rows) for c in columns}
        labels = [*wide.index, "   paper"] if paper_rows else list(wide.index)  # PAPER_ROW, its \quad as spaces
        groups = column_groups(widths, width([(label, False) for label in labels])) if paper_rows else [columns]
        return "\n\\par\\medskip\n".join(self.tabular(wide, group, paper_rows) for group in groups)

    def bare_tabulars(self, style: TexStyle = TexStyle()) -> str:
        """The file of the tabulars alone, NAME_tabular.tex: its first line names the packages, and the tabulars
        are set without a paragraph indent (a float has none; running text would push them past the line)."""
        return (f"% {ITEMS[self.name].label} (normgrow), its tabulars: needs \\usepackage{{booktabs}} and "
                f"\\usepackage{{graphicx}}\n{{\\setlength{{\\parindent}}{{0pt}}%\n{self.tabulars(style)}\\par}}\n")

    def tex(self, text) -> str:
        return latex(text, where=f"table {self.name}")

    @staticmethod
    def column_width(wide: pd.DataFrame, column: str, paper_rows: bool) -> float:
        """The estimated width of a column: its name, its values and (`paper_rows`) the paper's under them."""
        values = [*wide[column], *(wide[column + PAPER] if paper_rows and column + PAPER in wide else [])]
        return max(width(header_lines(column)), *(width(value_lines(v)) for v in values))

    def tabular(self, wide: pd.DataFrame, columns: list[str], paper_rows: bool) -> str:
        """The rows of `wide` in `columns`, each value over its spread; under a row with paper values
        in these columns (`paper_rows`), a row of the paper's. Rows empty in these columns are left out."""
        where = f"table {self.name}"
        head = [cell(header_lines(c), where, "b") for c in columns]
        lines = [f"\\begin{{tabular}}{{l{'r' * len(columns)}}}", "\\toprule", " & ".join(["", *head]) + " \\\\",
                 "\\midrule"]
        for row, values in wide.iterrows():
            ours = [values[c] for c in columns]
            paper = [values.get(c + PAPER, "") for c in columns] if paper_rows else []
            if any(ours):
                lines.append(" & ".join([self.tex(row), *(cell(value_lines(v), where) for v in ours)]) + " \\\\")
            if any(paper):
                lines.append(" & ".join([PAPER_ROW, *map(self.tex, paper)]) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}"]
        return fit_to_width("\n".join(lines))

    def write(self, directory: Path, style: TexStyle = TexStyle()) -> list[Path]:
        """CSV, Markdown and the LaTeX float, and beside it `NAME_tabular.tex`, its tabulars alone
        (bare_tabulars)."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = [directory / f"{self.name}{end}" for end in (".csv", ".md", ".tex", "_tabular.tex")]
        self.frame().to_csv(paths[0], index=False)
        paths[1].write_text(self.markdown())
        paths[2].write_text(self.latex(style))
        paths[3].write_text(self.bare_tabulars(style))
        return paths


PAPER = " (paper)"  # the suffix of the paper's columns in Table.display
PAPER_ROW = "\\quad\\textit{paper}"  # the label of the paper's row under ours in a LaTeX table


def is_difference(row: str) -> bool:
    """Rows of paired differences (Δ, interaction), shown with a sign and a 95% interval."""
    return row.startswith(("Δ", "Interaction"))


def placement_grid(t: Table, r: Results, curricula: dict[str, str], paper: dict | None = None) -> dict:
    """Rows Pre-norm / Post-norm: final CE of each curriculum (curriculum → column), then the row
    Δ (Post−Pre) per curriculum, paired by seed; the paper's values from `paper` when it has them.
    Returns the Δs by curriculum."""
    for placement, label in (("pre", "Pre-norm"), ("post", "Post-norm")):
        for curriculum, col in curricula.items():
            run = f"{placement}-{curriculum}"
            t.add(label, col, r.final_metric(run), None if paper is None else paper["ce"][run])
    deltas = {}
    for curriculum, col in curricula.items():
        deltas[curriculum] = delta(r.final_ce(), curriculum)
        t.add("Δ (Post−Pre)", col, deltas[curriculum], None if paper is None else paper[f"delta_{curriculum}"])
    return deltas


def table1(r: Results, ref: dict) -> Table:
    """Final validation CE of pre/post × joint/grow; Δ = post − pre; interaction = Δ_grow − Δ_joint."""
    r.require("pre-joint", "post-joint", "pre-grow", "post-grow")
    t = Table("table1")
    placement_grid(t, r, {"joint": "Joint", "grow": "Grow"}, ref["table1"])
    t.add("Interaction (Δ_grow − Δ_joint)", "Grow", effects(r.final_ce())["interaction"], ref["table1"]["interaction"])
    return t


def table2(r: Results, ref: dict) -> Table:
    """Single-block control: phase 0 of the grow runs (one active block)."""
    r.require("pre-grow", "post-grow")
    paper = ref["table2"]["pre"]
    t = Table("table2",
              note="KD (soft CE) = −Σ q_teacher·log q_student = KL + H(teacher), the paper-comparable column: the "
                   f"paper's KD ({paper['kd']:.4f}) exceeds its CE ({paper['ce']:.4f}), which only a soft "
                   "cross-entropy can. KL is the term the distillation objective weights.",
              own_note="KD (soft CE) = −Σ q_teacher·log q_student = KL + H(teacher), the cross-entropy against the "
                       "teacher's distribution. KL is the term the distillation objective weights.")
    for placement, label in (("pre", "Pre"), ("post", "Post")):
        for metric, column, paper in (("ce", "CE", "ce"), ("kd_soft", "KD (soft CE)", "kd"), ("kd", "KL", None),
                                      ("ppl", "PPL", "ppl")):
            t.add(label, column, r.phase_metric(f"{placement}-grow", 0, metric),
                  ref["table2"][placement][paper] if paper else None)
    return t


def table3(r: Results, ref: dict) -> Table:
    """Post-joint budget controls against post-grow (final validation CE)."""
    rows = [("post-joint", "Post-Joint (unique tokens)"),
            ("post-joint-long", "Post-Joint-long (active-layer tokens)"),
            ("post-joint-longer", "Post-Joint-longer (total tokens)"),
            ("post-grow", "Post-Grow")]
    r.require(*(run for run, _ in rows))
    t = Table("table3")
    for run, label in rows:
        t.add(label, "CE", r.final_metric(run), ref["table3"]["ce"][run])
    return t


# the paper's Table A2 rows, by the runs of this workflow that have their curricula
PAPER_BUDGETS = {"pre-joint": "joint-50k", "post-joint": "joint-50k", "pre-grow": "grow-3x50k",
                 "post-grow": "grow-3x50k", "post-joint-long": "joint-proxy-matched", "post-joint-longer": "joint-150k"}


def tableA2(r: Results, ref: dict) -> Table:
    """Budgets of every run from the logged token counters (sums over its phases), beside the
    paper's total and unique tokens for the runs with the paper's curricula; and each run's start, its
    training CE at its first update (where a short budget may measure the start rather than the
    placement: normgrow.paper.preconditions.start_gap), when the phases recorded it."""
    t = Table("tableA2", digits=0)
    per_run = r.phases.sort_values("phase").groupby(["run", "seed"])
    for (run, _seed), rows in per_run:
        if any(c.row == run for c in t.cells):
            continue
        paper = ref["tableA2"].get(PAPER_BUDGETS.get(run), {})
        t.add(run, "phases", text=str(len(rows)), paper=str(paper["phases"]) if paper else None)
        t.add(run, "active layers", text="→".join(map(str, rows["active_layers"])), paper=paper.get("active_layers"))
        final = r.final[r.final["run"] == run].set_index("seed")
        for counter, col, key in (("run_steps", "steps", None), ("run_tokens", "total tokens", "total"),
                                  ("run_unique_tokens", "unique tokens", "unique"),
                                  ("run_active_layer_tokens", "active-layer tokens", None)):
            t.add(run, col, final[counter].astype(float), f"{paper[key]:.2f}B" if key in paper else None)
        start = r.first_update_ce(run)
        if not start.empty:
            t.cells.append(Cell(run, "CE at update 1", start, digits=2))
    return t


def tableA3(r: Results, ref: dict) -> Table:
    """Freeze control (only the newest block trains) against grow."""
    r.require("pre-freeze", "post-freeze", "pre-grow", "post-grow")
    t = Table("tableA3")
    p = ref["tableA3"]
    deltas = placement_grid(t, r, {"freeze": "Freeze", "grow": "Grow"}, p)
    t.add("Δ_freeze − Δ_grow", "Freeze", deltas["freeze"] - deltas["grow"],
          round(p["delta_freeze"] - p["delta_grow"], 4))
    return t


def tableB3(r: Results, ref: dict) -> Table:
    """Grow with the iterator rewound at every phase (App. B.3) against grow (final validation CE)."""
    r.require("pre-grow-reset", "post-grow-reset", "pre-grow", "post-grow")
    t = Table("tableB3",
              note="The paper reports no numbers for this control, only that reset ≈ grow with the same ranking.",
              own_note="")
    placement_grid(t, r, {"grow-reset": "Grow-reset", "grow": "Grow"})
    for placement in ("pre", "post"):
        t.add(f"Δ reset − grow ({placement})", "Grow-reset",
              r.final_metric(f"{placement}-grow-reset") - r.final_metric(f"{placement}-grow"))
    return t


MAIN_RUNS = ("pre-grow", "post-grow", "pre-joint", "post-joint")


def table4(r: Results, ref: dict) -> Table:
    """Block removal at each main run's final snapshot (its phase end): ΔCE and angular distance per block."""
    r.require(*MAIN_RUNS)
    if r.removal.empty:
        raise NotBuilt("no block-removal diagnostics (diagnostics.runs)")
    t = Table("table4", digits=3)
    removal = final_snapshots(r.removal)
    for run in MAIN_RUNS:
        rows = removal[removal["run"] == run]
        for block in sorted(rows["block"].unique()):
            values = rows[rows["block"] == block].set_index("seed").sort_index()
            paper = ref["table4"][run][block] if block < len(ref["table4"][run]) else (None, None)
            t.add(f"{run} · block {block}", "ΔCE", values["delta_ce"], paper[0])
            t.add(f"{run} · block {block}", "angular distance", values["angular_distance"], paper[1])
    return t


def tableA1(r: Results, ref: dict) -> Table:
    """Hyper-parameters of the configuration actually run, beside the paper's."""
    c = r.config
    if not c:
        raise NotBuilt("no configuration given")
    tr, data, obj = c["train"], c["data"], c["objective"]
    ours = {
        "teacher": c["teacher"]["name"] or "Qwen3 pretrained by the workflow (teacher.pretrain)",
        "blocks K × layers per block L": f"{c['student']['blocks']} × {c['student']['layers_per_block']}",
        "global batch (documents)": tr["batch_size"], "max sequence length": data["max_length"],
        "steps per phase": tr["phase_steps"], "peak LR": tr["lr"], "min LR": tr["min_lr"],
        "warm-up (fraction of phase)": tr["warmup_fraction"], "AdamW β": tuple(tr["betas"]), "AdamW ε": tr["eps"],
        "weight decay": tr["weight_decay"], "gradient clip (global L2)": tr["grad_clip"],
        "α (KD weight)": obj["alpha"], "γ (CE weight)": obj["gamma"], "τ (temperature)": obj["temperature"],
        "eval every (steps)": tr["eval_every"], "validation documents": data["valid_docs"],
        "diagnostic documents": data["diag_docs"], "teacher precision": c["teacher"]["dtype"],
        "seeds": ", ".join(map(str, c["seeds"])),
    }
    t = Table("tableA1")
    for key, value in ours.items():
        t.add(key, "value", text=str(value), paper=str(ref["tableA1"].get(key, "")))
    return t


def tableA4(r: Results, ref: dict) -> Table:
    """Transition-aligned training loss of the grow runs at each block-appending step."""
    r.require("pre-grow", "post-grow")
    if r.transitions.empty:
        raise NotBuilt("no block-appending transitions")
    t = Table("tableA4",
              note="AUC (mean) = mean excess training loss over the window (2% / 10% of a phase: the paper's 1k / "
                   "5k of 50k steps), the paper-comparable column: the paper's post-norm AUC5k < AUC1k while its "
                   "loss recovers only after ~19k steps fits the mean, not the area. AUC (sum) is the area, in "
                   "loss × thousand paper-equivalent steps.",
              own_note="AUC (mean) = mean excess training loss over the window (2% / 10% of a phase); AUC (sum) is "
                       "the area, in loss × thousand paper-equivalent steps (a phase of 50k steps).")
    rows = r.transitions[r.transitions["run"].isin(["pre-grow", "post-grow"])]
    paper_keys = {1: "50k", 2: "100k"}
    for phase in sorted(rows["phase"].unique()):
        for i, placement in enumerate(("pre", "post")):
            values = rows[(rows["phase"] == phase) & (rows["placement"] == placement)].set_index("seed").sort_index()
            step = int(values["transition_step"].iloc[0])
            label = f"phase {phase} (step {step}) · {placement}"
            paper = ref["tableA4"].get(paper_keys.get(phase), {})
            for metric, col in (("jump", "jump"), ("auc_1k", "AUC 2% (mean)"), ("auc_5k", "AUC 10% (mean)")):
                t.add(label, col, values[metric], paper[metric][i] if paper else None)
            for metric, col in (("auc_1k_sum", "AUC 2% (sum, loss × kstep)"),
                                ("auc_5k_sum", "AUC 10% (sum, loss × kstep)")):
                if metric in values:
                    t.add(label, col, values[metric])
            recovery = values["recovery_paper_steps"].astype(float)
            t.cells.append(Cell(label, "recovery (paper-equiv. steps)", recovery,
                                paper=paper["recovery"][i] if paper else None, digits=0))
    return t


# RMSNorm weights per decoder layer besides the q/k norms every placement has (2·head_dim), from the
# layers normgrow.model.student.DecoderLayer builds (a test counts them on the modules)
NORM_WEIGHTS = {"pre": "2·H", "post": "2·H", "sandwich": "4·H", "deepnorm": "2·H", "hybridnorm": "H + head_dim",
                "mix-ln": "2·H"}


def placements_with_roles(r: Results) -> list[str]:
    """Placements other than pre-norm whose joint and grow runs this configuration built."""
    found = {Role.parse(run).placement for run in r.runs if has_role(run, "joint") or has_role(run, "grow")}
    return sorted(p for p in found if p != "pre" and r.has(f"{p}-joint", f"{p}-grow"))


def tableP1(r: Results, ref: dict) -> Table:
    """Every placement P against pre-norm, paired by seed: final validation CE under joint and grow,
    Δ_c(P) = CE(P, c) − CE(pre, c) and the interaction Δ_grow(P) − Δ_joint(P) (Eq. 6 with P for
    post-norm), and P's norm weights per layer (pre/post: 2·H; H the hidden size)."""
    r.require("pre-joint", "pre-grow")
    placements = placements_with_roles(r)
    if not placements:
        raise NotBuilt("needs a placement other than pre-norm run under joint and grow")
    t = Table("tableP1",
              note="Norm weights: RMSNorm weights per decoder layer besides the q/k norms all placements share; "
                   "placements with more than pre/post's 2·H have more normalisation parameters.")
    for placement in ["pre", *placements]:
        t.add(placement, "Joint", r.final_metric(f"{placement}-joint"))
        t.add(placement, "Grow", r.final_metric(f"{placement}-grow"))
        t.add(placement, "norm weights / layer", text=NORM_WEIGHTS.get(placement.split("@")[0], "?"))
    for placement in placements:
        d = effects(r.final_ce(), placement)
        t.add(f"Δ {placement} − pre", "Joint", d["delta_joint"])
        t.add(f"Δ {placement} − pre", "Grow", d["delta_grow"])
        t.add(f"Δ {placement} − pre", "Interaction (Δ_grow − Δ_joint)", d["interaction"])
    return t


def final_snapshots(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of every (run, seed)'s last diagnosed snapshot."""
    return frame[frame["global_step"] == frame.groupby(["run", "seed"])["global_step"].transform("max")]


def tableP2(r: Results, ref: dict) -> Table:
    """The grow run of every diagnosed placement at its final snapshot: the per-token RMS (mean
    over all real tokens) at every block boundary and the block-removal ΔCE of every block
    (normgrow.train.diagnostics), per placement."""
    if r.rms.empty or r.removal.empty:
        raise NotBuilt("no boundary diagnostics (diagnostics.runs)")
    rms = final_snapshots(r.rms[r.rms["tokens"] == "all"])
    removal = final_snapshots(r.removal)
    diagnosed = [run for run in sorted(set(rms["run"]) & set(removal["run"])) if has_role(run, "grow")]
    if not diagnosed:
        raise NotBuilt("no grow run was diagnosed (diagnostics.runs)")
    t = Table("tableP2",
              digits=3, note="RMS: mean per-token RMS over all real tokens at the stream entering block 0 "
                             "(boundary 0) and leaving block b−1 (boundary b); ΔCE: CE with block b bypassed − CE "
                             "of the full stack.")
    for run in sorted(diagnosed, key=lambda run: (run != "pre-grow", run != "post-grow", run)):
        for b, rows in rms[rms["run"] == run].groupby("boundary"):
            t.add(run.removesuffix("-grow"), f"RMS boundary {b}", rows.set_index("seed")["mean"].sort_index())
        for b, rows in removal[removal["run"] == run].groupby("block"):
            t.add(run.removesuffix("-grow"), f"ΔCE without block {b}", rows.set_index("seed")["delta_ce"].sort_index())
    return t


def growth_operators(r: Results) -> list[str]:
    """The growth operators (normgrow.design.curriculum.Growth.label) under which both pre- and post-norm
    grow runs were built, the paper's (random) first."""
    found = {role.operator for role in map(Role.parse, r.runs) if role is not None and role.curriculum == "grow"}
    both = [op for op in sorted(found) if all(r.has(str(Role(p, "grow", op))) for p in ("pre", "post"))]
    return sorted(both, key=lambda op: op != "random")


def tableG1(r: Results, ref: dict) -> Table:
    """Growth operators × placements (docs/growth.md): final validation CE of the pre- and post-norm
    grow runs under each operator, and Δ_grow(operator) = CE(post) − CE(pre), paired by seed."""
    operators = growth_operators(r)
    if operators == ["random"] or not operators:
        raise NotBuilt("needs pre- and post-norm grow runs under a growth operator other than random")
    t = Table("tableG1",
              note="random is the paper's operator (a fresh block); zero, copy and ramp as in docs/growth.md.")
    ce = r.final_ce()
    for operator in operators:
        grow = str(Role("pre", "grow", operator)).removeprefix("pre-")  # the curriculum's name: grow, grow+zero, ...
        t.add("Pre-norm", operator, ce[f"pre-{grow}"])
        t.add("Post-norm", operator, ce[f"post-{grow}"])
        t.add("Δ_grow (Post−Pre)", operator, delta(ce, grow))
    return t


def tableG2(r: Results, ref: dict) -> Table:
    """Training loss at each block-appending transition under each growth operator (the Table A4
    definitions, normgrow.paper.transitions), pre- and post-norm."""
    operators = growth_operators(r)
    if operators == ["random"] or not operators:
        raise NotBuilt("needs pre- and post-norm grow runs under a growth operator other than random")
    if r.transitions.empty:
        raise NotBuilt("no block-appending transitions")
    t = Table("tableG2",
              note="jump: loss just after the transition − just before; AUC (mean): mean excess loss over 2% / 10% of "
                   "a phase; recovery: paper-equivalent steps until the loss is back to its level before (Table A4).")
    for phase in sorted(r.transitions["phase"].unique()):
        for operator in operators:
            for placement in ("pre", "post"):
                run = str(Role(placement, "grow", operator))
                values = r.transitions[(r.transitions["run"] == run) & (r.transitions["phase"] == phase)]
                values = values.set_index("seed").sort_index()
                label = f"phase {phase} · {operator} · {placement}"
                for metric, col in (("jump", "jump"), ("auc_1k", "AUC 2% (mean)"), ("auc_5k", "AUC 10% (mean)")):
                    t.add(label, col, values[metric])
                recovery = values["recovery_paper_steps"].astype(float)
                t.cells.append(Cell(label, "recovery (paper-equiv. steps)", recovery, digits=0))
    return t


BUILDERS = (table1, table2, table3, table4, tableA1, tableA2, tableA3, tableA4, tableB3, tableP1, tableP2, tableG1,
            tableG2)


# The tables whose numbers the text of a paper quotes: each of their measured cells a macro (write_macros).
HEADLINE_TABLES = ("table1", "tableP1")
MACROS = "headline_macros.tex"  # beside the tables
DIGIT_WORDS = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine")


def macro_name(*parts: str) -> str:
    """A LaTeX command name, letters only, of `parts`: each word capitalised, a digit spelled out, a Greek letter
    by its name (Δ → Delta), an accented letter without its accent, everything else dropped.
    `tab:`, table1, Pre-norm, Joint → TabTableOnePreNormJoint."""
    words = []
    for part in parts:
        for word in re.findall(r"[^\W_]+", part):
            text = "".join(map(macro_letters, word))
            words.append(text[:1].upper() + text[1:])
    name = "".join(words)
    if not name:
        raise ValueError(f"no LaTeX command name in {parts!r}: they hold no letter or digit")
    return name


def macro_letters(char: str) -> str:
    """One character of a command name as ASCII letters: a digit's word, a Greek letter's name, an accented
    letter's base letter; '' for anything else."""
    if char in string.digits:
        return DIGIT_WORDS[int(char)]
    if char in string.ascii_letters:
        return char
    if unicodedata.name(char, "").startswith("GREEK"):
        return unicodedata.name(char).rsplit(" ", 1)[-1].capitalize()
    base = unicodedata.normalize("NFKD", char)[:1]
    return base if base in string.ascii_letters else ""


def macro_values(table: Table, c: Cell) -> tuple[str, str | None]:
    """A cell's mean as its table prints it (signed for a difference), and its 95% interval over the seeds
    (Student's t, normgrow.paper.stats.mean_ci) as "[low, high]"; None for one seed or a mean not reached."""
    d = table.digits if c.digits is None else c.digits
    mean, low, high = mean_ci(c.values)
    if math.isnan(mean):
        return "not reached", None
    sign = "+" if is_difference(c.row) else ""
    interval = f"[{low:{sign}.{d}f}, {high:{sign}.{d}f}]" if c.values.notna().sum() > 1 else None
    return f"{mean:{sign}.{d}f}", interval


def macro_body(tex: str) -> str:
    """A macro's text that reads in text and in math alike: each `$...$` of a signed number as `\\ensuremath`."""
    return re.sub(r"\$([^$]*)\$", r"\\ensuremath{\1}", tex)


def write_macros(tables: list[Table], path: Path, style: TexStyle = TexStyle()) -> Path:
    """The headline numbers for the text of a paper (`\\input` it in the preamble): for each measured cell of the
    headline tables, `\\<Prefix><Table><Row><Column>` its mean as the table prints it, and, with two or more
    seeds, `\\<...>Interval` its 95% interval over the seeds. Names from macro_name (letters only), the label
    prefix first, so that two runs' macros (two prefixes) live in one document."""
    lines = [f"% The headline numbers (normgrow): {', '.join(HEADLINE_TABLES)}, label prefix {style.label_prefix}.",
             "% \\NAME: the mean as its table prints it; \\NAMEInterval: its 95% interval over the seeds (two or "
             "more)."]
    names: set[str] = set()
    for table in (t for t in tables if t.name in HEADLINE_TABLES):
        for c in (c for c in table.cells if c.values is not None):
            name = macro_name(style.label_prefix, table.name, c.row, c.column)
            if name in names:
                raise ValueError(f"table {table.name}: two cells would be \\{name}; rename a row or column")
            names.add(name)
            mean, interval = macro_values(table, c)
            lines.append(f"\\newcommand{{\\{name}}}{{{macro_body(table.tex(mean))}}}")
            if interval is not None:
                lines.append(f"\\newcommand{{\\{name}Interval}}{{{macro_body(table.tex(interval))}}}")
    path.write_text("\n".join(lines) + "\n")
    return path


def build_tables(results: Results) -> tuple[list[Table], dict[str, str]]:
    """Every table this configuration's runs allow, and why each other one was not built (by name)."""
    ref = paper_reference()
    tables, not_built = [], {}
    for build in BUILDERS:
        try:
            tables.append(build(results, ref))
        except NotBuilt as why:
            not_built[build.__name__] = str(why)
    return tables, not_built
