"""Transition metrics on a synthetic loss curve with a known jump, AUC and recovery."""

import numpy as np
import pytest

from normgrow.transitions import trailing_mean, transition_metrics


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
    # AUC over the first 100 steps: Σ 0.5(1 − t/200), t=0..99, divided by 1,000·s = 100
    expected_1k = sum(0.5 * (1 - k / 200) for k in range(100)) / 100
    assert m["auc_1k"] == pytest.approx(expected_1k)
    expected_5k = sum(0.5 * (1 - k / 200) for k in range(200)) / 100
    assert m["auc_5k"] == pytest.approx(expected_5k)
    # smoothed (20-step trailing mean) loss first ≤ baseline when the whole window is at baseline:
    # steps t=200..219 (1-based step 220)
    assert m["recovery_step"] == 220
    assert m["recovery_paper_steps"] == 2200


def test_never_recovers():
    m = transition_metrics(np.ones(100), np.full(100, 1.5))
    assert m["recovery_step"] is None and m["recovery_paper_steps"] is None
    assert m["jump"] == pytest.approx(0.5)
