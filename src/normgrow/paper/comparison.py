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
     `parity_bound` — the quantity the one parity rule (normgrow.paper.claims.parity) compares with the
     margin — by the calibration's rule (normgrow.paper.claims.nearest_parity; ties: the lower mean CE of
     pre- and post-norm joint, then the lower LR; the protocol broke ties by the lower LR alone, and the kept
     tuning has none). Whether parity holds there is judged on the fresh seeds.
3. Confirmation. Every cell trains at its own LR and at the shared LR on the fresh seeds (never used by
   any selection), under every teacher (`Selection.plan`). Δ_joint, Δ_grow and the interaction
   Δ_grow − Δ_joint (normgrow.paper.stats.effects) are formed per seed (the four cells of a seed share its
   initialisation and document order: paired), summarised per teacher by a 95% Student-t interval over the
   seeds.
4. Per teacher first: each teacher's estimates and verdicts are the primary result. Pooled over the two
   teachers (`conditional_pool`): the fixed-effect (inverse-variance) mean with a Student-t interval at the
   pooled degrees of freedom Σ(n − 1) — conditional on these two teachers, never a claim over teachers: two
   teachers cannot estimate a between-teacher variance (a claim over teachers needs enough teachers for it).
5. Verdicts by size: Δ_joint by the parity rule; Δ_grow and the interaction "agree" only when the
   interval excludes 0 in the paper's direction (normgrow.paper.claims.direction_verdict), each with
   whether the paper's value lies inside the interval.
6. Power (normgrow.paper.stats): from the confirmatory spread of the per-seed interaction, the probability
   that the design's paired seeds under one teacher find an interaction of the paper's size clear of 0
   (noncentral t), and the seeds 80% needs; for Δ_joint, the probability that a true tie is shown as
   parity at the margin, under one teacher and pooled.

Steps 4 and 6 were revised after the confirmation had been read (issue 60): the protocol pooled by a
DerSimonian–Laird random-effects estimate with a normal critical value (with two teachers its τ² rests on one
degree of freedom and was 0 in four of six cases: a fixed-effect interval under another name) and reported the
seeds at which the interval's half-width equals the paper's interaction (about 57% power, not a sample size).
No selection, seed, teacher or margin changed.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from normgrow.design.config import merge
from normgrow.paper.claims import covers, direction_verdict, nearest_parity, parity, parity_bound
from normgrow.paper.document import Grid, to_markdown
from normgrow.paper.reference import paper_reference
from normgrow.paper.results import final_phases
from normgrow.paper.roles import by_role
from normgrow.paper.stats import (
    EFFECTS,
    LABELS,
    delta,
    effects,
    mean_ci,
    parity_power,
    power_mean,
    seeds_for_power,
    t975,
)

CELLS = ("pre-joint", "post-joint", "pre-grow", "post-grow")
READINGS = ("own", "shared")  # each cell at its own LR; every cell at the shared LR


def final_ce(phases: pd.DataFrame, roles: dict, lr: float) -> pd.DataFrame:
    """One row per (lr, seed, cell present): the cell's final validation CE, from a run's phases.csv."""
    final = final_phases(by_role(phases, roles))
    final = final[final["run"].isin(CELLS)]
    return pd.DataFrame({"lr": lr, "seed": final["seed"].astype(int), "cell": final["run"], "ce": final["ce"]})


def by_lr(readings: list[dict[str, float]], cells: tuple[str, ...]) -> dict[float, list[str]]:
    """What a set of runs trains, per LR (ascending): every cell at every LR one of `readings` (cell → LR) puts
    it at, in the order of `cells`."""
    return {lr: [c for c in cells if any(r.get(c) == lr for r in readings)]
            for lr in sorted({lr for r in readings for lr in r.values()})}


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
        return by_lr([self.lrs(name) for name in READINGS], CELLS)

    def lrs(self, reading: str) -> dict[str, float]:
        return dict(self.own) if reading == "own" else {cell: self.shared for cell in CELLS}

    def to_json(self) -> str:
        return json.dumps({"grid": list(self.grid), "own": self.own, "shared": self.shared}, indent=1)

    @classmethod
    def read(cls, path: Path) -> Selection:
        data = json.loads(Path(path).read_text())
        return cls(tuple(data["grid"]), {c: float(data["own"][c]) for c in CELLS}, float(data["shared"]))

    @classmethod
    def made_by(cls, checkpoint) -> Selection:
        """The selection a Snakemake checkpoint wrote (workflow/comparison.smk's `select`, output `selection`):
        read in an input function, it makes the rules that follow from it wait for it."""
        return cls.read(checkpoint.get().output.selection)


