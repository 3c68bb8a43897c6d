"""Across-seed summaries: mean, sample standard deviation and a 95% Student-t interval."""

from __future__ import annotations

import math
from functools import cache

import pandas as pd


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
