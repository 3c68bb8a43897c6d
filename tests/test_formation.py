"""The formation study (normgrow.paper.formation) on probes and diagnostics whose answers are known, and its DAG."""

import math
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, SNAKEMAKE

from normgrow.paper.formation import (
    STUDENT_RATIO,
    WITHIN_REACH,
    Reach,
    Trend,
    draw,
    findings,
    formation_rows,
    formed,
    markdown,
    reach,
    summary,
    summary_grid,
    trend,
)


def layer(n, massive, attention, ratio=None):
    return {"layer": n, "max_over_median": massive, "structural_over_regular": ratio or massive,
            "scalar_max_over_median": 10 * massive, "scalar_structural_over_regular": 2 * massive,
            "attention_on_structural": attention}


def teacher_probe(steps=(100, 200, 400)):
    """Three snapshots; the largest token grows 5 → 10 → 40 in layer 2, the attention on position 0 peaks in
    layer 1: 0.1 → 0.2 → 0.5."""
    massive = {100: 5.0, 200: 10.0, 400: 40.0}
    attention = {100: 0.1, 200: 0.2, 400: 0.5}
    return {"snapshots": [{"step": s, "validation_ce": 4.0 - s / 1000,
                           "layers": [layer(1, 2.0, attention[s]), layer(2, massive[s], 0.05)]} for s in steps]}


def checkpoint(step, run, placement, structural, regular=1.0):
    def boundary(b, s):
        return {"boundary": b, "all": {"max": 3 * s, "median": 1.0, "scalar_max_over_median": 50.0,
                                       "scalar_structural_over_regular": 4.0, "attention_on_structural": 0.2},
                "structural": {"mean": s}, "regular": {"mean": regular}}
    return {"run": run, "seed": 1, "placement": placement, "global_step": step,
            "boundaries": [{"boundary": 0, "all": {"max": 1.0, "median": 1.0}, "structural": {"mean": 1.0},
                            "regular": {"mean": 1.0}}, boundary(1, structural), boundary(2, 99.0)]}


BUNDLE = {"teacher_snapshots": teacher_probe(),
          "diagnostics": [checkpoint(50, "pre-joint", "pre", 2.0), checkpoint(100, "pre-joint", "pre", 10.0),
                          checkpoint(100, "post-joint", "post", 50.0)]}


def test_the_teacher_is_read_at_its_strongest_layer_and_the_student_after_block_0():
    rows = formation_rows("s", BUNDLE).set_index(["subject", "step"])
    teacher = rows.loc[("teacher", 400)]
    assert (teacher["max_over_median"], teacher["max_over_median_at"]) == (40.0, 2)
    assert (teacher["attention_on_structural"], teacher["attention_on_structural_at"]) == (0.5, 1)
    assert teacher["scalar_max_over_median"] == 400.0 and teacher["validation_ce"] == pytest.approx(3.6)
    student = rows.loc[("pre-joint (seed 1)", 100)]  # boundary 1, not 2's 99; post-norm's runs are not read
    assert student["structural_over_regular"] == 10.0 and student["max_over_median"] == 30.0
    assert student["attention_on_structural"] == 0.2 and student["scalar_structural_over_regular"] == 4.0
    assert set(rows.index.get_level_values("subject")) == {"teacher", "pre-joint (seed 1)"}


def test_formed_needs_both_teacher_thresholds_or_the_student_s_quarter_of_the_paper():
    assert formed({"subject": "teacher", "max_over_median": 20.0, "attention_on_structural": 0.3})
    assert not formed({"subject": "teacher", "max_over_median": 145.0, "attention_on_structural": 0.29})
    assert not formed({"subject": "teacher", "max_over_median": 19.9, "attention_on_structural": 0.8})
    assert formed({"subject": "pre-joint (seed 1)", "structural_over_regular": 9.25})
    assert not formed({"subject": "pre-joint (seed 1)", "structural_over_regular": 9.2})
    assert STUDENT_RATIO == 37 / 4


STEPS = [100, 200, 400, 800, 1600, 3200]
NOISY = [1.0, 1.4, 1.7, 2.6, 2.9, 4.4]  # later half 800, 1600, 3200: 2.6, 2.9, 4.4; slope 0.38 [-1.25, 2.01]
STEADY = [2.0, 2.8, 3.4, 4.0, 5.5, 8.2]  # later half 4.0, 5.5, 8.2: slope 0.52 [0.09, 0.95]


