"""The update-matched control of the pre-registered comparison: is the interaction growth, or only more
updates? (configs/comparison.yaml `comparison.control`, workflow/comparison.smk rule `control`;
docs/miniature.md names the commit that fixed this protocol, which precedes every run of it.)

A grow run trains three phases of updates, a joint run one; if post-norm's deficit shrinks with training
alone, the comparison's interaction Δ_grow − Δ_joint mixes growth with update count. The control separates them.

1. Cells. The comparison's four (pre-joint, post-joint, pre-grow, post-grow) and, for both placements,
   - joint-matched: three phases of all K blocks, each on the document stream grow's phases read
     (`continue`), each restarting the LR schedule: grow's update count, data stream and LR restarts, every
     block active and trained from the first update — a grow run without the growth;
   - joint-longer: the paper's budget control (three phases of all K blocks, the second and third on fresh
     documents).
2. Seeds, teachers, code. The comparison's fresh seeds, under its teachers A and B as today's workflow
   pretrains them; the four 2 × 2 cells are trained again beside the controls, from the same code and teachers,
   so that every effect below is paired by seed within one code version.
3. Learning rates: no new selection; the comparison's kept selection (its `selection.json`).
   - shared (primary): all eight cells at the shared LR;
   - own (secondary): each 2 × 2 cell at its own LR, each control cell at its placement's grow cell's own LR
     (a matched control differs from its grow run only in the blocks active).
4. Effects per seed (paired): Δ_joint, Δ_grow and the interaction as the comparison forms them;
   Δ_matched = CE(post-joint-matched) − CE(pre-joint-matched); the matched interaction
   I_matched = Δ_grow − Δ_matched; the update-count part U = Δ_matched − Δ_joint, so that
   interaction = I_matched + U exactly; the longer interaction Δ_grow − Δ_longer (Δ_longer from joint-longer);
   and the paper's guard CE(post-joint-longer) − CE(post-grow) (positive in the paper).
5. Statistics. Per teacher (primary): the mean over the seeds with its 95% Student-t interval. Pooled over
   the two teachers (`conditional_pool`): the fixed-effect (inverse-variance) mean, its interval from
   t with the pooled degrees of freedom Σ(n − 1) — an estimate conditional on these two teachers, never a
   claim over teachers (two teachers cannot estimate a between-teacher variance).
6. The reading (`reading_verdict`), from the 95% intervals of I_matched and U, per teacher and pooled,
   "negative" meaning the interval lies below 0 (the paper's side, post-norm's gap narrowed):
   - I_matched negative and U not: "growth per se";
   - both negative: "growth and update count";
   - U negative and I_matched not: "update count" (the interaction at matched updates is not
     distinguishable from 0; growth's part is not shown, not shown absent);
   - I_matched above 0: "growth opposes" (growth widens post-norm's gap at matched updates);
   - otherwise: "not decidable at this power".
7. Power (normgrow.paper.stats.power_mean, seeds_for_power): from the control's spread of I_matched, the power
   of eight paired seeds per teacher to find an interaction of the paper's size, and the seeds 80% needs.
"""

from __future__ import annotations

import pandas as pd

from normgrow.paper.comparison import CELLS as COMPARISON_CELLS
from normgrow.paper.comparison import Estimate, Selection, by_lr, paper_effects
from normgrow.paper.comparison import estimates as comparison_estimates
from normgrow.paper.document import Grid, to_markdown
from normgrow.paper.results import final_phases
from normgrow.paper.stats import EFFECTS as EFFECTS_2x2
from normgrow.paper.stats import LABELS as LABELS_2x2
from normgrow.paper.stats import delta, power_mean, seeds_for_power
from normgrow.paper.stats import effects as effects_2x2

CONTROLS = ("pre-joint-matched", "post-joint-matched", "pre-joint-longer", "post-joint-longer")
CELLS = (*COMPARISON_CELLS, *CONTROLS)
EFFECTS = (*EFFECTS_2x2, "delta_matched", "matched_interaction", "update_part", "delta_longer", "longer_interaction",
           "guard")
LABELS = {**LABELS_2x2, "delta_matched": "Δ_matched (post − pre, joint-matched)",
          "matched_interaction": "matched interaction Δ_grow − Δ_matched",
          "update_part": "update-count part Δ_matched − Δ_joint",
          "delta_longer": "Δ_longer (post − pre, joint-longer)", "longer_interaction": "Δ_grow − Δ_longer",
          "guard": "post-joint-longer − post-grow (paper: > 0)"}
READINGS = ("shared", "own")
VERDICTS = ("growth per se", "growth and update count", "update count", "growth opposes",
            "not decidable at this power")


def lrs(selection: Selection, reading: str) -> dict[str, float]:
    """Each of the eight cells' LR in a reading (module docstring, step 3)."""
    if reading == "shared":
        return {cell: selection.shared for cell in CELLS}
    own = dict(selection.own)
    for cell in CONTROLS:
        own[cell] = selection.own[f"{cell.split('-')[0]}-grow"]
    return own


def plan(selection: Selection) -> dict[float, list[str]]:
    """What the control trains, per LR: every cell at every LR a reading puts it at."""
    return by_lr([lrs(selection, name) for name in READINGS], CELLS)


def final_ce(phases: pd.DataFrame, lr: float) -> pd.DataFrame:
    """One row per (lr, seed, cell present): the cell's final validation CE and the code digest that trained its
    last phase, from a set of runs' phases.csv (runs named as the cells)."""
    final = final_phases(phases[phases["run"].isin(CELLS)])
    return pd.DataFrame({"lr": lr, "seed": final["seed"].astype(int), "cell": final["run"], "ce": final["ce"],
                         "code_digest": final["code_digest"]})


