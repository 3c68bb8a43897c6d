"""The paper's placement effects, paired by seed, and their across-seed summaries: mean, sample standard
deviation, a 95% Student-t interval and the power of a design of paired seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import TypeVar

import pandas as pd

CE = TypeVar("CE", float, pd.Series)  # one final validation CE, or one per seed (a Series indexed by seed)

EFFECTS = ("delta_joint", "delta_grow", "interaction")  # the 2 × 2's, as `effects` names them
LABELS = {"delta_joint": "Δ_joint (post − pre, joint)", "delta_grow": "Δ_grow (post − pre, grow)",
          "interaction": "interaction (Δ_grow − Δ_joint)"}


def delta(ce: Mapping[str, CE], curriculum: str, placement: str = "post") -> CE:
    """Δ_c = CE(post-c) − CE(pre-c), the placement effect under curriculum c (paper Table 1, docs/definitions.md
    §5): from the final validation CE of each run (`ce[run]`, runs named placement-curriculum), paired by seed
    (Series align on the seed). Another `placement` P gives CE(P-c) − CE(pre-c), pre-norm the reference."""
    return ce[f"{placement}-{curriculum}"] - ce[f"pre-{curriculum}"]


def effects(ce: Mapping[str, CE], placement: str = "post") -> dict[str, CE]:
    """The 2 × 2's effects (EFFECTS), from the final validation CE of pre/post × joint/grow (`ce[run]`), paired
    by seed: Δ_joint = CE(post-joint) − CE(pre-joint), Δ_grow = CE(post-grow) − CE(pre-grow) and their
    interaction Δ_grow − Δ_joint (`delta`; paper Table 1 and Eq. 6). The paper's side: Δ_joint ≈ 0,
    Δ_grow < 0, interaction < 0. Another `placement` P takes post-norm's place (Table P1)."""
    joint, grow = delta(ce, "joint", placement), delta(ce, "grow", placement)
    return {"delta_joint": joint, "delta_grow": grow, "interaction": grow - joint}


@cache
def t975(df: int) -> float:
    """The two-sided 95% quantile t_{0.975, df} of Student's t (scipy; imported here, not with the
    module: the workflow's DAG imports normgrow.paper.study)."""
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def mean_ci(values: pd.Series) -> tuple[float, float, float]:
    """(mean, low, high): the 95% t-interval of the mean; low = high = mean for a single value."""
    values = pd.Series(values, dtype=float).dropna()
    n, mean = len(values), float(values.mean())
    if n < 2:
        return mean, mean, mean
    half = t975(n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half


def power_mean(effect: float, spread: float, n: int) -> float:
    """The power of n paired seeds to find a true mean difference `effect` clear of 0: the probability that the
    95% t-interval of the mean excludes 0, for per-seed differences of standard deviation `spread`
    (noncentral t with n − 1 degrees of freedom and noncentrality effect·√n / spread)."""
    from scipy.stats import nct

    critical, noncentrality = t975(n - 1), abs(effect) * math.sqrt(n) / spread
    return float(nct.sf(critical, n - 1, noncentrality) + nct.cdf(-critical, n - 1, noncentrality))


def seeds_for_power(effect: float, spread: float, target: float = 0.8) -> int:
    """The fewest paired seeds (≥ 2) whose power (power_mean) reaches `target`."""
    n = 2
    while power_mean(effect, spread, n) < target:
        n += 1
    return n


def parity_power(margin: float, spread: float, n: int, df: int | None = None) -> float:
    """The probability that the 95% t-interval of a mean of n values (standard deviation `spread`, the interval's
    degrees of freedom `df`, n − 1 unless given) lies inside ±margin when the true mean is 0: what a parity rule
    at that margin can show for a true tie. Exact, by integrating over the sample standard deviation."""
    from scipy.integrate import quad
    from scipy.stats import chi2, norm

    df = n - 1 if df is None else df
    critical, se = t975(df), spread / math.sqrt(n)

    def inside(q: float) -> float:  # q = df·s²/σ², chi-square with df degrees of freedom
        room = margin - critical * se * math.sqrt(q / df)
        return (2 * norm.cdf(room / se) - 1) * chi2.pdf(q, df) if room > 0 else 0.0

    upper = df * (margin / (critical * se)) ** 2  # beyond it the interval alone is wider than the margin
    return float(quad(inside, 0, upper, limit=200)[0])
