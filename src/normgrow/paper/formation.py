"""The formation study (configs/formation.yaml, issue 45): does a pre-norm stack of the miniature's size form
structural-token scale, and how fast — read along training, for the teacher (its pretraining's snapshots,
probed by normgrow.train.probe) and for the pre-norm student (its diagnostics snapshots,
normgrow.train.diagnostics).

Per scale, subject and snapshot (training length in updates), five measures of the residual stream on the
fixed diagnostic batch (definitions: normgrow.train.diagnostics):

- max/median token RMS and structural/regular token RMS;
- max/median |scalar| and structural/regular |scalar|;
- attention on structural tokens (position 0 and the special ids; with the boundary at the start of every
  document, position 0).

The teacher is read at its strongest layer (the maximum over layers of each measure, as the report's
teacher-massive precondition reads its probe); the student after block 0 (boundary 1), where the paper
states its 37× (normgrow.paper.claims). Thresholds, fixed with the study's grid before any of its runs:

- a teacher *formed* it at a snapshot where max/median token RMS ≥ 20 and attention on structural tokens
  ≥ 0.3 (SmolLM2-135M: 145× and 0.78; the embedded teacher: 3.5× and 0.07);
- a pre-norm student *formed* it at a snapshot where structural/regular token RMS after block 0 ≥ 9.25,
  a quarter of the paper's 37 (the magnitude rule of the report's mechanism claims).

How far a subject is from its threshold is read from its trend, never extrapolated to one point: `trend` fits a
straight line through log(measure) against log(updates) over the later half of its snapshots, with the
slope's 95% interval; `reach` gives the range of updates at which the line crosses the threshold over that
interval (a snapshot that already reached it gives its own step). A subject is *within reach* if it reached
the threshold already, or if the line at the slope's upper bound crosses it within `WITHIN_REACH` times the
subject's own training length. The later half of every run is under its own decaying LR (cosine to
`min_lr`), so its slope partly measures the annealing. THIS RULE (the interval, the crossing range and the
10× factor) WAS SET AFTER THE STUDY'S RESULTS WERE READ (issue 60), replacing a point extrapolation of the
line; the thresholds above were not changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from normgrow.paper.document import Grid, to_markdown

MEASURES = {"max_over_median": "max/median RMS", "structural_over_regular": "structural/regular RMS",
            "scalar_max_over_median": "max/median |scalar|",
            "scalar_structural_over_regular": "structural/regular |scalar|",
            "attention_on_structural": "attention on structural"}
TEACHER_MASSIVE = 20.0  # max/median token RMS
TEACHER_ATTENTION = 0.3  # attention on structural tokens
STUDENT_RATIO = 37.0 / 4  # structural/regular token RMS after block 0: a quarter of the paper's
TEACHER = "teacher"


def teacher_rows(scale: str, probe: dict) -> list[dict]:
    """One row per snapshot of the teacher's pretraining (probe_snapshots.json): each measure's maximum over
    layers, with the layer it sits in, and the snapshot's validation CE."""
    rows = []
    for snapshot in probe["snapshots"]:
        row = {"scale": scale, "subject": TEACHER, "step": snapshot["step"],
               "validation_ce": snapshot.get("validation_ce", math.nan)}
        for measure in MEASURES:
            layers = [layer for layer in snapshot["layers"] if measure in layer]
            top = max(layers, key=lambda layer: layer[measure], default=None)
            row[measure] = math.nan if top is None else top[measure]
            row[f"{measure}_at"] = None if top is None else top["layer"]
        rows.append(row)
    return rows


def student_rows(scale: str, reports: list[dict], placement: str = "pre") -> list[dict]:
    """One row per diagnosed snapshot of the `placement` runs (the diagnostics files' reports): the measures
    after block 0 (boundary 1), token RMS ratios from the structural and regular sets' means."""
    rows = []
    for report in reports:
        if report["placement"] != placement:
            continue
        after = next((b for b in report["boundaries"] if b["boundary"] == 1), None)
        if after is None:
            continue
        every = after["all"]
        rows.append({"scale": scale, "subject": f"{report['run']} (seed {report['seed']})",
                     "step": report["global_step"], "validation_ce": math.nan,
                     "max_over_median": every["max"] / every["median"],
                     "structural_over_regular": after["structural"]["mean"] / after["regular"]["mean"],
                     **{m: every.get(m, math.nan) for m in
                        ("scalar_max_over_median", "scalar_structural_over_regular", "attention_on_structural")}})
    return rows