@dataclass(frozen=True)
class Plan:
    """Where workflow/comparison.smk runs each set of runs, a nested workflow, and the overrides of the embedded
    default it runs with, from configs/comparison.yaml's `comparison` (`config`): the tuning in
    results/{name}/tuning/lr{LR}/, a confirmation's and a control's in results/{name}/{confirm,control}/{teacher}/
    lr{LR}/, each teacher's pretraining in results/{name}/teachers/{teacher}/."""

    config: dict

    @property
    def out(self) -> str:
        return f"results/{self.config['name']}"

    @property
    def teachers(self) -> list[str]:
        return list(self.config["teachers"])

    @property
    def lrs(self) -> dict[str, float]:
        """The LR grid by its name in the paths (`f"{lr:g}"`)."""
        return {f"{lr:g}": float(lr) for lr in self.config["lrs"]}

    def teacher_model(self, teacher: str) -> str:
        return f"{self.out}/teachers/{teacher}.model"

    def teacher_overrides(self, teacher: str) -> dict:
        """A teacher's pretraining: the common overrides, its pretraining seed."""
        return merge(copy.deepcopy(self.config.get("common", {})),
                     {"teacher": {"pretrain": {"seed": self.config["teachers"][teacher]}}})

    def run_teacher(self, where: str) -> str:
        """The teacher the set of runs in `where` (tuning/lr…, confirm/{teacher}/lr…, control/{teacher}/lr…)
        distils from: the first for the tuning, the named one otherwise."""
        parts = where.split("/")
        return self.teacher_model(self.teachers[0] if parts[0] == "tuning" else parts[1])

    def run_overrides(self, teacher: str, lr: str, seeds: list[int], cells: list[str]) -> dict:
        """A set of runs: the embedded default with the common overrides, `teacher` (and its tokenizer), the
        LR (by name), the seeds and the cells; no diagnostics."""
        return merge(copy.deepcopy(self.config.get("common", {})),
                     {"teacher": {"name": os.path.abspath(self.teacher_model(teacher))}, "tokenizer": {"train": False},
                      "train": {"lr": self.lrs[lr], "warmup_fraction": self.config["warmup_fraction"]},
                      "seeds": list(seeds), "build": list(cells), "diagnostics": {"runs": []}})

    def control_overrides(self, teacher: str, lr: str, seeds: list[int], cells: list[str]) -> dict:
        """A set of the control's runs (normgrow.paper.control): `run_overrides` with the control's curricula and
        its runs among `cells` added."""
        control = self.config["control"]
        runs = {cell: control["runs"][cell] for cell in cells if cell in control["runs"]}
        return merge(self.run_overrides(teacher, lr, seeds, cells), {"curricula": control["curricula"], "runs": runs})

    def runs(self, kind: str, plan: dict[float, list[str]], suffix: str = ".phases.csv") -> list[str]:
        """The outputs (`suffix`) of the sets of runs of `kind` (confirm, control) that `plan` trains per LR, under
        every teacher."""
        return [f"{self.out}/{kind}/{teacher}/lr{lr:g}{suffix}" for teacher in self.teachers for lr in plan]


def tuning_summary(tuning: pd.DataFrame) -> pd.DataFrame:
    """Per LR (the index): each cell's mean final CE over the tuning seeds, Δ_joint's mean and interval,
    its parity bound."""
    rows = []
    for lr, group in tuning.groupby("lr"):
        wide = group.pivot(index="seed", columns="cell", values="ce")
        mean, low, high = mean_ci(delta(wide, "joint"))
        rows.append({"lr": lr, "seeds": len(wide), **{c: wide[c].mean() for c in CELLS}, "delta_joint": mean,
                     "low": low, "high": high, "parity_bound": parity_bound(low, high)})
    return pd.DataFrame(rows).set_index("lr").sort_index()


def select(tuning: pd.DataFrame) -> Selection:
    """The protocol's selection (module docstring, step 2) from the tuning runs' final CE
    (columns lr, seed, cell, ce)."""
    summary = tuning_summary(tuning)  # sorted by LR: idxmin keeps the lower LR on ties
    own = {cell: float(summary[cell].idxmin()) for cell in CELLS}
    return Selection(tuple(float(lr) for lr in summary.index), own, float(nearest_parity(summary)))


