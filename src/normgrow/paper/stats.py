"""Across-seed summaries: mean, sample standard deviation and a 95% Student-t interval."""

from __future__ import annotations

import math

import pandas as pd

# two-sided 95% quantiles t_{0.975, df} for df = 1..30; the normal 1.960 beyond
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]


def t975(df: int) -> float:
    return _T975[df - 1] if df <= len(_T975) else 1.960


def mean_ci(values: pd.Series) -> tuple[float, float, float]:
    """(mean, low, high): the 95% t-interval of the mean; low = high = mean for a single value."""
    values = pd.Series(values, dtype=float).dropna()
    n, mean = len(values), float(values.mean())
    if n < 2:
        return mean, mean, mean
    half = t975(n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half