def test_the_slope_s_interval_is_student_t_with_n_minus_2_df_over_the_later_half():
    """Against scipy: linregress's slope and standard error over the later half (log value on log step), times
    t_{0.975, n − 2}; the line's centre is the means of the logs; a flat measure's interval is [0, 0]."""
    from scipy.stats import linregress, t

    x, y = np.log(STEPS[3:]), np.log(NOISY[3:])
    fit = linregress(x, y)
    half = t.ppf(0.975, len(x) - 2) * fit.stderr
    line = trend(STEPS, NOISY)
    assert line.points == 3 and line.slope == pytest.approx(fit.slope)
    assert (line.low, line.high) == pytest.approx((fit.slope - half, fit.slope + half))
    assert (line.log_step, line.log_value) == pytest.approx((x.mean(), y.mean()))
    assert half > 1  # t with 1 df is 12.7: three points bound the slope loosely
    longer = [1.0, 1.1, 1.4, 1.3, 1.7, 2.0, 2.2, 2.1, 2.6, 2.9]  # ten snapshots: five in the later half, 3 df
    fit = linregress(np.log(range(100, 1100, 100))[5:], np.log(longer[5:]))
    line = trend(range(100, 1100, 100), longer)
    assert (line.points, line.high) == (5, pytest.approx(fit.slope + t.ppf(0.975, 3) * fit.stderr))
    assert trend(STEPS, [2.0] * 6) == Trend(0.0, 0.0, 0.0, pytest.approx(x.mean()), pytest.approx(math.log(2)), 3)


def test_with_fewer_than_three_points_the_interval_and_the_reach_are_not_estimable():
    line = trend([100, 200, 400, 800], [1.0, 2.0, 3.0, 5.0])  # later half: two points
    assert line.points == 2 and line.slope == pytest.approx(math.log(5 / 3) / math.log(2))
    assert line.low is None and line.high is None and not line.estimable
    found = reach([100, 200, 400, 800], [1.0, 2.0, 3.0, 5.0], 20.0)
    assert found == Reach() and found.within(800) is None
    assert trend([100], [1.0]) is None and reach([100], [1.0], 20.0) == Reach()


def test_reach_is_the_crossing_range_over_the_slope_s_interval():
    """The line through the centre at the upper bound crosses first, at the lower bound last (never where that
    bound is ≤ 0); a snapshot that reached the threshold gives its own step instead."""
    line = trend(STEPS, NOISY)
    def at(slope):
        return math.exp(line.log_step + (math.log(20.0) - line.log_value) / slope)
    found = reach(STEPS, NOISY, 20.0)
    assert line.low <= 0 < line.high
    assert found == Reach(earliest=pytest.approx(at(line.high)), latest=math.inf)
    bounds = trend(STEPS, STEADY)
    assert 0 < bounds.low < bounds.high
    rising = reach(STEPS, STEADY, 20.0)
    assert rising.earliest == pytest.approx(math.exp(bounds.log_step + (math.log(20) - bounds.log_value) / bounds.high))
    assert rising.latest == pytest.approx(math.exp(bounds.log_step + (math.log(20) - bounds.log_value) / bounds.low))
    assert 3200 < rising.earliest < rising.latest < math.inf
    assert reach(STEPS, NOISY, 2.5) == Reach(reached=800)  # a snapshot that reached it: its own step
    falling = reach(STEPS, [19.0, 18.0, 17.0, 8.0, 4.0, 2.0], 20.0)  # updates^-1 exactly: upper bound -1
    assert falling == Reach(earliest=math.inf, latest=math.inf) and falling.within(3200) is False
    # only the later half: an early peak below the threshold does not bend the line
    power = [2 * (s / 100) ** 0.5 for s in STEPS]  # 20 at 100 × 10² updates
    assert reach(STEPS, power, 20.0) == Reach(earliest=pytest.approx(10_000), latest=pytest.approx(10_000))
    assert reach([50, *STEPS], [15.0, *power], 20.0).earliest == pytest.approx(10_000)