def reading(confirm: pd.DataFrame, lrs: dict[str, float], cells: tuple[str, ...] = CELLS) -> pd.DataFrame:
    """The cells' final CE per seed (index), each cell taken at its LR in `lrs`; seeds that lack a cell are
    left out (every fresh seed trains every cell, so none should be)."""
    picked = [confirm[(confirm["cell"] == cell) & (confirm["lr"] == lr)].set_index("seed")["ce"].rename(cell)
              for cell, lr in lrs.items()]
    return pd.concat(picked, axis=1).dropna()[list(cells)].sort_index()


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


def conditional_pool(estimates: list[Estimate]) -> Estimate:
    """The fixed-effect (inverse-variance) mean over teachers with its 95% interval from Student's t at the pooled
    degrees of freedom Σ(n − 1): conditional on these teachers, no claim over teachers (with two, a
    between-teacher variance cannot be estimated)."""
    w = [1 / e.se ** 2 for e in estimates]
    mean = sum(wi * e.mean for wi, e in zip(w, estimates, strict=True)) / sum(w)
    se = math.sqrt(1 / sum(w))
    half = t975(sum(e.seeds - 1 for e in estimates)) * se
    return Estimate(mean, mean - half, mean + half, sum(e.seeds for e in estimates), se)


def verdict(effect: str, estimate: Estimate, margin: float, paper: float) -> str:
    """An effect's verdict by size (module docstring, step 5): Δ_joint by the parity rule, the others by
    direction against the paper's sign; with whether the paper's value lies inside the interval."""
    inside = "paper inside" if covers(estimate.low, estimate.high, paper) else "paper outside"
    if effect == "delta_joint":
        return f"parity {parity(estimate.low, estimate.high, estimate.seeds, margin)} (±{margin:g}); {inside}"
    return f"{direction_verdict(estimate.low, estimate.high, paper)}; {inside}"


def confirmatory(confirm: pd.DataFrame, selection: Selection, teachers: list[str]) -> pd.DataFrame:
    """Per (reading, teacher, effect): the estimate over the fresh seeds; teacher "pooled" conditional on them.
    `confirm` has the columns teacher, lr, seed, cell, ce."""
    return estimates(confirm, {name: selection.lrs(name) for name in READINGS}, teachers, effects, EFFECTS, CELLS)


def estimates(per_seed: pd.DataFrame, readings: dict[str, dict[str, float]], teachers: list[str],
              effects_of: Callable[[pd.DataFrame], Mapping[str, pd.Series]], names: tuple[str, ...],
              cells: tuple[str, ...]) -> pd.DataFrame:
    """Per (reading, teacher, effect): `effects_of` the cells' final CE per seed (`reading`, each cell at its LR
    in `readings[reading]`), the effects `names` estimated over the seeds (`Estimate`, its spread kept), then
    pooled over the teachers (teacher "pooled": `conditional_pool`). `per_seed` has the columns teacher, lr,
    seed, cell, ce."""
    rows = []
    for name, lrs in readings.items():
        per_teacher = {}
        for teacher in teachers:
            table = effects_of(reading(per_seed[per_seed["teacher"] == teacher], lrs, cells))
            per_teacher[teacher] = {e: Estimate.of(table[e]) for e in names}
            rows += [{"reading": name, "teacher": teacher, "effect": e, "estimate": per_teacher[teacher][e],
                      "spread": float(table[e].std(ddof=1))} for e in names]
        rows += [{"reading": name, "teacher": "pooled", "effect": e, "spread": float("nan"),
                  "estimate": conditional_pool([per_teacher[t][e] for t in teachers])} for e in names]
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


