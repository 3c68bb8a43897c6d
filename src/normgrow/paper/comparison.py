"""The pre-registered comparison: the paper's 2 × 2 (pre/post × joint/grow) with every cell tuned
alike, confirmed on fresh seeds under independently pretrained teachers (configs/comparison.yaml,
workflow/comparison.smk; docs/miniature.md names the commit that fixed this protocol, which precedes
every run of it).

1. Tuning. Under the first teacher of the config, every cell (pre-joint, post-joint, pre-grow,
   post-grow) trains at every peak learning rate of the config's grid (log-spaced; the warm-up fixed
   at the config's fraction of a phase) on the tuning seeds. Only `select` reads these runs.
2. Selection (`select`), from the tuning seeds' final validation CE:
   - each cell's own setting: the LR with the lowest mean final CE (ties: the lower LR). A choice at
     an end of the grid is flagged (`Selection.at_edge`), never followed by widening the grid;
   - the shared setting (the paper's protocol: one LR for all four cells, where the placements tie
     under joint training): the LR whose Δ_joint interval lies nearest to parity, the smallest
     `parity_bound` (ties: the lower LR) — the quantity the one parity rule
     (normgrow.paper.claims.parity) compares with the margin. Whether parity holds there is judged
     on the fresh seeds.
3. Confirmation. Every cell trains at its own LR and at the shared LR on the fresh seeds (never used by
   any selection), under every teacher (`Selection.plan`). Δ_joint = CE(post-joint) − CE(pre-joint),
   Δ_grow = CE(post-grow) − CE(pre-grow) and the interaction Δ_grow − Δ_joint are formed per seed (the
   four cells of a seed share its initialisation and document order: paired), summarised per teacher
   by a 95% Student-t interval over the seeds.
4. Pooling over teachers (`pooled`): a DerSimonian–Laird random-effects estimate. Each teacher's mean
   is weighted by 1 / (its squared standard error + τ²), τ² the between-teacher variance beyond what
   the seeds explain (method of moments, at least 0); the interval is ±1.96 standard errors. It widens
   when the teachers disagree; with two teachers τ² rests on one degree of freedom, so the pooled
   interval understates the teacher variation a third teacher could show.
5. Verdicts by size: Δ_joint by the parity rule; Δ_grow and the interaction "agree" only when the
   interval excludes 0 in the paper's direction (normgrow.paper.claims.direction_verdict), each with
   whether the paper's value lies inside the interval.
6. Seeds needed (`seeds_needed`): from the confirmatory spread s of the per-seed interaction, the
   smallest n with t_{0.975, n−1} · s / √n below |the paper's interaction|: the number of paired seeds
   at which an interaction of the paper's size would be expected to have an interval clear of 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from normgrow.paper.claims import covers, direction_verdict, parity, parity_bound
from normgrow.paper.document import Grid, to_markdown
from normgrow.paper.reference import paper_reference
from normgrow.paper.results import final_phases
from normgrow.paper.roles import by_role
from normgrow.paper.stats import mean_ci, t975
from normgrow.paper.study import EFFECTS, LABELS

CELLS = ("pre-joint", "post-joint", "pre-grow", "post-grow")
READINGS = ("own", "shared")  # each cell at its own LR; every cell at the shared LR


def final_ce(phases: pd.DataFrame, roles: dict, lr: float) -> pd.DataFrame:
    """One row per (lr, seed, cell present): the cell's final validation CE, from a run's phases.csv."""
    final = final_phases(by_role(phases, roles))
    final = final[final["run"].isin(CELLS)]
    return pd.DataFrame({"lr": lr, "seed": final["seed"].astype(int), "cell": final["run"], "ce": final["ce"]})


def effects(wide: pd.DataFrame) -> pd.DataFrame:
    """Per seed (the index), from the four cells' final CE (columns): Δ_joint, Δ_grow, the interaction."""
    out = pd.DataFrame(index=wide.index)
    out["delta_joint"] = wide["post-joint"] - wide["pre-joint"]
    out["delta_grow"] = wide["post-grow"] - wide["pre-grow"]
    out["interaction"] = out["delta_grow"] - out["delta_joint"]
    return out


