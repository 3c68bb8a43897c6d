"""Transition-aligned training loss (Table A4): what happens to the training loss when a block is
appended. All windows scale with the phase length P through s = P / 50,000 (the paper's phases
are 50,000 steps), so that the paper's 200-, 1,000- and 5,000-step windows become 0.4%, 2% and
10% of a phase:

- smoothing window w = max(1, round(200·s)) steps; smoothed loss = trailing mean over the last
  w steps of the new phase (fewer at its start);
- baseline b = mean training loss over the last w steps of the previous phase;
- jump = loss at the first step of the new phase − b;
- AUC_k (k = 1,000 or 5,000), the paper-comparable column = the *mean* excess loss over the first
  W_k = max(1, round(k·s)) steps, (1/W_k)·Σ_{t=1..W_k} (loss_t − b). The paper calls it an area
  under the curve, but its own Table A4 fits only the mean: post-norm's AUC5k (0.1464) is below its
  AUC1k (0.1820) although its loss stays above the baseline for ~19,000 steps, which a sum could
  not do. AUC_k sum = Σ_{t=1..W_k} (loss_t − b) / (1,000·s) is the area itself, in loss ×
  thousand-steps (one "thousand steps" being 1,000·s steps of this phase);
- recovery = the first step t of the new phase at which the smoothed loss ≤ b (None if never);
  also given in paper-equivalent steps, t / s.
"""

from __future__ import annotations

import numpy as np

PAPER_PHASE_STEPS = 50_000


def trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values up to and including each index (fewer at the start).
    Each mean is summed afresh (no running sums), so a flat stretch averages exactly to its value."""
    values = np.asarray(values, dtype=np.float64)
    head = [values[: i + 1].mean() for i in range(min(window - 1, len(values)))]
    full = np.lib.stride_tricks.sliding_window_view(values, window).mean(axis=1) if len(values) >= window else []
    return np.concatenate([head, full])


def transition_metrics(previous_loss: np.ndarray, loss: np.ndarray) -> dict:
    """Metrics of one block-appending transition from the training losses of the phases on either
    side (one value per step, in order). The new phase's length sets the scale."""
    phase = len(loss)
    s = phase / PAPER_PHASE_STEPS
    window = max(1, round(200 * s))
    baseline = float(np.mean(previous_loss[-window:]))
    excess = loss - baseline
    out = {"phase_steps": phase, "scale": s, "smoothing_window": window, "baseline": baseline,
           "jump": float(loss[0] - baseline)}
    for k in (1000, 5000):
        steps = max(1, round(k * s))
        out[f"auc_{k // 1000}k"] = float(excess[:steps].mean())
        out[f"auc_{k // 1000}k_sum"] = float(excess[:steps].sum() / (1000 * s))
        out[f"auc_{k // 1000}k_window"] = steps
    recovered = np.nonzero(trailing_mean(loss, window) <= baseline)[0]
    out["recovery_step"] = int(recovered[0]) + 1 if len(recovered) else None
    out["recovery_paper_steps"] = None if out["recovery_step"] is None else round(out["recovery_step"] / s)
    return out