def test_within_reach_is_the_upper_bound_s_crossing_within_10x_the_training():
    power = [2 * (s / 100) ** 0.5 for s in STEPS]  # exact: 20 at 10,000 updates, 40 at 40,000
    assert WITHIN_REACH == 10
    assert reach(STEPS, power, 20.0).within(3200) is True  # 10,000 ≤ 32,000
    assert reach(STEPS, power, 40.0).within(3200) is False  # 40,000 > 32,000
    assert Reach(earliest=16_000, latest=math.inf).within(1600) is True
    assert Reach(earliest=16_001, latest=math.inf).within(1600) is False
    assert Reach(reached=400).within(400) is True and Reach().within(400) is None
    # the verdict reads the upper bound's crossing, 6,086 updates, not the lower bound's 2.2e9 (or never)
    found = reach(STEPS, STEADY, 20.0)
    assert found.earliest == pytest.approx(6086.3, rel=1e-5) and found.latest == pytest.approx(2.163e9, rel=1e-3)
    assert found.within(3200) is True and found.within(600) is False
    assert reach(STEPS, NOISY, 20.0).within(3200) is True  # its lower bound ≤ 0: never at the latest


def test_summary_table_and_figure(tmp_path):
    rows = formation_rows("s", BUNDLE)
    table = summary(rows).set_index("subject")
    assert table.loc["teacher", "formed_at"] == 400  # 40× with 0.5 on position 0; at 200 neither
    assert table.loc["pre-joint (seed 1)", "formed_at"] == 100
    assert table.loc["teacher", "steps"] == 400 and table.loc["teacher", "criterion"] == "max_over_median"
    unformed = summary(formation_rows("s", {"teacher_snapshots": teacher_probe((100, 200))}))
    assert unformed["formed_at"].iloc[0] is None or math.isnan(unformed["formed_at"].iloc[0])
    text = markdown(rows, summary(rows))
    assert "not formed" not in text and "| s | teacher | 400 |" in text
    assert "not formed" in markdown(formation_rows("s", {"teacher_snapshots": teacher_probe((100, 200))}), unformed)
    paths = draw(pd.concat([rows, formation_rows("t", {"teacher_snapshots": teacher_probe()})]), tmp_path / "f.png")
    assert all(p.stat().st_size > 0 for p in paths)


def test_findings_name_what_formed_or_each_subject_s_trend_and_reach():
    """The sentences of the docs' block: the subjects that formed it and when; otherwise each subject's deciding
    measure from its first to its last snapshot, the exponent of its later half and where that line would reach
    the threshold (× its own length)."""
    rows = formation_rows("s", BUNDLE)
    lines = findings(rows, summary(rows))
    assert lines[0] == "Formed: s pre-joint (seed 1) at update 100; s teacher at update 400."
    unformed = formation_rows("s", {"teacher_snapshots": teacher_probe((100, 200))})
    lines = findings(unformed, summary(unformed))
    assert lines[0].startswith("Formed: none of the 1 subjects")
    assert lines[2] == ("s, teacher: max/median RMS 5.00 at update 100 → 10.00 at 200; attention on position 0 "
                        "0.100 → 0.200; its later half spans fewer than two steps: no trend; where it would cross "
                        "the threshold is not estimable.")  # two snapshots: a later half of one
    # 4 → 8 from 200 to 400 updates: updates^1 from two points, no interval
    rising = formation_rows("s", {"diagnostics": [checkpoint(step, "pre-joint", "pre", ratio) for step, ratio in
                                                  ((50, 1.0), (100, 2.0), (200, 4.0), (400, 8.0))]})
    assert findings(rising, summary(rising))[2] == (
        "s, pre-joint (seed 1): structural/regular RMS 1.00 at update 50 → 8.00 at 400; over its later half "
        "(2 snapshots, too few for an interval) it grows as updates^1.00; where it would cross the threshold is "
        "not estimable.")
    student = formation_rows("s", {"diagnostics": [checkpoint(step, "pre-joint", "pre", ratio)
                                                   for step, ratio in zip(STEPS, NOISY, strict=True)]})
    assert findings(student, summary(student))[2] == (
        "s, pre-joint (seed 1): structural/regular RMS 1.00 at update 100 → 4.40 at 3,200; over its later half "
        "(3 snapshots) it grows as updates^0.38 [-1.25, 2.01]; it crosses 9.25 between 2,710 updates and never "
        "(the interval's lower slope ≤ 0): within reach of 10× its training (32,000 updates).")
    falling = formation_rows("s", {"diagnostics": [checkpoint(step, "pre-joint", "pre", ratio) for step, ratio in
                                                   ((50, 3.0), (100, 2.0), (200, 2.0), (400, 1.5), (800, 1.0))]})
    assert findings(falling, summary(falling))[2] == (
        "s, pre-joint (seed 1): structural/regular RMS 3.00 at update 50 → 1.00 at 800; over its later half "
        "(3 snapshots) it grows as updates^-0.50 [-1.12, 0.12]; it crosses 9.25 between 1.41e+09 updates and never "
        "(the interval's lower slope ≤ 0): not within reach of 10× its training (8,000 updates).")
    flat = formation_rows("s", {"diagnostics": [checkpoint(step, "pre-joint", "pre", 2.0) for step in STEPS]})
    assert findings(flat, summary(flat))[2].endswith(
        "it grows as updates^0.00 [0.00, 0.00]; it crosses 9.25 at no slope of its interval (the upper bound ≤ 0): "
        "not within reach of 10× its training (32,000 updates).")
    assert lines[1].startswith("Within reach (a rule set after these results were read, issue 60)")