@dataclass(frozen=True)
class Selection:
    """The tuning's outcome: the grid, each cell's own LR and the shared LR."""

    grid: tuple[float, ...]
    own: dict[str, float]
    shared: float

    def at_edge(self, cell: str) -> bool:
        return self.own[cell] in (min(self.grid), max(self.grid))

    def plan(self) -> dict[float, list[str]]:
        """What the confirmation trains, per LR: the cells whose own LR it is, and all four at the shared LR."""
        plan: dict[float, list[str]] = {}
        for cell in CELLS:
            for lr in (self.own[cell], self.shared):
                if cell not in plan.setdefault(lr, []):
                    plan[lr].append(cell)
        return {lr: [c for c in CELLS if c in cells] for lr, cells in sorted(plan.items())}

    def lrs(self, reading: str) -> dict[str, float]:
        return dict(self.own) if reading == "own" else {cell: self.shared for cell in CELLS}

    def to_json(self) -> str:
        return json.dumps({"grid": list(self.grid), "own": self.own, "shared": self.shared}, indent=1)

    @classmethod
    def read(cls, path: Path) -> Selection:
        data = json.loads(Path(path).read_text())
        return cls(tuple(data["grid"]), {c: float(data["own"][c]) for c in CELLS}, float(data["shared"]))


def tuning_summary(tuning: pd.DataFrame) -> pd.DataFrame:
    """Per LR (the index): each cell's mean final CE over the tuning seeds, Δ_joint's mean and interval,
    its parity bound."""
    rows = []
    for lr, group in tuning.groupby("lr"):
        wide = group.pivot(index="seed", columns="cell", values="ce")
        mean, low, high = mean_ci(wide["post-joint"] - wide["pre-joint"])
        rows.append({"lr": lr, "seeds": len(wide), **{c: wide[c].mean() for c in CELLS}, "delta_joint": mean,
                     "low": low, "high": high, "parity_bound": parity_bound(low, high)})
    return pd.DataFrame(rows).set_index("lr").sort_index()


def select(tuning: pd.DataFrame) -> Selection:
    """The protocol's selection (module docstring, step 2) from the tuning runs' final CE
    (columns lr, seed, cell, ce)."""
    summary = tuning_summary(tuning)  # sorted by LR: idxmin keeps the lower LR on ties
    own = {cell: float(summary[cell].idxmin()) for cell in CELLS}
    return Selection(tuple(float(lr) for lr in summary.index), own, float(summary["parity_bound"].idxmin()))


def reading(confirm: pd.DataFrame, lrs: dict[str, float]) -> pd.DataFrame:
    """The four cells' final CE per seed (index), each cell taken at its LR in `lrs`; seeds that lack a
    cell are left out (every fresh seed trains every cell, so none should be)."""
    picked = [confirm[(confirm["cell"] == cell) & (confirm["lr"] == lr)].set_index("seed")["ce"].rename(cell)
              for cell, lr in lrs.items()]
    return pd.concat(picked, axis=1).dropna()[list(CELLS)].sort_index()


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float
    seeds: int
    se: float

    @classmethod
    def of(cls, values: pd.Series) -> Estimate:
        values = pd.Series(values, dtype=float).dropna()
        mean, low, high = mean_ci(values)
        se = float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
        return cls(mean, low, high, len(values), se)

    def text(self, digits: int = 4) -> str:
        return f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"


def pooled(estimates: list[Estimate]) -> tuple[Estimate, float]:
    """The DerSimonian–Laird random-effects estimate over teachers (module docstring, step 4) and τ²."""
    y = [e.mean for e in estimates]
    w = [1 / e.se ** 2 for e in estimates]
    fixed = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sum(w)
    q = sum(wi * (yi - fixed) ** 2 for wi, yi in zip(w, y, strict=True))
    tau2 = max(0.0, (q - (len(y) - 1)) / (sum(w) - sum(wi ** 2 for wi in w) / sum(w)))
    w_star = [1 / (e.se ** 2 + tau2) for e in estimates]
    mean = sum(wi * yi for wi, yi in zip(w_star, y, strict=True)) / sum(w_star)
    se = math.sqrt(1 / sum(w_star))
    return Estimate(mean, mean - 1.959964 * se, mean + 1.959964 * se, sum(e.seeds for e in estimates), se), tau2


