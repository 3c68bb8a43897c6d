"""The per-phase LR schedule (docs/definitions.md §3): linear warm-up, then cosine decay to the minimum."""

from __future__ import annotations

import math

import pytest

from normgrow.design.schedule import lr_at, warmup_steps

PEAK, MINIMUM = 1e-4, 1e-6


@pytest.mark.parametrize("length,fraction", [(1000, 0.015), (200, 0.015), (150, 0.015), (7, 0.3)])
def test_anchor_points(length, fraction):
    w = warmup_steps(length, fraction)
    assert w == max(1, round(fraction * length))
    assert lr_at(w, length, PEAK, MINIMUM, fraction) == pytest.approx(PEAK, rel=1e-12)
    assert lr_at(length, length, PEAK, MINIMUM, fraction) == pytest.approx(MINIMUM, rel=1e-12)
    if (length - w) % 2 == 0:
        middle = w + (length - w) // 2
        assert lr_at(middle, length, PEAK, MINIMUM, fraction) == pytest.approx((PEAK + MINIMUM) / 2,
                                                                               rel=1e-12)


def test_paper_warmup_is_750_of_50k():
    assert warmup_steps(50_000, 0.015) == 750
    assert lr_at(375, 50_000, PEAK, MINIMUM, 0.015) == pytest.approx(PEAK / 2)
    assert lr_at(25_375, 50_000, PEAK, MINIMUM, 0.015) == pytest.approx((PEAK + MINIMUM) / 2)


def test_cosine_shape():
    length, fraction = 100, 0.1
    w = warmup_steps(length, fraction)
    t = 40
    expected = MINIMUM + (PEAK - MINIMUM) * 0.5 * (1 + math.cos(math.pi * (t - w) / (length - w)))
    assert lr_at(t, length, PEAK, MINIMUM, fraction) == pytest.approx(expected, rel=1e-12)
    assert lr_at(1, length, PEAK, MINIMUM, fraction) == pytest.approx(PEAK / w, rel=1e-12)


def test_monotone():
    length, fraction = 300, 0.05
    w = warmup_steps(length, fraction)
    lrs = [lr_at(t, length, PEAK, MINIMUM, fraction) for t in range(1, length + 1)]
    warm, decay = lrs[:w], lrs[w - 1:]
    assert all(a < b for a, b in zip(warm, warm[1:], strict=False))
    assert all(a >= b for a, b in zip(decay, decay[1:], strict=False))
    assert all(MINIMUM <= lr <= PEAK for lr in lrs)
    assert lrs[0] > 0


def test_warmup_is_at_least_one_step():
    assert warmup_steps(10, 0.0) == 1
    assert warmup_steps(10, 0.001) == 1
    assert lr_at(1, 10, PEAK, MINIMUM, 0.0) == pytest.approx(PEAK)
    assert lr_at(10, 10, PEAK, MINIMUM, 0.0) == pytest.approx(MINIMUM)


@pytest.mark.parametrize("t", [0, -1, 11, 100])
def test_out_of_range_raises(t):
    with pytest.raises(ValueError, match="outside"):
        lr_at(t, 10, PEAK, MINIMUM, 0.1)
