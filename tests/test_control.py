"""The update-matched control (normgrow.paper.control): its plan from the kept selection, the effects' arithmetic
on a constructed table, the reading's rule, the conditional pooled interval and the power functions
(normgrow.paper.stats) against simulation; the rules' configs from the workflow itself."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, SNAKEMAKE

from normgrow.paper import control
from normgrow.paper.comparison import Estimate, Selection, conditional_pool, reading
from normgrow.paper.stats import parity_power, power_mean, seeds_for_power, t975

KEPT = REPO / "docs" / "results" / "comparison"
SELECTION = Selection((0.0025, 0.005, 0.01, 0.02, 0.04),
                      {"pre-joint": 0.01, "post-joint": 0.02, "pre-grow": 0.005, "post-grow": 0.02}, 0.02)


def test_the_plan_trains_every_cell_at_the_shared_lr_and_each_control_at_its_grow_cells_lr():
    assert control.plan(SELECTION) == {
        0.005: ["pre-grow", "pre-joint-matched", "pre-joint-longer"],
        0.01: ["pre-joint"],
        0.02: list(control.CELLS),
    }
    own = control.lrs(SELECTION, "own")
    assert own["pre-joint-matched"] == own["pre-joint-longer"] == 0.005
    assert own["post-joint-matched"] == own["post-joint-longer"] == 0.02
    assert set(control.lrs(SELECTION, "shared").values()) == {0.02}


def per_seed_frame(ce: dict[str, list[float]], teacher: str = "A", lr: float = 0.02) -> pd.DataFrame:
    return pd.DataFrame([{"teacher": teacher, "lr": lr, "seed": 200 + i, "cell": cell, "ce": value}
                         for cell, values in ce.items() for i, value in enumerate(values)])


def test_the_matched_interaction_and_the_update_part_add_up_to_the_interaction():
    ce = {"pre-joint": [4.0, 4.1], "post-joint": [4.2, 4.3], "pre-grow": [3.8, 3.9], "post-grow": [3.85, 3.9],
          "pre-joint-matched": [3.7, 3.75], "post-joint-matched": [3.8, 3.8],
          "pre-joint-longer": [3.6, 3.6], "post-joint-longer": [3.65, 3.7]}
    table = control.effects(reading(per_seed_frame(ce), control.lrs(SELECTION, "shared"), control.CELLS))
    assert table["delta_joint"].tolist() == pytest.approx([0.2, 0.2])
    assert table["delta_matched"].tolist() == pytest.approx([0.1, 0.05])
    assert table["matched_interaction"].tolist() == pytest.approx([0.05 - 0.1, 0.0 - 0.05])
    assert table["update_part"].tolist() == pytest.approx([0.1 - 0.2, 0.05 - 0.2])
    total = table["matched_interaction"] + table["update_part"]
    assert total.tolist() == pytest.approx(table["interaction"].tolist())
    assert table["longer_interaction"].tolist() == pytest.approx([0.05 - 0.05, 0.0 - 0.1])
    assert table["guard"].tolist() == pytest.approx([3.65 - 3.85, 3.7 - 3.9])


def estimate(low: float, high: float) -> Estimate:
    return Estimate((low + high) / 2, low, high, 8, 0.01)


@pytest.mark.parametrize(("matched", "update", "expected"), [
    ((-0.05, -0.01), (-0.02, 0.01), "growth per se"),
    ((-0.05, -0.01), (-0.03, -0.001), "growth and update count"),
    ((-0.03, 0.01), (-0.05, -0.02), "update count"),
    ((0.001, 0.03), (-0.01, 0.02), "growth opposes"),
    ((-0.03, 0.01), (-0.02, 0.01), "not decidable at this power"),
    ((-0.05, 0.0), (-0.02, 0.01), "not decidable at this power"),  # an interval that reaches 0 is not below it
    ((0.0, 0.03), (-0.01, 0.02), "not decidable at this power"),  # nor above it
])
def test_the_reading_follows_the_intervals_of_the_matched_interaction_and_the_update_part(matched, update, expected):
    assert control.reading_verdict(estimate(*matched), estimate(*update)) == expected


def test_final_ce_keeps_each_cells_last_phase_with_its_code():
    phases = pd.DataFrame({"run": ["pre-grow"] * 3 + ["post-joint-matched"] * 2 + ["other"],
                           "seed": [200.0, 200.0, 201.0, 200.0, 200.0, 200.0], "phase": [0, 1, 0, 0, 2, 5],
                           "ce": [4.0, 3.5, 3.9, 4.2, 3.7, 1.0], "code_digest": ["a", "b", "c", "d", "e", "f"]})
    final = control.final_ce(phases, 0.02)
    assert list(final.columns) == ["lr", "seed", "cell", "ce", "code_digest"]
    assert final.to_dict("records") == [
        {"lr": 0.02, "seed": 200, "cell": "pre-grow", "ce": 3.5, "code_digest": "b"},
        {"lr": 0.02, "seed": 201, "cell": "pre-grow", "ce": 3.9, "code_digest": "c"},
        {"lr": 0.02, "seed": 200, "cell": "post-joint-matched", "ce": 3.7, "code_digest": "e"}]
    assert final["seed"].dtype.kind == "i"  # seeds read as floats (a CSV column with a gap) name runs as integers


def test_the_estimates_table_has_one_spread_column_empty_for_the_pool():
    rng = np.random.default_rng(3)
    frame = pd.concat([per_seed_frame({cell: list(3 + 0.1 * rng.random(3)) for cell in cells}, teacher=t, lr=lr)
                       for t in ("A", "B") for lr, cells in control.plan(SELECTION).items()])
    table = control.estimates(frame, SELECTION, ["A", "B"])
    assert list(table.columns) == ["reading", "teacher", "effect", "estimate", "spread"]
    assert table[table["teacher"] == "pooled"]["spread"].isna().all()
    assert table[table["teacher"] != "pooled"]["spread"].notna().all()


def test_the_pooled_interval_is_the_fixed_effect_mean_with_t_at_the_pooled_degrees_of_freedom():
    a, b = Estimate(-0.04, 0, 0, 8, 0.01), Estimate(-0.02, 0, 0, 8, 0.02)
    pooled = conditional_pool([a, b])
    w = [1 / 0.01 ** 2, 1 / 0.02 ** 2]
    assert pooled.mean == pytest.approx((w[0] * -0.04 + w[1] * -0.02) / sum(w))
    assert pooled.high - pooled.mean == pytest.approx(t975(14) * (1 / sum(w)) ** 0.5)
    assert pooled.seeds == 16


def test_power_of_a_mean_equals_a_simulation():
    rng = np.random.default_rng(0)
    for n, effect, spread in [(8, 0.0332, 0.034), (4, 0.05, 0.03)]:
        x = rng.normal(effect, spread, (200_000, n))
        half = t975(n - 1) * x.std(axis=1, ddof=1) / np.sqrt(n)
        simulated = float((np.abs(x.mean(axis=1)) > half).mean())
        assert power_mean(effect, spread, n) == pytest.approx(simulated, abs=0.005)
    assert power_mean(0.0, 0.034, 8) == pytest.approx(0.05, rel=1e-9)  # no effect: the test's size, both tails
    assert seeds_for_power(0.0332, 0.034) == 11  # 10 seeds fall short of 80%
    assert seeds_for_power(1.0, 0.01) == 2  # the fewest a t-interval needs
    assert power_mean(0.0332, 0.034, 10) < 0.8 <= power_mean(0.0332, 0.034, 11)


def test_parity_power_of_a_true_tie_equals_a_simulation():
    rng = np.random.default_rng(1)
    for n, spread in [(16, 0.01), (8, 0.02)]:
        x = rng.normal(0.0, spread, (400_000, n))
        mean, half = x.mean(axis=1), t975(n - 1) * x.std(axis=1, ddof=1) / np.sqrt(n)
        simulated = float(((mean - half >= -0.01) & (mean + half <= 0.01)).mean())
        assert parity_power(0.01, spread, n) == pytest.approx(simulated, abs=0.003)


@pytest.mark.parametrize(("n", "margin", "df"), [
    (3, 0.03, None),  # few degrees of freedom: the small sample deviations carry much of the probability
    (2, 3 * 12.706 * 0.01 / 2 ** 0.5, None),  # a margin of three interval half-widths at the mean spread
    (4, 0.01, 12),  # the pooled interval's degrees of freedom (comparison: teachers × (seeds − 1))
])
def test_parity_power_equals_a_simulation_of_the_mean_and_the_sample_deviation(n, margin, df):
    """Sampled directly: the mean ~ N(0, σ²/n) and s² ~ σ²·χ²(df)/df, the interval t975(df)·s/√n."""
    rng, spread, size = np.random.default_rng(2), 0.01, 400_000
    dof = n - 1 if df is None else df
    mean = rng.normal(0.0, spread / n ** 0.5, size)
    half = t975(dof) * spread * np.sqrt(rng.chisquare(dof, size) / dof) / n ** 0.5
    simulated = float(((mean - half >= -margin) & (mean + half <= margin)).mean())
    assert parity_power(margin, spread, n, df) == pytest.approx(simulated, abs=0.003)


def test_the_control_configs_train_the_fresh_seeds_under_each_teacher_with_the_control_runs(tmp_path):
    """The rules' own configs (localrules that only write YAML, run for real from the kept selection): each set of
    runs under its teacher, on the fresh seeds, with the cells the plan puts at its LR and the control's runs."""
    comparison = yaml.safe_load((REPO / "configs" / "comparison.yaml").read_text())["comparison"]
    targets = [f"results/comparison/control/{t}/lr{lr:g}/config.yaml" for t in ("A", "B") for lr in (0.005, 0.02)]
    command = [SNAKEMAKE, "-s", str(REPO / "workflow" / "comparison.smk"),
               "--directory", str(tmp_path), "--cores", "1",
               "--config", f'comparison={{"tuning": "{KEPT / "tuning.csv"}"}}', "--", *targets]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((tmp_path / "results/comparison/selection.json").read_text()) == json.loads(
        (KEPT / "selection.json").read_text())
    for teacher in ("A", "B"):
        for lr, cells in ((0.005, ["pre-grow", "pre-joint-matched", "pre-joint-longer"]), (0.02, list(control.CELLS))):
            path = tmp_path / f"results/comparison/control/{teacher}/lr{lr:g}/config.yaml"
            config = yaml.safe_load(path.read_text())
            assert config["seeds"] == comparison["fresh_seeds"]
            assert config["build"] == cells
            assert config["train"]["lr"] == lr and config["train"]["warmup_fraction"] == comparison["warmup_fraction"]
            assert config["teacher"]["name"] == str(tmp_path / f"results/comparison/teachers/{teacher}.model")
            assert config["tokenizer"] == {"train": False}
            assert config["curricula"]["joint-matched"] == [{"active_blocks": 3}] * 3
            assert set(config["runs"]) == {c for c in cells if c in control.CONTROLS}


def test_the_readme_and_miniature_blocks_are_what_the_kept_control_gives():
    """Every number of the control in docs/miniature.md is regenerated from docs/results/control by
    tools/control.py (the command each block names); every kept row names its commit, code and teacher."""
    sys.path.insert(0, str(REPO / "tools"))
    import control as command
    import docs_block

    rows = pd.read_csv(REPO / "docs" / "results" / "control" / "per_seed.csv")
    assert rows[["commit", "code_digest", "teacher_ce"]].notna().all().all()
    for doc, part in ((REPO / "docs" / "miniature.md", "summary"), (REPO / "docs" / "miniature.md", "tables")):
        text = doc.read_text()
        _, start, end = docs_block.find(text, f"python tools/control.py --part {part}", str(doc))
        assert text[start:end].strip() == command.render(part).strip(), f"{doc.name}: rerun the block's command"