def conditional_pool(estimates: list[Estimate]) -> Estimate:
    """The fixed-effect (inverse-variance) mean over teachers with its 95% interval from Student's t at the pooled
    degrees of freedom Σ(n − 1): conditional on these teachers, no claim over teachers (with two, a
    between-teacher variance cannot be estimated)."""
    w = [1 / e.se ** 2 for e in estimates]
    mean = sum(wi * e.mean for wi, e in zip(w, estimates, strict=True)) / sum(w)
    se = math.sqrt(1 / sum(w))
    half = t975(sum(e.seeds - 1 for e in estimates)) * se
    return Estimate(mean, mean - half, mean + half, sum(e.seeds for e in estimates), se)


def seeds_needed(spread: float, target: float) -> int:
    """The smallest n ≥ 2 with t_{0.975, n−1} · spread / √n < |target| (module docstring, step 6)."""
    n = 2
    while t975(n - 1) * spread / math.sqrt(n) >= abs(target):
        n += 1
    return n


def verdict(effect: str, estimate: Estimate, margin: float, paper: float) -> str:
    """An effect's verdict by size (module docstring, step 5): Δ_joint by the parity rule, the others by
    direction against the paper's sign; with whether the paper's value lies inside the interval."""
    inside = "paper inside" if covers(estimate.low, estimate.high, paper) else "paper outside"
    if effect == "delta_joint":
        return f"parity {parity(estimate.low, estimate.high, estimate.seeds, margin)} (±{margin:g}); {inside}"
    return f"{direction_verdict(estimate.low, estimate.high, paper)}; {inside}"


def confirmatory(confirm: pd.DataFrame, selection: Selection, teachers: list[str]) -> pd.DataFrame:
    """Per (reading, teacher, effect): the estimate over the fresh seeds; teacher "pooled" over teachers.
    `confirm` has the columns teacher, lr, seed, cell, ce."""
    rows = []
    for name in READINGS:
        per_teacher = {}
        for teacher in teachers:
            table = effects(reading(confirm[confirm["teacher"] == teacher], selection.lrs(name)))
            per_teacher[teacher] = {e: Estimate.of(table[e]) for e in EFFECTS}
            rows += [{"reading": name, "teacher": teacher, "effect": e, "estimate": per_teacher[teacher][e],
                      "tau2": float("nan"), "spread": float(table[e].std(ddof=1))} for e in EFFECTS]
        for e in EFFECTS:
            estimate, tau2 = pooled([per_teacher[t][e] for t in teachers])
            rows.append({"reading": name, "teacher": "pooled", "effect": e, "estimate": estimate, "tau2": tau2,
                         "spread": float("nan")})
    return pd.DataFrame(rows)


def paper_effects() -> dict[str, float]:
    """The paper's Table 1 effects (reference file), for display and the verdicts' direction."""
    table1 = paper_reference()["table1"]
    return {e: float(table1[e]) for e in EFFECTS}


def tuning_markdown(tuning: pd.DataFrame, selection: Selection) -> str:
    """The tuning grid (per LR: each cell's mean final CE, Δ_joint with its interval and parity bound)
    and the selection it gives."""
    summary = tuning_summary(tuning)
    grid = Grid(["peak LR", "seeds", *CELLS, "Δ_joint [95% interval]", "parity bound"],
                [[f"{lr:g}", str(int(r["seeds"])), *(f"{r[c]:.4f}" for c in CELLS),
                  f"{r['delta_joint']:+.4f} [{r['low']:+.4f}, {r['high']:+.4f}]", f"{r['parity_bound']:.4f}"]
                 for lr, r in summary.iterrows()])
    lines = ["", "Selection (normgrow.paper.comparison.select, fixed before these runs):", ""]
    lines += [f"- {cell}: LR {selection.own[cell]:g}" + (" (an end of the grid: its optimum is not bracketed)"
                                                         if selection.at_edge(cell) else "") for cell in CELLS]
    lines.append(f"- shared (the paper's protocol, nearest to parity): LR {selection.shared:g}")
    return to_markdown([grid]) + "\n".join(lines) + "\n"


