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

`reach` extrapolates a measure's trend: a straight line through log(measure) against log(updates) over
the later half of a subject's snapshots, and the updates where it would cross a threshold (None where the
trend does not rise).
"""

from __future__ import annotations

import math
from pathlib import Path

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


def student_rows(scale: str, checkpoints: list[dict], placement: str = "pre") -> list[dict]:
    """One row per diagnosed checkpoint of the `placement` runs (diagnostics files' checkpoints): the measures
    after block 0 (boundary 1), token RMS ratios from the structural and regular sets' means."""
    rows = []
    for report in checkpoints:
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
    pre-norm student's checkpoints, by subject and step."""
    rows = teacher_rows(scale, bundle["teacher_snapshots"]) if bundle.get("teacher_snapshots") else []
    rows += student_rows(scale, bundle.get("diagnostics", []))
    return pd.DataFrame(rows).sort_values(["subject", "step"], kind="stable").reset_index(drop=True)


def formed(row) -> bool:
    """Whether a row (a subject at one snapshot) has formed structural-token scale (module docstring)."""
    if row["subject"] == TEACHER:
        return row["max_over_median"] >= TEACHER_MASSIVE and row["attention_on_structural"] >= TEACHER_ATTENTION
    return row["structural_over_regular"] >= STUDENT_RATIO


def trend(steps, values) -> tuple[float, float] | None:
    """(slope, intercept) of the least-squares line through (log step, log value) over the later half of the
    snapshots (at least two): the measure grows as updates^slope there. None for fewer than two."""
    later = sorted(zip(steps, values, strict=True))
    later = later[len(later) // 2:]
    if len(later) < 2:
        return None
    x = [math.log(s) for s, _ in later]
    y = [math.log(v) for _, v in later]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx = sum((a - mx) ** 2 for a in x)
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def reach(steps, values, threshold: float) -> float | None:
    """Updates where the trend (`trend`) crosses `threshold`: the snapshot's own step if one already reaches
    it, None if the line does not rise or fewer than two snapshots are given."""
    reached = [s for s, v in sorted(zip(steps, values, strict=True)) if v >= threshold]
    if reached:
        return float(reached[0])
    line = trend(steps, values)
    if line is None or line[0] <= 0:
        return None
    slope, intercept = line
    return math.exp((math.log(threshold) - intercept) / slope)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per scale and subject: the last snapshot's measures, the first step that formed it (None: none did),
    and the updates the trend would need to reach the threshold that decides it."""
    out = []
    for (scale, subject), group in rows.groupby(["scale", "subject"], sort=False):
        group = group.sort_values("step")
        last = group.iloc[-1]
        hits = group[[formed(r) for _, r in group.iterrows()]]
        measure, threshold = (("max_over_median", TEACHER_MASSIVE) if subject == TEACHER
                              else ("structural_over_regular", STUDENT_RATIO))
        out.append({"scale": scale, "subject": subject, "steps": int(last["step"]),
                    **{m: last[m] for m in MEASURES}, "validation_ce": last["validation_ce"],
                    "formed_at": None if hits.empty else int(hits["step"].iloc[0]),
                    "criterion": measure, "threshold": threshold,
                    "reach": reach(group["step"], group[measure], threshold)})
    return pd.DataFrame(out)


def _number(value: float, digits: int) -> str:
    return "–" if _missing(value) else f"{value:.{digits}f}"


def summary_grid(table: pd.DataFrame) -> Grid:
    """Per scale and subject: the last snapshot's measures, formed or not, and the trend's reach."""
    return Grid(["scale", "subject", "updates", *MEASURES.values(), "validation CE", "formed at",
                 "trend reaches the threshold at (updates)"],
                [[str(r["scale"]), str(r["subject"]), str(r["steps"]),
                  *[_number(r[m], 3 if m == "attention_on_structural" else 2) for m in MEASURES],
                  _number(r["validation_ce"], 4),
                  "not formed" if _missing(r["formed_at"]) else str(int(r["formed_at"])),
                  f"{MEASURES[r['criterion']]} ≥ {r['threshold']:g}: "
                  + ("never (no rising trend)" if _missing(r["reach"]) else _updates(r["reach"]))]
                 for _, r in table.iterrows()])


def markdown(rows: pd.DataFrame, table: pd.DataFrame) -> str:
    """The per-subject summary (the last snapshot, formed or not, the trend's reach) and every snapshot."""
    every = Grid(["scale", "subject", "updates", *MEASURES.values(), "validation CE"],
                 [[str(r["scale"]), str(r["subject"]), str(r["step"]),
                   *[_number(r[m], 3 if m == "attention_on_structural" else 2) for m in MEASURES],
                   _number(r["validation_ce"], 4)] for _, r in rows.iterrows()])
    return to_markdown([summary_grid(table), every])


def _updates(n: float) -> str:
    return f"{n:,.0f}" if n < 1e7 else f"{n:.1e}"


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def findings(rows: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """The study's result in sentences, every number from `rows` and `table`: which subjects formed
    structural-token scale; otherwise how each subject's deciding measure moved along its own training and
    what the grid's longest teacher reached against today's teacher at the same length."""
    formed_rows = table[[not _missing(v) for v in table["formed_at"]]]
    lines = []
    if formed_rows.empty:
        lines.append(f"Formed: none of the {len(table)} subjects (teacher: max/median token RMS ≥ {TEACHER_MASSIVE:g} "
                     f"and attention on position 0 ≥ {TEACHER_ATTENTION:g}; pre-norm student: structural/regular "
                     f"RMS after block 0 ≥ {STUDENT_RATIO:g}).")
    else:
        lines.append("Formed: " + "; ".join(f"{r['scale']} {r['subject']} at update {int(r['formed_at']):,}"
                                            for _, r in formed_rows.iterrows()) + ".")
    for _, r in table.iterrows():
        group = rows[(rows["scale"] == r["scale"]) & (rows["subject"] == r["subject"])].sort_values("step")
        measure = r["criterion"]
        first, last = group.iloc[0], group.iloc[-1]
        attention = (f"; attention on position 0 {first['attention_on_structural']:.3f} → "
                     f"{last['attention_on_structural']:.3f}" if r["subject"] == TEACHER else "")
        slope = trend(group["step"], group[measure])
        exponent = "" if slope is None else f"; over its later half it grows as updates^{slope[0]:.2f}"
        reach_text = ("" if _missing(r["reach"]) else
                      f", which reaches {r['threshold']:g} at {_updates(r['reach'])} updates "
                      f"({r['reach'] / last['step']:,.3g}× its length)")
        lines.append(f"{r['scale']}, {r['subject']}: {MEASURES[measure]} {first[measure]:.2f} at update "
                     f"{int(first['step']):,} → {last[measure]:.2f} at {int(last['step']):,}{attention}"
                     f"{exponent}{reach_text}.")
    return lines


def draw(rows: pd.DataFrame, path: Path) -> list[Path]:
    """Three panels against training length (updates, log): the teacher's max/median token RMS and its
    attention on structural tokens (strongest layer), the pre-norm student's structural/regular RMS after
    block 0; one line per scale, the deciding thresholds dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    from normgrow.paper.study import save_png_and_pdf

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
    return save_png_and_pdf(fig, path)