def formation_rows(scale: str, bundle: dict) -> pd.DataFrame:
    """Every row of one scale's results/formation.json: the teacher's snapshots (if it saved any) and the
    pre-norm student's diagnostics, by subject and step."""
    rows = teacher_rows(scale, bundle["teacher_snapshots"]) if bundle.get("teacher_snapshots") else []
    rows += student_rows(scale, bundle.get("diagnostics", []))
    return pd.DataFrame(rows).sort_values(["subject", "step"], kind="stable").reset_index(drop=True)


def formed(row) -> bool:
    """Whether a row (a subject at one snapshot) has formed structural-token scale (module docstring)."""
    if row["subject"] == TEACHER:
        return row["max_over_median"] >= TEACHER_MASSIVE and row["attention_on_structural"] >= TEACHER_ATTENTION
    return row["structural_over_regular"] >= STUDENT_RATIO


@dataclass(frozen=True)
class Trend:
    """The least-squares line through (log updates, log measure) over the later half of a subject's snapshots:
    the measure grows as updates^slope there. `low` and `high` bound the slope's 95% interval (Student t with
    `points` − 2 degrees of freedom), both None with fewer than three points (not estimable). The line passes
    through its centre (`log_step`, `log_value`: the means of the logs), and so does the line at any other
    slope of the interval."""

    slope: float
    low: float | None
    high: float | None
    log_step: float
    log_value: float
    points: int

    @property
    def estimable(self) -> bool:
        return self.low is not None

    def crossing(self, threshold: float, slope: float) -> float:
        """The updates at which the line of `slope` through the centre reaches `threshold` (one above the
        centre's value); inf where that line does not rise, or the crossing is beyond a float's range."""
        if slope <= 0:
            return math.inf
        try:
            return math.exp(self.log_step + (math.log(threshold) - self.log_value) / slope)
        except OverflowError:
            return math.inf