def seeds_for_interaction(table: pd.DataFrame, reading_name: str) -> tuple[float, int]:
    """The within-teacher spread of the per-seed interaction (root mean square over teachers) and the
    paired seeds an interaction of the paper's size needs at that spread (`seeds_needed`)."""
    rows = table[(table["reading"] == reading_name) & (table["effect"] == "interaction")
                 & (table["teacher"] != "pooled")]
    spread = math.sqrt(float((rows["spread"] ** 2).mean()))
    return spread, seeds_needed(spread, paper_effects()["interaction"])


def comparison_markdown(table: pd.DataFrame, selection: Selection, margin: float) -> str:
    """Per reading: every effect per teacher and pooled, its verdict by size beside the paper's value, and
    the seeds the interaction needs."""
    paper = paper_effects()
    out = []
    for name in READINGS:
        rows = table[table["reading"] == name]
        teachers = [t for t in dict.fromkeys(rows["teacher"]) if t != "pooled"]
        settings = ", ".join(f"{c} {lr:g}" for c, lr in selection.lrs(name).items())
        title = ("Each cell at its own LR" if name == "own" else "Every cell at the shared LR (the paper's protocol)")
        body = []
        for effect in EFFECTS:
            by = {r["teacher"]: r for _, r in rows[rows["effect"] == effect].iterrows()}
            pool = by["pooled"]
            body.append([LABELS[effect], f"{paper[effect]:+.4f}",
                         *(by[t]["estimate"].text() for t in teachers), pool["estimate"].text(),
                         f"{pool['tau2']:.2g}", verdict(effect, pool["estimate"], margin, paper[effect])])
        seeds = sorted({r["estimate"].seeds for _, r in rows[rows["teacher"] != "pooled"].iterrows()})
        spread, needed = seeds_for_interaction(table, name)
        grid = Grid(["effect", "paper", *(f"teacher {t}" for t in teachers), "pooled (random effects)", "τ²",
                     "verdict (pooled)"], body)
        out += [f"**{title}.**", "", f"LRs: {settings}; fresh seeds per teacher: {'/'.join(map(str, seeds))}.", "",
                to_markdown([grid]).strip(), "",
                f"Interaction spread over seeds (within teacher): {spread:.4f}; paired seeds for an interaction of "
                f"the paper's size ({paper['interaction']:+.4f}) to be expected clear of 0 under one teacher: "
                f"{needed}.", ""]
    return "\n".join(out)


def summary_markdown(table: pd.DataFrame, selection: Selection, margin: float) -> str:
    """The answer in a few lines (the README's first screen): per reading, the pooled effects with their
    verdicts by size, and the seeds the interaction needs."""
    paper = paper_effects()
    lines = []
    for name in READINGS:
        rows = table[(table["reading"] == name) & (table["teacher"] == "pooled")].set_index("effect")["estimate"]
        teachers = table[(table["reading"] == name) & (table["teacher"] != "pooled")]["teacher"].nunique()
        seeds = rows["interaction"].seeds // teachers
        settings = ", ".join(f"{c} {lr:g}" for c, lr in selection.lrs(name).items()) if name == "own" else \
            f"LR {selection.shared:g} for all four"
        head = "Each cell at its own LR" if name == "own" else "The paper's protocol, one shared LR"
        effects_text = "; ".join(f"{LABELS[e].split(' (')[0]} {rows[e].text()} "
                                 f"({verdict(e, rows[e], margin, paper[e])})" for e in EFFECTS)
        spread, needed = seeds_for_interaction(table, name)
        lines.append(f"- **{head}** ({settings}; {seeds} fresh seeds × {teachers} teachers, pooled): {effects_text}. "
                     f"At the seeds' spread ({spread:.3f}) an interaction of the paper's size needs {needed} paired "
                     "seeds under one teacher to be expected clear of 0.")
    return "\n".join(lines)


def teacher_leads(confirm: pd.DataFrame, teachers: pd.DataFrame) -> dict[str, float]:
    """Per teacher: the smallest final CE of any confirmatory run minus the teacher's validation CE (the
    regime's teacher-lead condition over the 2 × 2). `teachers` has the columns teacher, validation_ce."""
    ce = teachers.set_index("teacher")["validation_ce"]
    return {t: float(group["ce"].min() - ce[t]) for t, group in confirm.groupby("teacher")}
