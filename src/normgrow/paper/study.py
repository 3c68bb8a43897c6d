"""A study of the 2 × 2 (pre/post × joint/grow) along one axis: the placement effects per scale.

For every scale and seed, the 2 × 2's effects from the final validation CE of its four runs, paired by
seed as in Table 1 (normgrow.paper.stats.effects: Δ_joint, Δ_grow and the interaction Δ_grow − Δ_joint).
Each effect is summarised per scale by its mean over seeds with a 95% Student-t interval
(normgrow.paper.stats.mean_ci), judged by the report's verdict rules (normgrow.paper.claims: Δ_joint ≈ 0 by
the one parity rule, Δ_grow < 0 and interaction < 0 by sign), and drawn against the study's axis (`AXES`):

- student parameters: the student's parameters, embedding and head included (normgrow.cluster.plan);
- tokens per parameter: the unique tokens a grow run reads ÷ the student's parameters, the mean
  over the scale's grow runs and seeds (the regime property of normgrow.paper.regime).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from normgrow.paper.claims import parity_verdict, sign_verdict
from normgrow.paper.document import Grid, to_markdown
from normgrow.paper.reference import paper_reference
from normgrow.paper.regime import MIN_TEACHER_LEAD
from normgrow.paper.results import final_ce_by_seed
from normgrow.paper.roles import Role, by_role, has_role
from normgrow.paper.stats import EFFECTS, LABELS, effects, mean_ci

CLAIMED = {"delta_joint": "≈ 0", "delta_grow": "< 0", "interaction": "< 0"}  # the paper's side
# axis → (label, factor to the plotted unit)
AXES = {"student_parameters": ("student parameters (millions)", 1e-6),
        "tokens_per_parameter": ("unique tokens per student parameter (grow)", 1.0)}


def tokens_per_parameter(phases: pd.DataFrame, roles: dict[str, Role], parameters: int) -> float:
    """Unique tokens a grow run reads ÷ the student's parameters, the mean over grow runs and seeds."""
    frame = by_role(phases, roles)
    grow = frame[[has_role(run, "grow") for run in frame["run"]]]
    return float(grow.groupby(["run", "seed"])["run_unique_tokens"].max().mean()) / parameters


def verdict(effect: str, values: pd.Series, margin: float) -> str:
    """The report's verdict on the paper's side of `effect` (CLAIMED) from per-seed values."""
    if effect == "delta_joint":
        return parity_verdict(values, margin)
    return sign_verdict(values, negative=True)


def seed_effects(phases: pd.DataFrame, roles: dict[str, Role]) -> pd.DataFrame:
    """One row per seed: the final CE of each run of the 2 × 2 (found by role: normgrow.paper.roles) and
    the three effects."""
    final = final_ce_by_seed(by_role(phases, roles))
    out = final[["pre-joint", "post-joint", "pre-grow", "post-grow"]]
    return out.assign(**effects(out)).reset_index()


def scale_effects(per_seed: pd.DataFrame, axis: str = "student_parameters", margin: float = 0.01) -> pd.DataFrame:
    """Per scale and effect: mean, 95% interval, number of seeds and verdict (from `seed_effects` rows
    with `scale` and `axis` columns)."""
    rows = []
    for (scale, position), group in per_seed.groupby(["scale", axis], sort=False):
        for effect in EFFECTS:
            mean, low, high = mean_ci(group[effect])
            rows.append({"scale": scale, axis: position, "effect": effect, "mean": mean, "low": low, "high": high,
                         "seeds": len(group), "verdict": verdict(effect, group[effect], margin)})
    return pd.DataFrame(rows)


def draw(summary: pd.DataFrame, path: Path, axis: str = "student_parameters") -> list[Path]:
    """The three effects against the study's axis, with their 95% seed intervals; the paper's values
    (reference.yaml, Table 1) as dashed lines, and on the tokens axis the paper's position."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from normgrow.paper.figures import save

    label, factor = AXES[axis]
    paper = paper_reference()["table1"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, effect in enumerate(EFFECTS):
        rows = summary[summary["effect"] == effect].sort_values(axis)
        x = rows[axis] * factor * (1 + 0.03 * (i - 1))  # side by side, on a log axis
        line = ax.errorbar(x, rows["mean"], yerr=[rows["mean"] - rows["low"], rows["high"] - rows["mean"]],
                           marker="o", capsize=3, label=LABELS[effect])
        ax.axhline(paper[effect], color=line[0].get_color(), linestyle="--", linewidth=0.8)
    ax.axhline(0, color="grey", linewidth=0.8)
    if axis == "tokens_per_parameter":
        ax.axvline(paper_reference()["study"]["tokens_per_parameter"], color="grey", linestyle=":", linewidth=1,
                   label="the paper's tokens per parameter")
    ax.set_xscale("log")
    ax.set_xlabel(label)
    ax.set_ylabel("validation CE difference (nats)")
    seeds = int(summary["seeds"].min())
    ax.set_title(f"Placement effects ({seeds} paired seeds, 95% intervals; dashed: the paper)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path, dpi=150)


def markdown(per_seed: pd.DataFrame, summary: pd.DataFrame) -> str:
    """The per-seed table and the per-scale summary: mean [95% interval] and verdict on the paper's side
    of each effect, and the teacher's lead over the best run of any seed (the regime's condition)."""
    runs = ["pre-joint", "post-joint", "pre-grow", "post-grow"]
    seeds = Grid(["scale", "student parameters", "tokens per parameter", "seed", *runs, "Δ_joint", "Δ_grow",
                  "interaction"],
                 [[str(r["scale"]), f"{r['student_parameters'] / 1e6:.2f}M", f"{r['tokens_per_parameter']:.2f}",
                   str(r["seed"])] + [f"{r[run]:.4f}" for run in runs] + [f"{r[e]:+.4f}" for e in EFFECTS]
                  for _, r in per_seed.iterrows()])
    paper = paper_reference()["table1"]
    lead = (per_seed[runs].min(axis=1) - per_seed["teacher_ce"]).groupby(per_seed["scale"]).min()
    rows = []
    for scale, group in summary.groupby("scale", sort=False):
        cells = {r["effect"]: f"{r['mean']:+.4f} [{r['low']:+.4f}, {r['high']:+.4f}] {r['verdict']}"
                 for _, r in group.iterrows()}
        rows.append([str(scale), str(int(group["seeds"].iloc[0])), f"{lead[scale]:+.3f}"] + [cells[e] for e in EFFECTS])
    header = ["scale", "seeds", f"teacher lead (≥ {MIN_TEACHER_LEAD})"] + [
        f"{LABELS[e].split(' ')[0]} {CLAIMED[e]} (paper {paper[e]:+.4f})" for e in EFFECTS]
    return to_markdown([seeds, Grid(header, rows)])
