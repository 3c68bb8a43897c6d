"""A seeds × scale ladder of the 2 × 2 (pre/post × joint/grow): the placement effects against scale.

For every scale and seed, from the final validation CE of the four runs (paired by seed, as in
Table 1):

- Δ_joint = CE(post-joint) − CE(pre-joint);
- Δ_grow = CE(post-grow) − CE(pre-grow);
- interaction = Δ_grow − Δ_joint.

Each effect is summarised per scale by its mean over seeds with a 95% Student-t interval
(normgrow.paper.stats.mean_ci), and drawn against the student's parameters.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from normgrow.paper.document import Grid, to_markdown
from normgrow.paper.results import final_phases
from normgrow.paper.roles import by_role
from normgrow.paper.stats import mean_ci

EFFECTS = ("delta_joint", "delta_grow", "interaction")
LABELS = {"delta_joint": "Δ_joint (post − pre, joint)", "delta_grow": "Δ_grow (post − pre, grow)",
          "interaction": "interaction (Δ_grow − Δ_joint)"}


def seed_effects(phases: pd.DataFrame, roles: dict[str, str]) -> pd.DataFrame:
    """One row per seed: the final CE of each run of the 2 × 2 (found by role: normgrow.paper.roles) and
    the three effects."""
    final = final_phases(by_role(phases, roles)).pivot(index="seed", columns="run", values="ce")
    out = final[["pre-joint", "post-joint", "pre-grow", "post-grow"]].copy()
    out["delta_joint"] = out["post-joint"] - out["pre-joint"]
    out["delta_grow"] = out["post-grow"] - out["pre-grow"]
    out["interaction"] = out["delta_grow"] - out["delta_joint"]
    return out.reset_index()


def scale_effects(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per scale and effect: mean, 95% interval and number of seeds (from `seed_effects` rows with
    `scale` and `student_parameters` columns)."""
    rows = []
    for (scale, parameters), group in per_seed.groupby(["scale", "student_parameters"], sort=False):
        for effect in EFFECTS:
            mean, low, high = mean_ci(group[effect])
            rows.append({"scale": scale, "student_parameters": parameters, "effect": effect, "mean": mean,
                         "low": low, "high": high, "seeds": len(group)})
    return pd.DataFrame(rows)


def draw(summary: pd.DataFrame, path: Path) -> list[Path]:
    """The three effects against the student's parameters, with their 95% seed intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, effect in enumerate(EFFECTS):
        rows = summary[summary["effect"] == effect].sort_values("student_parameters")
        x = rows["student_parameters"] / 1e6 * (1 + 0.03 * (i - 1))  # side by side, on a log axis
        ax.errorbar(x, rows["mean"], yerr=[rows["mean"] - rows["low"], rows["high"] - rows["mean"]], marker="o",
                    capsize=3, label=LABELS[effect])
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("student parameters (millions)")
    ax.set_ylabel("validation CE difference (nats)")
    seeds = int(summary["seeds"].min())
    ax.set_title(f"Placement effects against scale ({seeds} paired seeds, 95% intervals)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths = [path.with_suffix(".png"), path.with_suffix(".pdf")]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return paths


def markdown(per_seed: pd.DataFrame, summary: pd.DataFrame) -> str:
    """The per-seed table and the per-scale summary (mean [95% interval])."""
    runs = ["pre-joint", "post-joint", "pre-grow", "post-grow"]
    effects = ["delta_joint", "delta_grow", "interaction"]
    seeds = Grid(["scale", "student parameters", "seed", *runs, "Δ_joint", "Δ_grow", "interaction"],
                 [[str(r["scale"]), f"{r['student_parameters'] / 1e6:.2f}M", str(r["seed"])]
                  + [f"{r[run]:.4f}" for run in runs] + [f"{r[e]:+.4f}" for e in effects]
                  for _, r in per_seed.iterrows()])
    rows = []
    for scale, group in summary.groupby("scale", sort=False):
        cells = {r["effect"]: f"{r['mean']:+.4f} [{r['low']:+.4f}, {r['high']:+.4f}]" for _, r in group.iterrows()}
        rows.append([str(scale), str(int(group["seeds"].iloc[0]))] + [cells[e] for e in effects])
    return to_markdown([seeds, Grid(["scale", "seeds", "Δ_joint", "Δ_grow", "interaction"], rows)])
