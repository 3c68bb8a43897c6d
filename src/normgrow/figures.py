"""The paper's figures, drawn with matplotlib in one style: pre-norm and post-norm keep the same
colour in every figure (Okabe–Ito, colour-blind safe); seeds are drawn as a mean line with a
min–max band."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

PLACEMENT_COLORS = {"pre": "#0072B2", "post": "#D55E00"}
EXTRA_COLORS = ["#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
STYLE = {"figure.dpi": 120, "savefig.dpi": 200, "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
         "axes.spines.top": False, "axes.spines.right": False}


def save(fig, directory: Path, name: str) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return paths


def run_curve(ax, evals: pd.DataFrame, run: str, color: str, label: str, linestyle="-") -> None:
    """Validation CE against the run's global step: mean over seeds, min–max band."""
    rows = evals[evals["run"] == run]
    stats = rows.groupby("global_step")["ce"].agg(["mean", "min", "max"])
    ax.plot(stats.index, stats["mean"], color=color, linestyle=linestyle, marker=".", label=label)
    if rows["seed"].nunique() > 1:
        ax.fill_between(stats.index, stats["min"], stats["max"], color=color, alpha=0.2, linewidth=0)


def validation_loss(evals: pd.DataFrame, phases: pd.DataFrame, directory: Path) -> list[Path]:
    """Validation CE vs global step for every run, one panel per curriculum shape, with dotted
    lines at the phase boundaries (block appending or LR restart)."""
    families = {}
    for run in dict.fromkeys(phases["run"]):
        family = run.split("-", 1)[1] if run.startswith(("pre-", "post-")) else run
        families.setdefault(family, []).append(run)
    with plt.rc_context(STYLE):
        n = len(families)
        cols = min(3, n)
        rows_n = -(-n // cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(3.6 * cols, 2.8 * rows_n), squeeze=False, sharey=True)
        for ax, (family, runs) in zip(axes.flat, families.items(), strict=False):
            extra = iter(EXTRA_COLORS)
            for run in runs:
                placement = phases.loc[phases["run"] == run, "placement"].iloc[0]
                color = PLACEMENT_COLORS.get(placement) or next(extra)
                run_curve(ax, evals, run, color, run)
            ends = phases[phases["run"].isin(runs)].groupby("phase")["global_step"].max().iloc[:-1]
            for step in ends:
                ax.axvline(step, color="grey", linestyle=":", linewidth=1)
            ax.set_title(family)
            ax.set_xlabel("training step (global)")
            ax.legend(fontsize=7)
        for ax in axes[:, 0]:
            ax.set_ylabel("validation CE (nats/token)")
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        fig.suptitle("Validation loss; dotted lines: phase boundaries")
        fig.tight_layout()
        return save(fig, directory, "validation_loss")
