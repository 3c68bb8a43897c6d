"""Transition metrics on a synthetic loss curve with a known jump, AUC and recovery."""

import numpy as np
import pytest

from normgrow.paper.transitions import trailing_mean, transition_metrics


def test_trailing_mean():
    np.testing.assert_allclose(trailing_mean(np.array([1.0, 3.0, 5.0, 7.0]), 2), [1.0, 2.0, 4.0, 6.0])


def test_known_jump_auc_and_recovery():
    phase = 50_000 // 10  # s = 0.1: windows 20 (smoothing), 100 (AUC 1k), 500 (AUC 5k) steps
    previous = np.full(phase, 2.0)
    previous[-20:] = 1.0  # the baseline uses only the last 20 steps
    t = np.arange(phase)
    loss = 1.0 + 0.5 * np.maximum(0, 1 - t / 200)  # jumps by 0.5, decays linearly to baseline at t=200
    m = transition_metrics(previous, loss)
    assert m["smoothing_window"] == 20 and m["auc_1k_window"] == 100 and m["auc_5k_window"] == 500
    assert m["baseline"] == pytest.approx(1.0)
    assert m["jump"] == pytest.approx(0.5)
    # AUC (paper-comparable) = mean excess over the window: Σ 0.5(1 − t/200), t < 100, over 100 steps;
    # the 500-step window holds the same excess (zero after t = 200) over 500 steps
    excess_1k, excess_5k = (sum(0.5 * (1 - k / 200) for k in range(n)) for n in (100, 200))
    assert m["auc_1k"] == pytest.approx(excess_1k / 100)
    assert m["auc_5k"] == pytest.approx(excess_5k / 500)
    # the area itself, in loss × thousand-steps (1,000·s = 100 steps of this phase)
    assert m["auc_1k_sum"] == pytest.approx(excess_1k / 100)
    assert m["auc_5k_sum"] == pytest.approx(excess_5k / 100)
    # smoothed (20-step trailing mean) loss first ≤ baseline when the whole window is at baseline:
    # steps t=200..219 (1-based step 220)
    assert m["recovery_step"] == 220
    assert m["recovery_paper_steps"] == 2200


def test_never_recovers():
    m = transition_metrics(np.ones(100), np.full(100, 1.5))
    assert m["recovery_step"] is None and m["recovery_paper_steps"] is None
    assert m["jump"] == pytest.approx(0.5)


def test_mean_auc_reproduces_the_papers_post_norm_pattern():
    """A loss that stays above its baseline through the 5k window but falls within it: the mean over
    the longer window is smaller (the paper's post-norm 0.1464 < 0.1820), the sum larger."""
    phase = 50_000
    t = np.arange(phase)
    loss = 1.0 + 0.25 * np.exp(-t / 2_000) + 0.01  # above baseline 1.0 for the whole phase
    m = transition_metrics(np.ones(phase), loss)
    assert m["auc_5k"] < m["auc_1k"]
    assert m["auc_5k_sum"] > m["auc_1k_sum"]
    assert m["recovery_step"] is None
