"""The paper's figures, drawn with matplotlib in one style: pre-norm and post-norm keep the same
colour in every figure (Okabe–Ito, colour-blind safe); seeds are drawn as a mean line with a
min–max band."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from normgrow.paper.roles import Role, has_role  # noqa: E402
from normgrow.paper.stats import EFFECTS, delta  # noqa: E402
from normgrow.paper.stats import effects as effects_2x2  # noqa: E402

PLACEMENT_COLORS = {"pre": "#0072B2", "post": "#D55E00"}
EXTRA_COLORS = ["#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
STYLE = {"figure.dpi": 120, "savefig.dpi": 200, "savefig.bbox": "tight", "font.size": 9, "axes.grid": True,
         "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False}


def save(fig, path: Path, **options) -> list[Path]:
    """`fig` saved as PNG and PDF at `path` (its suffix replaced), and closed: the one way a figure is written
    (the report's, a study's). The PDF carries no creation date, so the same figure gives the same bytes;
    `options` go to `fig.savefig` (the report's figures take theirs from STYLE; a study's: dpi=150, laid out
    first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    paths = [path.with_suffix(".png"), path.with_suffix(".pdf")]
    for p in paths:
        fig.savefig(p, metadata={"CreationDate": None} if p.suffix == ".pdf" else None, **options)
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
        return save(fig, directory / "validation_loss")


def band(ax, rows: pd.DataFrame, value: str, style: dict) -> None:
    """`value` against the global step: mean over seeds, with a min–max band when there are several."""
    stats = rows.groupby("global_step")[value].agg(["mean", "min", "max"])
    ax.plot(stats.index, stats["mean"], **style)
    if rows["seed"].nunique() > 1:
        ax.fill_between(stats.index, stats["min"], stats["max"], color=style["color"], alpha=0.2, linewidth=0)


def _seed_stats(frame: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
    return frame.groupby(by)[value].agg(["mean", "min", "max", "count"]).reset_index()


def seed_range(stats: pd.DataFrame):
    """Min–max error bars around the seed mean, or None for a single seed (seeds of one value: none below the
    rounding of the mean, which matplotlib refuses)."""
    if (stats["count"] > 1).any():
        return [(stats["mean"] - stats["min"]).clip(lower=0), (stats["max"] - stats["mean"]).clip(lower=0)]
    return None


def _errorbar(ax, x, stats: pd.DataFrame, color: str, label: str, marker="o", linestyle="-") -> None:
    """Mean over seeds with min–max error bars (none for a single seed)."""
    err = seed_range(stats)
    ax.errorbar(x, stats["mean"], yerr=err, color=color, marker=marker, linestyle=linestyle, label=label,
                capsize=3)


def interaction(final: pd.DataFrame, directory: Path) -> list[Path]:
    """Fig. 3a: final validation CE of pre/post under joint and grow."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3.6, 2.8))
        for placement, color in PLACEMENT_COLORS.items():
            rows = final[final["run"].isin([f"{placement}-joint", f"{placement}-grow"])]
            stats = _seed_stats(rows, ["run"], "ce").set_index("run").reindex(
                [f"{placement}-joint", f"{placement}-grow"]).reset_index()
            _errorbar(ax, ["joint", "grow"], stats, color, f"{placement}-norm")
        ax.set_xlabel("curriculum")
        ax.set_ylabel("final validation CE (nats/token)")
        ax.set_title("Placement × curriculum interaction")
        ax.legend()
        return save(fig, directory / "fig3a_interaction")


def crossover(phases: pd.DataFrame, directory: Path) -> list[Path]:
    """Fig. 3b: phase-end validation CE of pre-grow and post-grow, and Δ = post − pre per phase."""
    with plt.rc_context(STYLE):
        fig, (ax, ax_d) = plt.subplots(1, 2, figsize=(7.2, 2.8))
        for placement, color in PLACEMENT_COLORS.items():
            stats = _seed_stats(phases[phases["run"] == f"{placement}-grow"], ["phase"], "ce")
            _errorbar(ax, stats["phase"], stats, color, f"{placement}-grow")
        by_phase = delta(phases.set_index(["run", "seed", "phase"])["ce"], "grow")  # post − pre, per seed and phase
        stats = _seed_stats(by_phase.dropna().rename("delta").reset_index(), ["phase"], "delta")
        colors = [PLACEMENT_COLORS["post"] if v < 0 else PLACEMENT_COLORS["pre"] for v in stats["mean"]]
        ax_d.bar(stats["phase"], stats["mean"], yerr=seed_range(stats), capsize=3, color=colors)
        ax_d.axhline(0, color="black", linewidth=0.8)
        ax.set_xlabel("phase (active blocks = phase + 1)")
        ax.set_ylabel("phase-end validation CE")
        ax.set_title("Phase-wise CE under growth")
        ax.legend()
        ax_d.set_xlabel("phase")
        ax_d.set_ylabel("Δ = post − pre (CE)")
        ax_d.set_title("Crossover: Δ < 0 favours post-norm")
        for a in (ax, ax_d):
            a.set_xticks(sorted(phases["phase"].unique()))
        fig.tight_layout()
        return save(fig, directory / "fig3b_crossover")


def boundary_rms(rms: pd.DataFrame, phases: pd.DataFrame, directory: Path) -> list[Path]:
    """Fig. 4: per-token RMS across growth at every block boundary, one column per diagnosed grow
    run (pre-grow and post-grow as in the paper, then any other placement's): mean (top) and
    standard deviation across tokens (bottom); dotted lines at block appending."""
    rows = rms[rms["tokens"] == "all"]
    diagnosed = set(rows["run"])
    runs = [r for r in ("pre-grow", "post-grow") if r in diagnosed]
    runs += sorted(r for r in diagnosed if has_role(r, "grow") and r not in runs)
    boundaries = sorted(rows["boundary"].unique())
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(2, len(runs), figsize=(3.6 * len(runs), 5.0), sharex=True, squeeze=False)
        for col, run in enumerate(runs):
            run_rows = rows[rows["run"] == run]
            for b in boundaries:
                stats_rows = run_rows[run_rows["boundary"] == b]
                style = {"color": plt.cm.viridis(b / max(1, len(boundaries) - 1)), "marker": ".",
                         "label": "embedding out" if b == 0 else f"after block {b - 1}"}
                for row, stat in enumerate(("mean", "std")):
                    band(axes[row, col], stats_rows, stat, style)
            ends = phases[phases["run"] == run].groupby("phase")["global_step"].max().iloc[:-1]
            for ax in axes[:, col]:
                for step in ends:
                    ax.axvline(step, color="grey", linestyle=":", linewidth=1)
                ax.set_yscale("log")
            axes[0, col].set_title(run)
            axes[1, col].set_xlabel("training step (global)")
        axes[0, 0].set_ylabel("per-token RMS: mean")
        axes[1, 0].set_ylabel("per-token RMS: std across tokens")
        axes[0, -1].legend(fontsize=7)
        fig.suptitle("Block-boundary RMS across growth (diagnostic batch, log scale)")
        fig.tight_layout()
        return save(fig, directory / "fig4_boundary_rms")


def token_types(rms: pd.DataFrame, directory: Path) -> list[Path]:
    """Fig. 5a: mean per-token RMS of structural vs regular tokens at the boundary after block 0,
    across growth, for pre-grow and post-grow."""
    rows = rms[rms["run"].isin(["pre-grow", "post-grow"]) & (rms["boundary"] == 1)
               & rms["tokens"].isin(["structural", "regular"])]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(4.2, 3.0))
        for placement, color in PLACEMENT_COLORS.items():
            for tokens, linestyle in (("structural", "-"), ("regular", "--")):
                band(ax, rows[(rows["placement"] == placement) & (rows["tokens"] == tokens)], "mean",
                     {"color": color, "linestyle": linestyle, "marker": ".", "label": f"{placement}: {tokens}"})
        ax.set_yscale("log")
        ax.set_xlabel("training step (global)")
        ax.set_ylabel("mean per-token RMS after block 0")
        ax.set_title("Token-type attribution of scale drift")
        ax.legend(fontsize=7)
        return save(fig, directory / "fig5a_token_types")


def grow_validation(evals: pd.DataFrame, phases: pd.DataFrame, directory: Path) -> list[Path]:
    """Fig. 5b: validation CE of pre-grow and post-grow with block-appending markers."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(4.2, 3.0))
        for placement, color in PLACEMENT_COLORS.items():
            run_curve(ax, evals, f"{placement}-grow", color, f"{placement}-grow")
        ends = phases[phases["run"] == "pre-grow"].groupby("phase")["global_step"].max().iloc[:-1]
        for step in ends:
            ax.axvline(step, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("training step (global)")
        ax.set_ylabel("validation CE (nats/token)")
        ax.set_title("Validation loss; dotted: block appended")
        ax.legend()
        return save(fig, directory / "fig5b_grow_validation")


def rms_distributions(final_reports: dict[str, dict], directory: Path) -> list[Path]:
    """Fig. A1: distribution of per-token RMS at every boundary of the final pre-grow and post-grow
    snapshots, with each boundary's Pearson kurtosis E[(x−μ)⁴]/σ⁴ (3 for a normal distribution;
    excess kurtosis is 3 less). The paper says only "kurtosis" (> 2,400 for pre-norm), where the
    two definitions cannot be told apart."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(final_reports), figsize=(3.6 * len(final_reports), 2.8), squeeze=False)
        for ax, (run, report) in zip(axes[0], final_reports.items(), strict=True):
            for b in report["boundaries"]:
                values = b["per_token_rms"]
                name = "embedding out" if b["boundary"] == 0 else f"after block {b['boundary'] - 1}"
                ax.hist(values, bins=40, histtype="step", log=True,
                        color=plt.cm.viridis(b["boundary"] / max(1, len(report["boundaries"]) - 1)),
                        label=f"{name} (Pearson kurtosis {b['all']['kurtosis']:.1f})")
            ax.set_xlabel("per-token RMS")
            ax.set_ylabel("tokens (log)")
            ax.set_title(f"{run}, step {report['global_step']}")
            ax.legend(fontsize=6)
        fig.tight_layout()
        return save(fig, directory / "figA1_rms_distribution")


def block_removal(removal: pd.DataFrame, directory: Path) -> list[Path]:
    """Fig. A2: ΔCE and angular distance of removing each block, final snapshots of the main runs."""
    runs = ["pre-grow", "post-grow", "pre-joint", "post-joint"]
    final = removal[removal["global_step"] == removal.groupby(["run", "seed"])["global_step"].transform("max")]
    final = final[final["run"].isin(runs)]
    blocks = sorted(final["block"].unique())
    width = 0.8 / len(runs)
    hatches = {"grow": "", "joint": "//"}
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(7.2, 2.8))
        for ax, metric, label in ((axes[0], "delta_ce", "ΔCE when bypassed (nats)"),
                                  (axes[1], "angular_distance", "angular distance (in → out)")):
            for i, run in enumerate(runs):
                stats = final[final["run"] == run].groupby("block")[metric].agg(["mean", "min", "max", "count"])
                stats = stats.reindex(blocks)
                placement, curriculum = run.split("-", 1)
                ax.bar([b + (i - 1.5) * width for b in blocks], stats["mean"], width, yerr=seed_range(stats), capsize=2,
                       color=PLACEMENT_COLORS[placement], hatch=hatches[curriculum], edgecolor="white", label=run)
            ax.set_xticks(blocks)
            ax.set_xlabel("block")
            ax.set_ylabel(label)
        axes[0].legend(fontsize=7)
        fig.suptitle("Block removal at the final checkpoint (diagnostic batch)")
        fig.tight_layout()
        return save(fig, directory / "figA2_block_removal")


def mean_to_extremes(series: list[pd.Series]) -> list[list[float]]:
    """Error bars from each series' mean down to its minimum and up to its maximum (never below 0:
    a mean of equal values can round past them)."""
    return [[max(0.0, s.mean() - s.min()) for s in series], [max(0.0, s.max() - s.mean()) for s in series]]


def growth_operators(final: pd.DataFrame, operators: list[str], directory: Path) -> list[Path]:
    """Fig. G1: under each growth operator, the final validation CE of the pre- and post-norm grow
    runs (mean with the seed range) and Δ_grow = post − pre (paired by seed) on a second axis."""
    ce = final.set_index(["run", "seed"])["ce"]
    runs = {(p, op): ce[str(Role(p, "grow", op))] for p in ("pre", "post") for op in operators}
    with plt.rc_context(STYLE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(2.0 + 1.6 * len(operators), 2.8))
        width = 0.38
        for i, (placement, color) in enumerate((("pre", "#4C72B0"), ("post", "#DD8452"))):
            values = [runs[(placement, op)] for op in operators]
            x = [j + (i - 0.5) * width for j in range(len(operators))]
            spread = mean_to_extremes(values)
            left.bar(x, [v.mean() for v in values], width, yerr=spread, capsize=2, color=color,
                     label=f"{placement}-norm")
        low = min(v.min() for v in runs.values())
        left.set_ylim(low - 0.1, max(v.max() for v in runs.values()) + 0.05)
        left.set_xticks(range(len(operators)), operators)
        left.set_ylabel("final validation CE (nats)")
        left.set_title("Grow under each operator")
        left.legend(fontsize=7)
        deltas = [runs[("post", op)] - runs[("pre", op)] for op in operators]
        spread = mean_to_extremes(deltas)
        right.bar(range(len(operators)), [d.mean() for d in deltas], 0.5, yerr=spread, capsize=2, color="#55A868")
        right.axhline(0, color="black", linewidth=0.8)
        right.set_xticks(range(len(operators)), operators)
        right.set_ylabel("Δ_grow = post − pre (nats)")
        right.set_title("Post-norm's gap per operator")
        fig.tight_layout()
        return save(fig, directory / "figG1_growth_operators")


def placements(final: pd.DataFrame, names: list[str], directory: Path) -> list[Path]:
    """Fig. P1: for every placement P in `names`, Δ_joint(P), Δ_grow(P) (P − pre, paired by seed)
    and the interaction, mean with the seed range."""
    effects = {"Δ_joint": [], "Δ_grow": [], "interaction": []}
    ce = final.set_index(["run", "seed"])["ce"]
    for placement in names:
        of_placement = effects_2x2(ce, placement)
        for key, name in zip(effects, EFFECTS, strict=True):
            values = of_placement[name]
            effects[key].append((values.mean(), values.min(), values.max()))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(names), 2.8))
        width = 0.26
        for i, (key, color) in enumerate(zip(effects, ("#4C72B0", "#DD8452", "#55A868"), strict=True)):
            x = [j + (i - 1) * width for j in range(len(names))]
            means = [m for m, _, _ in effects[key]]
            spread = [[max(m - lo, 0) for m, lo, _ in effects[key]], [max(hi - m, 0) for m, _, hi in effects[key]]]
            ax.bar(x, means, width, yerr=spread, capsize=2, color=color, label=key)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(names)), names, rotation=20)
        ax.set_ylabel("CE difference vs pre-norm (nats)")
        ax.set_title("Placements against pre-norm")
        ax.legend(fontsize=7)
        return save(fig, directory / "figP1_placements")