def test_formation_study_dag_runs_every_scale_in_order(tmp_path):
    """The formation study's dry run: every scale a nested workflow to results/formation.json, the scales
    prioritised in the order listed; one scale's own config, dry run in its nested workflow, pretrains a
    teacher with snapshots, probes them, trains and diagnoses the pre-norm student at 16 snapshots."""
    config = REPO / "configs" / "formation.yaml"
    study = [SNAKEMAKE, "-s", str(REPO / "workflow" / "study.smk"), "--cores", "2", "--directory", str(tmp_path),
             "--configfile", str(config)]
    proc = subprocess.run([*study, "-n", "-p"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    scales = ["headline", "t6400", "t6400-lr1e-2", "t6400-wd0.5", "w128"]
    for scale in scales:
        assert f"results/formation/{scale}.formation.json" in proc.stdout
        assert f"--directory results/formation/{scale} " in proc.stdout
    assert "-- results/formation.json" in proc.stdout and "results/formation/formation.md" in proc.stdout
    configs = ["results/formation/headline/config.yaml", "results/formation/w128/config.yaml"]
    made = subprocess.run([*study, "--", *configs], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    width = (tmp_path / "results/formation/w128/config.yaml").read_text()
    assert "hidden_size: 128" in width and "snapshots: 8" in width
    nested = subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-n", "--cores", "2",
                             "--directory", str(tmp_path / "results/formation/headline"),
                             "--configfile", str(tmp_path / "results/formation/headline/config.yaml"),
                             "--", "results/formation.json"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert nested.returncode == 0, nested.stdout + nested.stderr
    stats = [line.split()[:2] for line in nested.stdout.splitlines() if len(line.split()) == 2]
    jobs = {("train" if re.fullmatch(r"train_\S+_[0-9a-f]{16}", rule) else rule): count for rule, count in stats
            if rule.startswith("train_") or rule in {"pretrain_teacher", "probe_teacher_snapshots", "diagnose",
                                                     "formation"}}
    assert jobs == {"pretrain_teacher": "1", "probe_teacher_snapshots": "1", "diagnose": "1", "formation": "1",
                    "train": "1"}, nested.stdout


def test_the_miniature_block_is_what_the_kept_rows_give():
    """docs/miniature.md's formation block is regenerated from docs/results/formation/formation.csv by
    tools/formation.py (the command the block names); the kept rows say nothing formed."""
    sys.path.insert(0, str(REPO / "tools"))
    import docs_block
    import formation as command

    doc = REPO / "docs" / "miniature.md"
    text = doc.read_text()
    _, start, end = docs_block.find(text, "python tools/formation.py", str(doc))
    assert text[start:end].strip() == command.render().strip(), "rerun the block's command"
    rows = pd.read_csv(REPO / "docs" / "results" / "formation" / "formation.csv")
    assert not any(formed(r) for _, r in rows.iterrows())


def test_a_student_s_ratios_divide_after_block_0_and_skip_checkpoints_without_it():
    """max/median over every token and structural/regular means, at boundary 1; a checkpoint diagnosed without
    boundary 1 (an older diagnostics file) is left out, not the end of the student's rows."""
    early = checkpoint(50, "pre-joint", "pre", 2.0)
    early["boundaries"] = early["boundaries"][:1]
    later = checkpoint(100, "pre-joint", "pre", 12.0, regular=4.0)
    later["boundaries"][1]["all"]["median"] = 2.0
    rows = formation_rows("s", {"diagnostics": [checkpoint(50, "post-joint", "post", 5.0), early, later]})
    assert list(rows["step"]) == [100]  # post-norm's checkpoints are not read, and do not end the reading
    assert rows["max_over_median"].iloc[0] == 18.0 and rows["structural_over_regular"].iloc[0] == 3.0
    assert "index" not in rows.columns


def test_a_teacher_snapshot_without_a_measure_reads_it_as_missing():
    """A probe written before a measure existed (no attention in its layers): that measure is NaN at no layer,
    the others are read."""
    probe = teacher_probe((100,))
    for entry in probe["snapshots"][0]["layers"]:
        del entry["attention_on_structural"]
    row = formation_rows("s", {"teacher_snapshots": probe}).iloc[0]
    assert math.isnan(row["attention_on_structural"]) and row["attention_on_structural_at"] is None
    assert row["max_over_median"] == 5.0


def test_a_trend_over_one_step_is_none_and_a_flat_trend_never_reaches():
    assert trend([100] * 6, [1.0, 1.0, 1.0, 1.0, 1.0, math.e]) is None  # no spread of steps: no line, no division by 0
    flat = reach(STEPS, [2.0] * 6, 20.0)
    assert flat == Reach(earliest=math.inf, latest=math.inf) and flat.within(3200) is False
    assert reach([100, 200], [1.0, 20.0], 20.0) == Reach(reached=200)  # exactly the threshold reaches it


def test_the_summary_keeps_the_study_s_order_of_scales_and_says_when_it_formed():
    rows = pd.concat([formation_rows("w128", BUNDLE), formation_rows("headline", BUNDLE)])
    table = summary(rows)
    assert list(table["scale"]) == ["w128", "w128", "headline", "headline"]
    grid = summary_grid(table)
    formed_at = grid.columns.index("formed at")
    assert [row[formed_at] for row in grid.rows[:2]] == ["100", "400"]


def test_every_snapshot_is_a_row_of_the_markdown_below_the_summary():
    rows = formation_rows("s", BUNDLE)
    text = markdown(rows, summary(rows))
    every = text.split("\n\n")[1].splitlines()
    assert every[0] == ("| scale | subject | updates | max/median RMS | structural/regular RMS | "
                        "max/median \\|scalar\\| | structural/regular \\|scalar\\| | attention on structural | "
                        "validation CE |")
    assert "| s | teacher | 400 | 40.00 | 40.00 | 400.00 | 80.00 | 0.500 | 3.6000 |" in every
    assert "| s | pre-joint (seed 1) | 100 | 30.00 | 10.00 | 50.00 | 4.00 | 0.200 | – |" in every


def test_the_figure_draws_each_subject_against_updates_beside_its_threshold(tmp_path, monkeypatch):
    import normgrow.paper.figures

    figures = []
    monkeypatch.setattr(normgrow.paper.figures, "save", lambda fig, path, **options: figures.append(fig) or [])
    draw(pd.concat([formation_rows("s", BUNDLE), formation_rows("t", {"teacher_snapshots": teacher_probe()})]),
         tmp_path / "f.png")
    panels = figures[0].axes
    assert [ax.get_title() for ax in panels] == ["teacher: max/median token RMS (strongest layer)",
                                                 "teacher: attention on position 0",
                                                 "pre-norm student: structural/regular RMS after block 0"]
    lines = [{line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}
             for ax in panels]
    assert lines[0]["s"] == ([100, 200, 400], [5.0, 10.0, 40.0]) and set(lines[0]) >= {"s", "t"}
    assert lines[1]["t"] == ([100, 200, 400], [0.1, 0.2, 0.5])
    assert lines[2]["s: pre-joint (seed 1)"] == ([50, 100], [2.0, 10.0])
    thresholds = [[line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] for ax in panels]
    assert thresholds == [[20.0], [0.3], [37 / 4]]
    assert [(ax.get_xscale(), ax.get_yscale()) for ax in panels] == [("log", "log"), ("log", "linear"),
                                                                    ("log", "log")]
    assert all(ax.get_xlabel() == "training updates" and ax.get_legend() is not None for ax in panels)


def test_formed_at_is_the_first_snapshot_that_formed_not_the_last():
    """The teacher forms at update 200 and stays formed at 400."""
    probe = {"snapshots": [{"step": s, "validation_ce": 4.0,
                            "layers": [layer(1, 2.0, attention), layer(2, massive, 0.05)]}
                           for s, massive, attention in ((100, 5.0, 0.1), (200, 30.0, 0.4), (400, 40.0, 0.5))]}
    table = summary(formation_rows("s", {"teacher_snapshots": probe}))
    assert table.set_index("subject").loc["teacher", "formed_at"] == 200