@dataclass(frozen=True)
class Power:
    """What a reading's design can show (module docstring, step 6): the within-teacher spreads (root mean square
    over teachers) of the per-seed interaction and Δ_joint, the seeds per teacher, the power for an interaction of
    the paper's size and the seeds 80% needs, and the probability that a true tie shows parity."""

    interaction_spread: float
    joint_spread: float
    seeds: int
    teachers: int
    interaction_power: float
    seeds_for_80: int
    parity_one: float
    parity_pooled: float

    @classmethod
    def of(cls, table: pd.DataFrame, reading_name: str, margin: float) -> Power:
        rows = table[(table["reading"] == reading_name) & (table["teacher"] != "pooled")]

        def spread(effect: str) -> float:
            return math.sqrt(float((rows[rows["effect"] == effect]["spread"] ** 2).mean()))

        seeds = min(e.seeds for e in rows["estimate"])
        teachers = rows["teacher"].nunique()
        paper, joint = paper_effects()["interaction"], spread("delta_joint")
        return cls(spread("interaction"), joint, seeds, teachers, power_mean(paper, spread("interaction"), seeds),
                   seeds_for_power(paper, spread("interaction")), parity_power(margin, joint, seeds),
                   parity_power(margin, joint, seeds * teachers, teachers * (seeds - 1)))

    def text(self, margin: float) -> str:
        paper = paper_effects()["interaction"]
        return (f"At the seeds' spread of the interaction ({self.interaction_spread:.3f}), {self.seeds} paired seeds "
                f"under one teacher find an interaction of the paper's size ({paper:+.4f}) clear of 0 with "
                f"probability {self.interaction_power:.2f} (80% needs {self.seeds_for_80}); at Δ_joint's spread "
                f"({self.joint_spread:.3f}) a true tie shows parity (±{margin:g}) with probability "
                f"{self.parity_one:.2f} under one teacher, {self.parity_pooled:.2f} pooled over {self.teachers}.")


def comparison_markdown(table: pd.DataFrame, selection: Selection, margin: float) -> str:
    """Per reading: every effect per teacher and pooled (conditional on the teachers), its verdict by size beside
    the paper's value per teacher and pooled, and what the design has the power to show."""
    paper = paper_effects()
    out = []
    for name in READINGS:
        rows = table[table["reading"] == name]
        teachers = [t for t in dict.fromkeys(rows["teacher"]) if t != "pooled"]
        settings = ", ".join(f"{c} {lr:g}" for c, lr in selection.lrs(name).items())
        title = ("Each cell at its own LR" if name == "own" else "Every cell at the shared LR (the paper's protocol)")
        body = []
        for effect in EFFECTS:
            by = {r["teacher"]: r["estimate"] for _, r in rows[rows["effect"] == effect].iterrows()}
            body.append([LABELS[effect], f"{paper[effect]:+.4f}", *(by[t].text() for t in [*teachers, "pooled"]),
                         *(verdict(effect, by[t], margin, paper[effect]) for t in [*teachers, "pooled"])])
        power = Power.of(table, name, margin)
        grid = Grid(["effect", "paper", *(f"teacher {t}" for t in teachers), "pooled (conditional on these teachers)",
                     *(f"verdict, teacher {t}" for t in teachers), "verdict, pooled"], body)
        out += [f"**{title}.**", "", f"LRs: {settings}; fresh seeds per teacher: {power.seeds}.", "",
                to_markdown([grid]).strip(), "", power.text(margin), ""]
    return "\n".join(out)


def summary_markdown(table: pd.DataFrame, selection: Selection, margin: float) -> str:
    """The answer in a few lines (docs/miniature.md, "In short"): per reading, each effect's verdict under each
    teacher, the estimate pooled conditional on the teachers, and what the design has the power to show."""
    paper = paper_effects()
    lines = []
    for name in READINGS:
        rows = table[table["reading"] == name]
        teachers = [t for t in dict.fromkeys(rows["teacher"]) if t != "pooled"]
        power = Power.of(table, name, margin)
        settings = ", ".join(f"{c} {lr:g}" for c, lr in selection.lrs(name).items()) if name == "own" else \
            f"LR {selection.shared:g} for all four"
        head = "Each cell at its own LR" if name == "own" else "The paper's protocol, one shared LR"
        parts = []
        for e in EFFECTS:
            by = {r["teacher"]: r["estimate"] for _, r in rows[rows["effect"] == e].iterrows()}
            per = ", ".join(f"{t} {verdict(e, by[t], margin, paper[e]).split(';')[0]}" for t in teachers)
            parts.append(f"{LABELS[e].split(' (')[0]} {by['pooled'].text()} pooled ({per})")
        lines.append(f"- **{head}** ({settings}; {power.seeds} fresh seeds × {len(teachers)} teachers; pooled "
                     f"conditional on these teachers, verdicts per teacher): {'; '.join(parts)}. {power.text(margin)}")
    return "\n".join(lines)
def teacher_leads(confirm: pd.DataFrame, teachers: pd.DataFrame) -> dict[str, float]:
    """Per teacher: the smallest final CE of any confirmatory run minus the teacher's validation CE (the
    regime's teacher-lead condition over the 2 × 2). `teachers` has the columns teacher, validation_ce."""
    ce = teachers.set_index("teacher")["validation_ce"]
    return {t: float(group["ce"].min() - ce[t]) for t, group in confirm.groupby("teacher")}