def effects(wide: pd.DataFrame) -> pd.DataFrame:
    """Per seed (the index), from the eight cells' final CE (columns): the effects of step 4, the 2 × 2's as
    the comparison forms them (normgrow.paper.stats.effects)."""
    out = pd.DataFrame(effects_2x2(wide), index=wide.index)
    out["delta_matched"] = delta(wide, "joint-matched")
    out["matched_interaction"] = out["delta_grow"] - out["delta_matched"]
    out["update_part"] = out["delta_matched"] - out["delta_joint"]
    out["delta_longer"] = delta(wide, "joint-longer")
    out["longer_interaction"] = out["delta_grow"] - out["delta_longer"]
    out["guard"] = wide["post-joint-longer"] - wide["post-grow"]
    return out


def negative(estimate: Estimate) -> bool:
    return estimate.high < 0


def reading_verdict(matched: Estimate, update: Estimate) -> str:
    """Growth or update count, from the intervals of I_matched and U (module docstring, step 6)."""
    if negative(matched):
        return VERDICTS[1] if negative(update) else VERDICTS[0]
    if negative(update):
        return VERDICTS[2]
    if matched.low > 0:
        return VERDICTS[3]
    return VERDICTS[4]


def estimates(per_seed: pd.DataFrame, selection: Selection, teachers: list[str]) -> pd.DataFrame:
    """Per (reading, teacher, effect): the estimate over the seeds (step 5); teacher "pooled" is conditional on
    these teachers. `per_seed` has the columns teacher, lr, seed, cell, ce."""
    readings = {name: lrs(selection, name) for name in READINGS}
    return comparison_estimates(per_seed, readings, teachers, effects, EFFECTS, CELLS)


def verdicts(table: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(reading, teacher or "pooled") → the reading of step 6."""
    out = {}
    for (name, teacher), rows in table.groupby(["reading", "teacher"], sort=False):
        by = rows.set_index("effect")["estimate"]
        out[(name, teacher)] = reading_verdict(by["matched_interaction"], by["update_part"])
    return out


def power_lines(table: pd.DataFrame, paper_interaction: float, seeds: int) -> dict[str, tuple[float, float, int]]:
    """Per reading: the within-teacher spread of I_matched (root mean square over teachers), the power of `seeds`
    paired seeds per teacher to find an interaction of the paper's size clear of 0, and the seeds 80% needs."""
    out = {}
    for name in READINGS:
        rows = table[(table["reading"] == name) & (table["effect"] == "matched_interaction")
                     & (table["teacher"] != "pooled")]
        spread = float((rows["spread"] ** 2).mean()) ** 0.5
        out[name] = (spread, power_mean(paper_interaction, spread, seeds), seeds_for_power(paper_interaction, spread))
    return out


def markdown(table: pd.DataFrame, selection: Selection) -> str:
    """Per reading: every effect per teacher and pooled (conditional on the teachers), each reading's verdict, and
    the power of the design for an interaction of the paper's size."""
    paper = paper_effects()["interaction"]
    read = verdicts(table)
    out = []
    for name in READINGS:
        rows = table[table["reading"] == name]
        teachers = [t for t in dict.fromkeys(rows["teacher"]) if t != "pooled"]
        seeds = min(r.seeds for r in rows[rows["teacher"] != "pooled"]["estimate"])
        settings = ", ".join(f"{c} {lr:g}" for c, lr in lrs(selection, name).items())
        body = []
        for effect in EFFECTS:
            by = {r["teacher"]: r["estimate"] for _, r in rows[rows["effect"] == effect].iterrows()}
            body.append([LABELS[effect], *(by[t].text() for t in teachers), by["pooled"].text()])
        grid = Grid(["effect", *(f"teacher {t}" for t in teachers), "pooled (conditional on these teachers)"], body)
        spread, power, needed = power_lines(table, paper, seeds)[name]
        verdict_text = "; ".join(f"teacher {t}: {read[(name, t)]}" for t in teachers)
        out += [f"**{'All eight cells at the shared LR' if name == 'shared' else 'Each cell at its own LR'}.**", "",
                f"LRs: {settings}; seeds per teacher: {seeds}.", "", to_markdown([grid]).strip(), "",
                f"Growth or update count (normgrow.paper.control, step 6): {verdict_text}; pooled, conditional on "
                f"these teachers: {read[(name, 'pooled')]}.", "",
                f"Power: at the matched interaction's spread over seeds ({spread:.4f}), {seeds} paired seeds under one "
                f"teacher find an interaction of the paper's size ({paper:+.4f}) clear of 0 with probability "
                f"{power:.2f}; 80% needs {needed}.", ""]
    return "\n".join(out)


def summary(table: pd.DataFrame) -> str:
    """The answer in a few lines (docs/miniature.md, "In short"): per reading and teacher, the interaction, the
    matched interaction and the update-count part with their intervals and the reading's verdict; pooled
    conditional on the teachers."""
    read = verdicts(table)
    lines = []
    for name in READINGS:
        rows = table[table["reading"] == name]
        parts = []
        for teacher in dict.fromkeys(rows["teacher"]):
            by = rows[rows["teacher"] == teacher].set_index("effect")["estimate"]
            who = "pooled, conditional on these teachers" if teacher == "pooled" else f"teacher {teacher}"
            parts.append(f"{who}: interaction {by['interaction'].text()} = matched {by['matched_interaction'].text()}"
                         f" + update count {by['update_part'].text()} — {read[(name, teacher)]}")
        head = "All eight cells at the shared LR" if name == "shared" else "Each cell at its own LR"
        lines.append(f"- **{head}**: " + "; ".join(parts) + ".")
    return "\n".join(lines)