def trend(steps, values) -> Trend | None:
    """The `Trend` of the later half of the snapshots (the second half of them by step, the middle one included
    for an odd count); None where they do not span two steps. The slope's standard error is √(SSR / (n − 2) /
    Sxx), 0 for points on a line (a flat measure included, where scipy's linregress gives NaN)."""
    from normgrow.paper.stats import t975

    later = sorted(zip(steps, values, strict=True))
    later = later[len(later) // 2:]
    x = np.log([s for s, _ in later])
    y = np.log([v for _, v in later])
    if len(set(x)) < 2:
        return None
    dx, dy = x - x.mean(), y - y.mean()
    sxx = float((dx ** 2).sum())
    slope = float((dx * dy).sum()) / sxx
    if len(x) < 3:
        return Trend(slope, None, None, float(x.mean()), float(y.mean()), len(x))
    residuals = dy - slope * dx
    half = t975(len(x) - 2) * math.sqrt(float((residuals ** 2).sum()) / (len(x) - 2) / sxx)
    return Trend(slope, slope - half, slope + half, float(x.mean()), float(y.mean()), len(x))


WITHIN_REACH = 10.0
"""A subject is within reach of its threshold if its trend crosses it within this many times its own training:
about what two cores could train again in the study's setting. Ten times the study's runs, at the rates it
measured (teacher pretraining 2 min 49 s per 1,600 updates at width 64, 4 min at width 128, 9–11 min per
6,400; the pre-norm student's 700 updates about 2.5 min), is 28–110 min of training per subject. Set after
the study's results were read (issue 60)."""


@dataclass(frozen=True)
class Reach:
    """Where a subject's measure meets its threshold: the step of the first snapshot that already did
    (`reached`), or else the range of updates at which its trend's line crosses it over the slope's interval —
    `earliest` at the upper bound, `latest` at the lower (inf: never, where that bound is ≤ 0). All None where
    no snapshot reached it and the interval is not estimable."""

    reached: int | None = None
    earliest: float | None = None
    latest: float | None = None

    def within(self, length: float) -> bool | None:
        """Within reach of `WITHIN_REACH` × `length` updates (module docstring); None: not estimable."""
        if self.reached is not None:
            return True
        if self.earliest is None:
            return None
        return self.earliest <= WITHIN_REACH * length


def reach(steps, values, threshold: float) -> Reach:
    """The `Reach` of `threshold` by a subject's snapshots (`steps`, `values`) and their `trend`. Where none
    reached it every value is below it, and so is the line's centre: a steeper slope crosses it earlier."""
    reached = [s for s, v in sorted(zip(steps, values, strict=True)) if v >= threshold]
    if reached:
        return Reach(reached=int(reached[0]))
    line = trend(steps, values)
    if line is None or not line.estimable:
        return Reach()
    return Reach(earliest=line.crossing(threshold, line.high), latest=line.crossing(threshold, line.low))


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per scale and subject: the last snapshot's measures, the first step that formed it (None: none did), the
    trend of the measure that decides it (`trend`: slope, its interval, points), where it meets its threshold
    (`reach`) and whether that is within reach (True, False, None: not estimable)."""
    out = []
    for (scale, subject), group in rows.groupby(["scale", "subject"], sort=False):
        group = group.sort_values("step")
        last = group.iloc[-1]
        hits = group[[formed(r) for _, r in group.iterrows()]]
        measure, threshold = (("max_over_median", TEACHER_MASSIVE) if subject == TEACHER
                              else ("structural_over_regular", STUDENT_RATIO))
        line = trend(group["step"], group[measure])
        found = reach(group["step"], group[measure], threshold)
        out.append({"scale": scale, "subject": subject, "steps": int(last["step"]),
                    **{m: last[m] for m in MEASURES}, "validation_ce": last["validation_ce"],
                    "formed_at": None if hits.empty else int(hits["step"].iloc[0]),
                    "criterion": measure, "threshold": threshold,
                    "slope": None if line is None else line.slope, "slope_low": None if line is None else line.low,
                    "slope_high": None if line is None else line.high,
                    "points": None if line is None else line.points,
                    "reached": found.reached, "earliest": found.earliest, "latest": found.latest,
                    "within_reach": found.within(last["step"])})
    return pd.DataFrame(out)


def _number(value: float, digits: int) -> str:
    return "–" if _missing(value) else f"{value:.{digits}f}"


def _slope(r) -> str:
    """A subject's exponent with its interval: "0.52 [0.21, 0.83]"; "1.00 (no interval: 2 points)"."""
    if _missing(r["slope"]):
        return "none (fewer than two steps)"
    if _missing(r["slope_low"]):
        return f"{r['slope']:.2f} (no interval: {int(r['points'])} points)"
    return f"{r['slope']:.2f} [{r['slope_low']:.2f}, {r['slope_high']:.2f}]"


def _crossing(r) -> str:
    """Where a subject meets its threshold, for the summary's table."""
    if not _missing(r["reached"]):
        return f"reached at {int(r['reached']):,}"
    if _missing(r["earliest"]):
        return "not estimable"
    return f"{_updates(r['earliest'])} – {_updates(r['latest'])}"


def _verdict(r) -> str:
    return "not estimable" if _missing(r["within_reach"]) else "yes" if r["within_reach"] else "no"


def summary_grid(table: pd.DataFrame) -> Grid:
    """Per scale and subject: the last snapshot's measures, formed or not, the deciding measure's trend with its
    interval, where it crosses the threshold over that interval, and whether that is within reach."""
    return Grid(["scale", "subject", "updates", *MEASURES.values(), "validation CE", "formed at",
                 "later half: exponent [95%]", "crosses the threshold (updates)",
                 f"within {WITHIN_REACH:g}× its training"],
                [[str(r["scale"]), str(r["subject"]), str(r["steps"]),
                  *[_number(r[m], 3 if m == "attention_on_structural" else 2) for m in MEASURES],
                  _number(r["validation_ce"], 4),
                  "not formed" if _missing(r["formed_at"]) else str(int(r["formed_at"])),
                  f"{MEASURES[r['criterion']]}: {_slope(r)}",
                  f"{MEASURES[r['criterion']]} ≥ {r['threshold']:g}: {_crossing(r)}", _verdict(r)]
                 for _, r in table.iterrows()])


def markdown(rows: pd.DataFrame, table: pd.DataFrame) -> str:
    """The per-subject summary (the last snapshot, formed or not, the trend and its reach) and every snapshot."""
    every = Grid(["scale", "subject", "updates", *MEASURES.values(), "validation CE"],
                 [[str(r["scale"]), str(r["subject"]), str(r["step"]),
                   *[_number(r[m], 3 if m == "attention_on_structural" else 2) for m in MEASURES],
                   _number(r["validation_ce"], 4)] for _, r in rows.iterrows()])
    return to_markdown([summary_grid(table), every])


def _updates(n: float) -> str:
    """A number of updates to three significant figures; inf: never."""
    if math.isinf(n):
        return "never"
    return f"{float(f'{n:.3g}'):,.0f}" if n < 1e7 else f"{n:.2e}"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _reach_text(r) -> str:
    """Where a subject meets its threshold and the verdict, in words (`findings`)."""
    horizon = f"{WITHIN_REACH:g}× its training ({WITHIN_REACH * r['steps']:,.0f} updates)"
    threshold = f"{r['threshold']:g}"
    if not _missing(r["reached"]):
        return f"it reached {threshold} at update {int(r['reached']):,}: within reach"
    if _missing(r["earliest"]):
        return "where it would cross the threshold is not estimable"
    verdict = f"within reach of {horizon}" if r["within_reach"] else f"not within reach of {horizon}"
    if math.isinf(r["earliest"]):
        return f"it crosses {threshold} at no slope of its interval (the upper bound ≤ 0): {verdict}"
    latest = ("never (the interval's lower slope ≤ 0)" if math.isinf(r["latest"])
              else f"{_updates(r['latest'])} updates")
    return f"it crosses {threshold} between {_updates(r['earliest'])} updates and {latest}: {verdict}"


def _trend_text(r) -> str:
    """A subject's exponent over its later half with its interval, in words (`findings`)."""
    if _missing(r["slope"]):
        return "its later half spans fewer than two steps: no trend"
    interval = ("" if _missing(r["slope_low"]) else f" [{r['slope_low']:.2f}, {r['slope_high']:.2f}]")
    points = f"{int(r['points'])} snapshots" + ("" if interval else ", too few for an interval")
    return f"over its later half ({points}) it grows as updates^{r['slope']:.2f}{interval}"


def findings(rows: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """The study's result in sentences, every number from `rows` and `table`: which subjects formed
    structural-token scale; the rule that reads each subject's trend; and each subject's deciding measure from
    its first to its last snapshot, the exponent of its later half with its interval, where that line crosses
    the threshold over the interval and whether that is within reach."""
    formed_rows = table[[not _missing(v) for v in table["formed_at"]]]
    lines = []
    if formed_rows.empty:
        lines.append(f"Formed: none of the {len(table)} subjects (teacher: max/median token RMS ≥ {TEACHER_MASSIVE:g} "
                     f"and attention on position 0 ≥ {TEACHER_ATTENTION:g}; pre-norm student: structural/regular "
                     f"RMS after block 0 ≥ {STUDENT_RATIO:g}).")
    else:
        lines.append("Formed: " + "; ".join(f"{r['scale']} {r['subject']} at update {int(r['formed_at']):,}"
                                            for _, r in formed_rows.iterrows()) + ".")
    lines.append(f"Within reach (a rule set after these results were read, issue 60): the deciding measure (teacher: "
                 f"max/median RMS alone; student: structural/regular RMS) reached its threshold at a snapshot, or "
                 f"its later half's log-log line at the slope's upper 95% bound crosses it within {WITHIN_REACH:g}× "
                 f"the subject's own training.")
    for _, r in table.iterrows():
        group = rows[(rows["scale"] == r["scale"]) & (rows["subject"] == r["subject"])].sort_values("step")
        measure = r["criterion"]
        first, last = group.iloc[0], group.iloc[-1]
        attention = (f"; attention on position 0 {first['attention_on_structural']:.3f} → "
                     f"{last['attention_on_structural']:.3f}" if r["subject"] == TEACHER else "")
        lines.append(f"{r['scale']}, {r['subject']}: {MEASURES[measure]} {first[measure]:.2f} at update "
                     f"{int(first['step']):,} → {last[measure]:.2f} at {int(last['step']):,}{attention}; "
                     f"{_trend_text(r)}; {_reach_text(r)}.")
    return lines


def draw(rows: pd.DataFrame, path: Path) -> list[Path]:
    """Three panels against training length (updates, log): the teacher's max/median token RMS and its
    attention on structural tokens (strongest layer), the pre-norm student's structural/regular RMS after
    block 0; one line per scale, the deciding thresholds dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    from normgrow.paper.figures import save

    panels = [("teacher", "max_over_median", TEACHER_MASSIVE, "teacher: max/median token RMS (strongest layer)"),
              ("teacher", "attention_on_structural", TEACHER_ATTENTION, "teacher: attention on position 0"),
              ("student", "structural_over_regular", STUDENT_RATIO,
               "pre-norm student: structural/regular RMS after block 0")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (who, measure, threshold, title) in zip(axes, panels, strict=True):
        subset = rows[(rows["subject"] == TEACHER) == (who == "teacher")]
        for (scale, subject), group in subset.groupby(["scale", "subject"], sort=False):
            group = group.sort_values("step")
            label = scale if who == "teacher" else f"{scale}: {subject}"
            ax.plot(group["step"], group[measure], marker="o", markersize=3, label=label)
        ax.axhline(threshold, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xscale("log")
        if measure != "attention_on_structural":
            ax.set_yscale("log")
        for axis in [ax.xaxis] + ([ax.yaxis] if measure != "attention_on_structural" else []):
            axis.set_major_locator(LogLocator(subs=(1, 2, 5)))  # 1, 2, 5 × 10^k, written out
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("training updates")
        ax.set_title(title, fontsize=9)
        if not subset.empty:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path, dpi=150)
