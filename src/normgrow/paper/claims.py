"""The paper's claims (docs/definitions.md §5), each checked against this run with a verdict.

Verdict rules (m = the equivalence margin in nats, config `report.equivalence_margin`):
- a sign claim ("x < 0"): with several seeds, "agrees" if the 95% interval of x lies entirely on
  the claimed side of 0, "disagrees" if entirely on the other side, otherwise "inconclusive";
  with one seed, the sign of x decides and the verdict is marked as a single-seed estimate;
- an equivalence claim ("x ≈ 0"): with several seeds, "agrees" if the interval lies inside
  [−m, m], "disagrees" if it lies entirely outside, otherwise "inconclusive"; with one seed,
  |x| ≤ m decides;
- a claim made of several parts agrees if all parts agree, disagrees if any part disagrees, and is
  inconclusive otherwise.

Parity (`parity`), one rule for the Δ_joint claim, the baseline-parity precondition, every study's Δ_joint
(normgrow.paper.study), the calibration's and the pre-registered comparison's (normgrow.paper.comparison) and
their shared setting (`nearest_parity`): Δ_joint's 95% seed interval
inside [−m, m] with at least `MIN_PARITY_SEEDS` seeds is parity "shown"; entirely outside it, "absent";
anything else — fewer seeds, or an interval that straddles a bound — "not shown", never "present".
m is set from the paper, not from the run: the default 0.01 nats is under a third of the paper's
interaction (−0.0332) and 25× its Δ_joint (+0.0004), so a tie within it cannot account for the paper's
effect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from normgrow.paper.reference import paper_reference
from normgrow.paper.stats import delta, effects, mean_ci

AGREES, DISAGREES, INCONCLUSIVE = "agrees", "disagrees", "inconclusive"

# The mechanism claims are judged by magnitude as well as direction: an effect must reach at least a
# quarter of the paper's (a factor of four either way is what separates "the same phenomenon at a smaller
# scale" from "a trace of it"). The paper's magnitudes, as thresholds (its numbers, displayed, are in
# reference.yaml):
MAGNITUDE_SHARE = 0.25
PAPER_KURTOSIS = 2400            # Fig. A1: pre-norm's per-token RMS kurtosis "> 2400"
PAPER_STRUCTURAL_RATIO = 37.0    # Fig. 5a: pre-norm document-boundary / regular RMS at the end, 425 / 11.5
PAPER_DRIFT = 19.98 / 5.81       # Fig. 4: pre-norm's per-token RMS std after block 0, last / first snapshot
NOT_CHECKED = "not checked"  # the configuration did not build what the claim needs


@dataclass
class Claim:
    name: str
    paper: str
    ours: str
    verdict: str
    seeds: int


def _interval(values: pd.Series) -> tuple[float, float, float, int]:
    values = pd.Series(values, dtype=float).dropna()
    mean, low, high = mean_ci(values)
    return mean, low, high, len(values)


def sign_verdict(values: pd.Series, negative: bool = True) -> str:
    mean, low, high, n = _interval(values)
    if n == 0:
        return INCONCLUSIVE
    if negative:
        low, high = -high, -low  # test "−x > 0"
    if low > 0:
        return AGREES
    if high < 0:
        return DISAGREES
    return INCONCLUSIVE


def equivalence_verdict(values: pd.Series, margin: float) -> str:
    mean, low, high, n = _interval(values)
    if n == 0:
        return INCONCLUSIVE
    if -margin <= low and high <= margin:
        return AGREES
    if low > margin or high < -margin:
        return DISAGREES
    return INCONCLUSIVE


MIN_PARITY_SEEDS = 3
SHOWN, ABSENT, NOT_SHOWN = "shown", "absent", "not shown"


def parity(low: float, high: float, seeds: int, margin: float) -> str:
    """The one parity rule (module docstring): parity of Δ_joint from its 95% interval [low, high] over `seeds`
    paired seeds at the margin m — "shown" inside [−m, m] with at least MIN_PARITY_SEEDS seeds, "absent"
    entirely outside it with as many, otherwise "not shown". Every judgement of Δ_joint ≈ 0 is this one: the
    report's claim and precondition, every study's, the calibration's and the comparison's."""
    if seeds >= MIN_PARITY_SEEDS and -margin <= low and high <= margin:
        return SHOWN
    if seeds >= MIN_PARITY_SEEDS and (low > margin or high < -margin):
        return ABSENT
    return NOT_SHOWN


def parity_bound(low: float, high: float) -> float:
    """How far Δ_joint's interval reaches from 0, max(|low|, |high|): parity is shown when it is at most the
    margin (with enough seeds), so the smallest bound is the setting nearest to parity."""
    return max(abs(low), abs(high))


def nearest_parity(settings: pd.DataFrame):
    """The shared setting (the paper's protocol: one setting for every cell, where the placements tie under
    joint training), the calibration's and the comparison's: of `settings` (one row each, by index, with
    `parity_bound` and the mean final CE of `pre-joint` and `post-joint`), the one whose Δ_joint interval lies
    nearest parity, the smallest `parity_bound`; ties: the lower mean CE of the two placements, then the
    first row."""
    order = pd.DataFrame({"bound": settings["parity_bound"],
                          "ce": settings[["pre-joint", "post-joint"]].mean(axis=1)})
    return order.sort_values(["bound", "ce"], kind="stable").index[0]


def direction_verdict(low: float, high: float, paper: float) -> str:
    """A difference the paper reports with a sign, judged by size: "agrees" when the 95% interval
    excludes 0 on the paper's side, "disagrees" when it excludes 0 on the other, else "inconclusive"
    (whether the paper's value lies inside the interval is reported beside it: `covers`)."""
    if paper < 0:
        low, high = -high, -low
    if low > 0:
        return AGREES
    if high < 0:
        return DISAGREES
    return INCONCLUSIVE


def covers(low: float, high: float, value: float) -> bool:
    """Whether `value` lies inside [low, high]."""
    return low <= value <= high


def at_least(values: pd.Series, floor: float) -> str:
    """The sign verdict of "values ≥ floor" (values − floor > 0)."""
    return sign_verdict(pd.Series(values, dtype=float) - floor, negative=False)


def combine(verdicts: list[str]) -> str:
    if verdicts and all(v == AGREES for v in verdicts):
        return AGREES
    if any(v == DISAGREES for v in verdicts):
        return DISAGREES
    return INCONCLUSIVE


def parity_verdict(values: pd.Series, margin: float) -> str:
    """`parity` of per-seed Δ_joint values in the claims' words: shown agrees, absent disagrees, not shown is
    inconclusive."""
    mean, low, high, n = _interval(values)
    return {SHOWN: AGREES, ABSENT: DISAGREES, NOT_SHOWN: INCONCLUSIVE}[parity(low, high, n, margin)]


def size_verdict(values: pd.Series, paper: float) -> str:
    """A difference the paper reports with a sign, over seeds: `direction_verdict` of its 95% interval."""
    mean, low, high, n = _interval(values)
    return INCONCLUSIVE if n == 0 else direction_verdict(low, high, paper)


def sized(values: pd.Series, paper: float, digits: int = 4) -> str:
    """`describe`, and whether the paper's value lies inside the interval (several seeds)."""
    mean, low, high, n = _interval(values)
    inside = "" if n < 2 else "; paper's value inside" if covers(low, high, paper) else "; paper's value outside"
    return describe(values, digits) + inside


def describe(values: pd.Series, digits: int = 4) -> str:
    mean, low, high, n = _interval(values)
    return f"{mean:+.{digits}f}" + (f" [{low:+.{digits}f}, {high:+.{digits}f}]" if n > 1 else "")


def check_claims(results, rms: pd.DataFrame, margin: float) -> list[Claim]:
    """Every claim of the paper: checked where this configuration built its runs and diagnostics,
    otherwise listed as not checked with the runs it needs."""
    r, claims = results, []
    seeds = r.final["seed"].nunique()
    paper = paper_reference()["claims"]

    def needs(claim: str, *runs: str) -> bool:
        missing = [run for run in runs if not r.has(run)]
        if missing:
            claims.append(Claim(claim, "—", f"needs the runs {', '.join(missing)}", NOT_CHECKED, seeds))
        return not missing

    ce = r.final_ce()
    if needs("Δ_joint, Δ_grow and their interaction", "pre-joint", "post-joint", "pre-grow", "post-grow"):
        d = effects(ce)
        table1 = paper_reference()["table1"]
        claims += [
            Claim("Δ_joint ≈ 0 (placements tie under joint training: parity shown)", paper["delta_joint"],
                  describe(d["delta_joint"]), parity_verdict(d["delta_joint"], margin), seeds),
            Claim("Δ_grow < 0 (post-norm better under growth)", paper["delta_grow"],
                  sized(d["delta_grow"], table1["delta_grow"]), size_verdict(d["delta_grow"], table1["delta_grow"]),
                  seeds),
            Claim("interaction Δ_grow − Δ_joint < 0", paper["interaction"],
                  sized(d["interaction"], table1["interaction"]),
                  size_verdict(d["interaction"], table1["interaction"]), seeds),
        ]
    if needs("crossover after phase 0", "pre-grow", "post-grow"):
        phases = sorted(r.phases[r.phases["run"] == "pre-grow"]["phase"].unique())
        deltas = {p: delta(r.phase_ce(p), "grow") for p in phases}
        table2 = paper_reference()["table2"]
        phase0 = table2["post"]["ce"] - table2["pre"]["ce"]  # +0.0044: the placements near-tied after phase 0
        parts = [equivalence_verdict(deltas[0] - phase0, margin)]  # phase 0: within ±m of the paper's Δ_0
        parts += [sign_verdict(deltas[p]) for p in phases[1:]]
        claims.append(Claim(f"crossover after phase 0 (Δ_0 within ±m of the paper's {phase0:+.4f}; Δ < 0 once "
                            "blocks are appended)",
                            paper["crossover"],
                            "; ".join(f"phase {p}: {describe(d)}" for p, d in deltas.items()),
                            combine(parts), seeds))
    if not r.removal.empty and r.has("pre-grow", "post-grow"):
        final = r.removal[r.removal["global_step"] == r.removal.groupby(["run", "seed"])["global_step"]
                          .transform("max")]
        last = final[final["block"] == final.groupby(["run", "seed"])["block"].transform("max")]
        pre = last[last["run"] == "pre-grow"].set_index("seed")
        post = last[last["run"] == "post-grow"].set_index("seed")
        angle = pre["angular_distance"] - 0.5 * post["angular_distance"]
        dce = pre["delta_ce"] - 0.5 * post["delta_ce"]
        claims.append(Claim("final pre-grow block near identity (angle and ΔCE under half of post-grow's)",
                            paper["identity"],
                            f"pre {pre['angular_distance'].mean():.3f} / {pre['delta_ce'].mean():.3f} vs post "
                            f"{post['angular_distance'].mean():.3f} / {post['delta_ce'].mean():.3f}",
                            combine([sign_verdict(angle), sign_verdict(dce)]), seeds))
    if needs("budget controls worse than post-grow", "post-joint-long", "post-joint-longer", "post-grow"):
        gaps = [r.final_metric(run) - r.final_metric("post-grow") for run in ("post-joint-long", "post-joint-longer")]
        table3 = paper_reference()["table3"]["ce"]
        papers = [table3[run] - table3["post-grow"] for run in ("post-joint-long", "post-joint-longer")]
        claims.append(Claim("budget controls worse than post-grow (CE_control − CE_post-grow > 0)",
                            paper["controls"], ", ".join(sized(g, v) for g, v in zip(gaps, papers, strict=True)),
                            combine([size_verdict(g, v) for g, v in zip(gaps, papers, strict=True)]), seeds))
    if needs("freeze gap ≈ grow gap", "pre-freeze", "post-freeze", "pre-grow", "post-grow"):
        diff = delta(ce, "freeze") - delta(ce, "grow")
        claims.append(Claim("freeze gap ≈ grow gap (Δ_freeze − Δ_grow ≈ 0)", paper["freeze"], describe(diff),
                            equivalence_verdict(diff, margin), seeds))
    if needs("grow with iterator reset ≈ grow", "pre-grow-reset", "post-grow-reset", "pre-grow", "post-grow"):
        gaps = {p: r.final_metric(f"{p}-grow-reset") - r.final_metric(f"{p}-grow") for p in ("pre", "post")}
        d_reset = delta(ce, "grow-reset")
        claims.append(Claim("grow with iterator reset ≈ grow (|CE_reset − CE_grow| ≤ m for each placement), "
                            "post-norm still ahead (Δ_grow-reset < 0)", paper["reset"],
                            f"pre {describe(gaps['pre'])}, post {describe(gaps['post'])}; Δ {describe(d_reset)}",
                            combine([equivalence_verdict(gaps["pre"], margin),
                                     equivalence_verdict(gaps["post"], margin), sign_verdict(d_reset)]), seeds))
    after0 = pd.DataFrame() if rms.empty else rms[
        (rms["tokens"] == "all") & (rms["boundary"] == 1) & rms["run"].isin(["pre-grow", "post-grow"])]
    if not after0.empty and set(after0["run"]) == {"pre-grow", "post-grow"}:
        growth = {}
        for run in ("pre-grow", "post-grow"):
            rows = after0[after0["run"] == run].sort_values("global_step")
            by_seed = rows.groupby("seed")["std"]
            growth[run] = by_seed.last() / by_seed.first()
        drift = growth["pre-grow"] - growth["post-grow"]
        floor = 1 + MAGNITUDE_SHARE * (PAPER_DRIFT - 1)
        claims.append(Claim("scale drift: per-token RMS std after block 0 grows more for pre-grow than post-grow "
                            f"(ratio last/first snapshot), pre's growth ≥ ×{floor:.2f} (a quarter of the paper's "
                            "rise)", paper["drift"],
                            f"pre ×{growth['pre-grow'].mean():.2f}, post ×{growth['post-grow'].mean():.2f}",
                            combine([sign_verdict(drift, negative=False), at_least(growth["pre-grow"], floor)]),
                            seeds))
        claims += diagnostic_claims(rms, paper, seeds)
    return claims


def diagnostic_claims(rms: pd.DataFrame, paper: dict, seeds: int) -> list[Claim]:
    """Claims on the boundary RMS of the grow runs' snapshots (Fig. A1 and Fig. 5a), each judged by
    direction and by magnitude (at least MAGNITUDE_SHARE of the paper's):

    - kurtosis: the largest Pearson kurtosis of the per-token RMS over the block boundaries (after
      blocks 0..K−1) at the final snapshot; the paper reports > 2,400 for pre-norm. Checked as
      pre-norm's at least 10× post-norm's (log10 of the ratio − 1 > 0) and at least a quarter of
      2,400 (a diagnostic batch of n tokens bounds it by about n: normgrow.paper.preconditions);
    - structural concentration, after block 0: the ratio of the mean RMS of structural tokens to
      regular tokens (paper at the end: pre 425 / 11.5 ≈ 37, post 2.45 / 2.40 ≈ 1.0). Checked as
      pre-norm's ratio above post-norm's and at least a quarter of 37, and pre-norm's structural RMS
      growing from the first to the last snapshot (paper 119 → 425).
    """
    grow = rms[rms["run"].isin(["pre-grow", "post-grow"])]
    final = grow[grow["global_step"] == grow.groupby(["run", "seed"])["global_step"].transform("max")]
    blocks = final[(final["tokens"] == "all") & (final["boundary"] >= 1)]
    kurt = {run: blocks[blocks["run"] == run].groupby("seed")["kurtosis"].max() for run in ("pre-grow", "post-grow")}
    excess = np.log10(kurt["pre-grow"] / kurt["post-grow"]) - 1
    kurtosis_floor = MAGNITUDE_SHARE * PAPER_KURTOSIS
    claims = [Claim("pre-norm per-token RMS far heavier-tailed: its largest boundary kurtosis (Pearson) at the "
                    f"end ≥ 10× post-norm's and ≥ {kurtosis_floor:,.0f}", paper["kurtosis"],
                    f"pre {kurt['pre-grow'].mean():.1f}, post {kurt['post-grow'].mean():.1f}",
                    combine([sign_verdict(excess, negative=False), at_least(kurt["pre-grow"], kurtosis_floor)]),
                    seeds)]
    after0 = grow[grow["boundary"] == 1].set_index(["run", "seed", "global_step", "tokens"])["mean"]

    def ratio(run: str) -> pd.Series:
        rows = after0.loc[run].unstack("tokens")
        last = rows.groupby("seed").tail(1).droplevel("global_step")
        return last["structural"] / last["regular"]

    structural = after0.loc["pre-grow"].xs("structural", level="tokens").groupby("seed")
    rise = structural.last() / structural.first() - 1
    pre_ratio, post_ratio = ratio("pre-grow"), ratio("post-grow")
    ratio_floor = MAGNITUDE_SHARE * PAPER_STRUCTURAL_RATIO
    claims.append(Claim("scale concentrates on structural tokens in pre-norm (structural/regular RMS after block 0 "
                        f"above post-norm's and ≥ {ratio_floor:.2f}; pre's structural RMS rises across growth)",
                        paper["structural"],
                        f"ratio pre {pre_ratio.mean():.2f}, post {post_ratio.mean():.2f}; pre structural "
                        f"×{1 + rise.mean():.2f}",
                        combine([sign_verdict(pre_ratio - post_ratio, negative=False),
                                 at_least(pre_ratio, ratio_floor), sign_verdict(rise, negative=False)]), seeds))
    return claims
