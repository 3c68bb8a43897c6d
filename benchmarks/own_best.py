"""The calibration's second reading carried to the grow runs: each placement at its own best setting.

Two finished workflow directories, trained at two settings with the same seeds and teacher (for
instance the headline at LR 1e-2 and at 2e-2): pre-norm's runs are read from the first, post-norm's
from the second, and Δ_joint, Δ_grow and the interaction are computed from each run's final
validation CE (results/metrics/phases.csv), paired by seed, with the report's 95% t-intervals
(normgrow.paper.stats). From the repository root:

    python benchmarks/own_best.py PRE_DIR POST_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from normgrow.paper.stats import mean_ci


def final_ce(workdir: Path) -> pd.DataFrame:
    """Each run's validation CE after its last phase: one column per run, one row per seed."""
    phases = pd.read_csv(workdir / "results" / "metrics" / "phases.csv")
    return phases.sort_values("phase").groupby(["run", "seed"])["ce"].last().unstack("run")


def own_best(pre_dir: Path, post_dir: Path) -> dict[str, tuple[float, float, float]]:
    """Δ = CE(post) − CE(pre) under joint and grow, and the interaction, paired by seed."""
    pre, post = final_ce(pre_dir), final_ce(post_dir)
    seeds = pre.index.intersection(post.index)
    if len(seeds) == 0:
        raise SystemExit(f"no seed in both {pre_dir} and {post_dir}")
    joint = post.loc[seeds, "post-joint"] - pre.loc[seeds, "pre-joint"]
    grow = post.loc[seeds, "post-grow"] - pre.loc[seeds, "pre-grow"]
    return {"Δ_joint": mean_ci(joint), "Δ_grow": mean_ci(grow), "interaction": mean_ci(grow - joint)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pre_dir", type=Path, help="the finished run whose pre-norm runs are read")
    parser.add_argument("post_dir", type=Path, help="the finished run whose post-norm runs are read")
    args = parser.parse_args()
    for name, (mean, low, high) in own_best(args.pre_dir, args.post_dir).items():
        print(f"{name}: {mean:+.4f} [{low:+.4f}, {high:+.4f}]")


if __name__ == "__main__":
    main()
