"""The per-phase learning-rate schedule (docs/definitions.md §3): linear warm-up, then cosine decay to the minimum."""

from __future__ import annotations

import math


def warmup_steps(length: int, warmup_fraction: float) -> int:
    """Number of warm-up updates: the fraction of the schedule's length, at least one."""
    return max(1, round(warmup_fraction * length))


def lr_at(t: int, length: int, peak: float, minimum: float, warmup_fraction: float) -> float:
    """Learning rate of update t (1-based) of a schedule `length` updates long.

    lr(t) = peak·t/W for t ≤ W (W = warm-up updates), so lr(W) = peak; afterwards
    lr(t) = min + (peak − min)·½·(1 + cos(π·(t − W)/(length − W))), so lr(length) = min and the
    midpoint of the decay is (peak + min)/2.
    """
    if not 1 <= t <= length:
        raise ValueError(f"update {t} is outside a schedule of {length} updates")
    w = warmup_steps(length, warmup_fraction)
    if t <= w:
        return peak * t / w
    progress = (t - w) / (length - w)
    return minimum + (peak - minimum) * 0.5 * (1.0 + math.cos(math.pi * progress))
