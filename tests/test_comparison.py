"""The pre-registered comparison's rules (normgrow.paper.comparison) and the one parity rule
(normgrow.paper.claims.parity) on constructed numbers."""

import math
import re

import pandas as pd
import pytest

from normgrow.paper.claims import (
    ABSENT,
    AGREES,
    DISAGREES,
    INCONCLUSIVE,
    NOT_SHOWN,
    SHOWN,
    direction_verdict,
    parity,
)
from normgrow.paper.comparison import (
    CELLS,
    Estimate,
    Selection,
    comparison_markdown,
    conditional_pool,
    confirmatory,
    reading,
    select,
    summary_markdown,
    verdict,
)
from normgrow.paper.stats import effects


def tuning_frame(ce: dict[float, dict[str, list[float]]]) -> pd.DataFrame:
    """lr → cell → one final CE per seed (seeds 1, 2, ...)."""
    return pd.DataFrame([{"lr": lr, "seed": i + 1, "cell": cell, "ce": value}
                         for lr, cells in ce.items() for cell, values in cells.items()
                         for i, value in enumerate(values)])


def test_each_cell_takes_the_lr_of_its_lowest_mean_ce_and_the_lower_lr_on_a_tie():
    grid = {lr: {cell: [4.0, 4.0, 4.0] for cell in CELLS} for lr in (0.001, 0.01, 0.1)}
    grid[0.01]["pre-joint"] = [3.9, 3.9, 3.9]
    grid[0.1]["post-grow"] = [3.8, 3.9, 4.0]
    selection = select(tuning_frame(grid))
    assert selection.own == {"pre-joint": 0.01, "post-joint": 0.001, "pre-grow": 0.001, "post-grow": 0.1}
    assert selection.at_edge("post-grow") and selection.at_edge("post-joint") and not selection.at_edge("pre-joint")


def test_the_selection_is_read_from_the_file_the_select_checkpoint_wrote(tmp_path):
    """Selection.made_by: the checkpoint's `selection` output, read (as workflow/comparison.smk's input functions
    read it), and its plan: each cell at its own LR and all four at the shared LR."""
    from types import SimpleNamespace

    selection = Selection((0.005, 0.01, 0.02), {"pre-joint": 0.01, "post-joint": 0.02, "pre-grow": 0.005,
                                                "post-grow": 0.02}, 0.02)
    path = tmp_path / "selection.json"
    path.write_text(selection.to_json())
    checkpoint = SimpleNamespace(get=lambda: SimpleNamespace(output=SimpleNamespace(selection=str(path))))
    assert Selection.made_by(checkpoint) == selection
    assert selection.plan() == {0.005: ["pre-grow"], 0.01: ["pre-joint"], 0.02: list(CELLS)}


def test_the_shared_lr_is_the_one_whose_delta_joint_interval_lies_nearest_zero_not_a_wide_one_that_contains_it():
    grid = {lr: {cell: [4.0, 4.0, 4.0] for cell in CELLS} for lr in (0.001, 0.01, 0.1, 0.2)}
    grid[0.001]["post-joint"] = [3.5, 4.0, 4.6]     # Δ_joint's interval contains 0 but is wide
    grid[0.01]["post-joint"] = [4.010, 4.012, 4.014]  # a small, tight difference
    grid[0.1]["post-joint"] = [4.2, 4.2, 4.21]
    grid[0.2]["post-joint"] = [3.7, 3.7, 3.71]        # post-norm far ahead: far from parity on the other side
    assert select(tuning_frame(grid)).shared == 0.01


def test_a_tie_in_the_parity_bound_goes_to_the_lower_mean_joint_ce_as_in_the_calibration():
    """The shared LR by the calibration's rule (normgrow.paper.claims.nearest_parity): two LRs whose Δ_joint
    intervals reach equally far from 0, the one where pre- and post-norm joint end lower wins, the higher LR here."""
    grid = {lr: {cell: [4.0, 4.0, 4.0] for cell in CELLS} for lr in (0.01, 0.02, 0.04)}
    grid[0.01]["post-joint"] = [4.5, 4.5, 4.5]
    grid[0.02]["post-joint"], grid[0.04]["post-joint"] = [4.25, 4.25, 4.25], [3.75, 3.75, 3.75]  # both Δ 0.25
    grid[0.04]["pre-joint"] = [3.5, 3.5, 3.5]
    assert select(tuning_frame(grid)).shared == 0.04


def test_the_shared_lr_is_chosen_by_the_parity_bound_not_by_the_mean_nearest_zero():
    """A wide interval whose mean is exactly 0 loses to a tight one at +0.012: the point estimate alone (the
    rule before 2026-12-04) would favour the noisy setting."""
    grid = {lr: {cell: [4.0, 4.0, 4.0] for cell in CELLS} for lr in (0.001, 0.01)}
    grid[0.001]["post-joint"] = [3.5, 4.0, 4.5]       # Δ_joint mean 0, interval about ±1.2
    grid[0.01]["post-joint"] = [4.010, 4.012, 4.014]  # Δ_joint mean +0.012, interval about ±0.005
    assert select(tuning_frame(grid)).shared == 0.01


def test_the_plan_trains_each_cell_at_its_own_lr_and_all_four_at_the_shared_lr():
    selection = Selection((0.01, 0.02, 0.04), {"pre-joint": 0.01, "post-joint": 0.02, "pre-grow": 0.01,
                                               "post-grow": 0.04}, 0.02)
    assert selection.plan() == {0.01: ["pre-joint", "pre-grow"], 0.02: list(CELLS), 0.04: ["post-grow"]}


def test_a_reading_pairs_each_seed_across_its_cells_lrs():
    confirm = pd.DataFrame([{"lr": lr, "seed": seed, "cell": cell, "ce": 4 + lr + seed / 100}
                            for lr in (0.01, 0.02) for seed in (1, 2) for cell in CELLS])
    wide = reading(confirm, {"pre-joint": 0.01, "post-joint": 0.02, "pre-grow": 0.01, "post-grow": 0.02})
    table = effects(wide)
    assert table["delta_joint"].tolist() == pytest.approx([0.01, 0.01])
    assert table["interaction"].tolist() == pytest.approx([0.0, 0.0])


def test_a_reading_leaves_out_a_seed_that_lacks_a_cell_at_its_lr():
    confirm = pd.DataFrame([{"lr": 0.01, "seed": seed, "cell": cell, "ce": 4.0}
                            for seed in (1, 2, 3) for cell in CELLS if (seed, cell) != (3, "post-grow")])
    wide = reading(confirm, dict.fromkeys(CELLS, 0.01))
    assert wide.index.tolist() == [1, 2] and not wide.isna().any().any()


def test_pooling_two_teachers_is_a_fixed_effect_interval_with_t_at_the_pooled_degrees_of_freedom():
    from normgrow.paper.stats import t975
    estimate = conditional_pool([Estimate(-0.03, -0.05, -0.01, 8, 0.01), Estimate(-0.03, -0.05, -0.01, 8, 0.01)])
    assert estimate.mean == pytest.approx(-0.03) and estimate.seeds == 16
    assert estimate.high - estimate.low == pytest.approx(2 * t975(14) * 0.01 / math.sqrt(2))


def test_two_teachers_pooled_are_labelled_conditional_on_them_and_verdicts_are_given_per_teacher():
    def ce(seed: int, cell: str) -> float:
        return 4 + (0.01 if "post" in cell else 0) + (seed * 7 + len(cell) * 3) % 5 / 1000

    rows = [{"teacher": t, "lr": 0.02, "seed": seed, "cell": cell, "ce": ce(seed, cell)}
            for t in ("A", "B") for seed in range(8) for cell in CELLS]
    selection = Selection((0.02,), dict.fromkeys(CELLS, 0.02), 0.02)
    table = confirmatory(pd.DataFrame(rows), selection, ["A", "B"])
    text = comparison_markdown(table, selection, 0.01)
    assert "pooled (conditional on these teachers)" in text and "random effects" not in text
    assert "verdict, teacher A" in text and "verdict, teacher B" in text
    assert "probability" in summary_markdown(table, selection, 0.01)


@pytest.mark.parametrize(("low", "high", "seeds", "expected"), [
    (-0.005, 0.008, 3, SHOWN),
    (-0.005, 0.008, 2, NOT_SHOWN),      # fewer than three seeds never show parity
    (0.0014, 0.0014, 1, NOT_SHOWN),     # one seed: a point inside the margin is not parity
    (-0.0168, 0.0298, 6, NOT_SHOWN),    # an interval straddling the margin
    (-0.02, -0.005, 8, NOT_SHOWN),      # straddling −m alone: neither inside nor outside
    (0.05, 0.05, 1, NOT_SHOWN),         # one seed far outside the margin: too few seeds to show absence
    (-0.05, -0.03, 2, NOT_SHOWN),
    (0.04, 0.12, 3, ABSENT),
    (-0.12, -0.04, 3, ABSENT),
])
def test_the_parity_rule(low, high, seeds, expected):
    assert parity(low, high, seeds, 0.01) == expected


@pytest.mark.parametrize(("low", "high", "paper", "expected"), [
    (-0.062, 0.007, -0.0332, INCONCLUSIVE),   # an interaction interval that touches 0
    (-0.035, -0.007, -0.0332, AGREES),
    (0.005, 0.05, -0.0332, DISAGREES),
    (0.001, 0.05, 0.0044, AGREES),
])
def test_a_difference_agrees_only_when_its_interval_excludes_zero_on_the_papers_side(low, high, paper, expected):
    assert direction_verdict(low, high, paper) == expected


def test_a_verdict_says_whether_the_papers_value_lies_inside_the_interval():
    assert verdict("interaction", Estimate(-0.01, -0.02, -0.001, 8, 0.004), 0.01, -0.0332) == \
        "agrees; paper outside"
    assert verdict("delta_joint", Estimate(0.001, -0.004, 0.006, 8, 0.002), 0.01, 0.0004) == \
        "parity shown (±0.01); paper inside"


def test_the_confirmation_reads_each_teacher_apart_and_pools_them():
    rows = []
    for teacher, shift in (("A", 0.0), ("B", 0.02)):
        for seed in range(1, 5):
            for cell, ce in zip(CELLS, (4.0, 4.0 + shift + (-1) ** seed / 1000, 4.1, 4.05 + seed / 1000), strict=True):
                rows.append({"teacher": teacher, "lr": 0.01, "seed": seed, "cell": cell, "ce": ce})
    table = confirmatory(pd.DataFrame(rows), Selection((0.01,), dict.fromkeys(CELLS, 0.01), 0.01), ["A", "B"])
    joint = table[(table["reading"] == "own") & (table["effect"] == "delta_joint")].set_index("teacher")["estimate"]
    assert joint["A"].mean == pytest.approx(0) and joint["B"].mean == pytest.approx(0.02)
    assert joint["pooled"].seeds == 8


def test_the_readme_and_miniature_blocks_are_what_the_kept_results_give():
    """Every number of the comparison in README.md and docs/miniature.md is regenerated from the result files
    kept in docs/results/comparison by tools/comparison.py (the command each block names)."""
    import sys

    from conftest import REPO
    sys.path.insert(0, str(REPO / "tools"))
    import comparison as command
    import docs_block

    for part, doc in (("summary", REPO / "docs" / "miniature.md"), ("tables", REPO / "docs" / "miniature.md")):
        text = doc.read_text()
        _, start, end = docs_block.find(text, f"python tools/comparison.py --part {part}", str(doc))
        assert text[start:end].strip() == command.render(part).strip(), f"{doc.name}: rerun the block's command"


def test_the_confirmation_alone_selects_from_the_kept_tuning_as_the_tuning_did(tmp_path):
    """comparison.tuning names a kept tuning: the select rule makes the selection from its per-seed final CE
    (no tuning run in the DAG), and from docs/results/comparison/tuning.csv it is the kept selection."""
    import json
    import subprocess

    from conftest import REPO, SNAKEMAKE
    kept = REPO / "docs" / "results" / "comparison"
    command = [SNAKEMAKE, "-s", str(REPO / "workflow" / "comparison.smk"),
               "--directory", str(tmp_path), "--cores", "1",
               "--config", f'comparison={{"tuning": "{kept / "tuning.csv"}"}}']
    dry = subprocess.run([*command, "-n"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "checkpoint select:" in dry.stdout and "tuning/lr" not in dry.stdout
    run = subprocess.run([*command, "--", "results/comparison/selection.json"], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    selection = tmp_path / "results" / "comparison" / "selection.json"
    assert json.loads(selection.read_text()) == json.loads((kept / "selection.json").read_text())


def test_the_tuning_and_each_confirmation_train_their_own_seeds_under_their_own_teacher(tmp_path):
    """The DAG workflow/comparison.smk builds (normgrow.paper.comparison's protocol, configs/comparison.yaml):
    the tuning trains the tuning seeds under the first teacher, each confirmation the fresh seeds under its
    own, each teacher pretrained from its own seed; every set of runs gets the common overrides, its teacher
    (and its tokenizer), its LR and the pre-registered warm-up. From a kept tuning: no tuning run is trained
    for the selection, which the confirmation's configs read."""
    import os

    import yaml
    from conftest import REPO
    from test_workflow import job_fields

    c = yaml.safe_load((REPO / "configs" / "comparison.yaml").read_text())["comparison"]
    kept = tmp_path / "kept.yaml"
    kept.write_text("comparison: {tuning: docs/results/comparison/tuning.csv}\n")
    out = "results/comparison"
    targets = [f"{out}/teachers/A/config.yaml", f"{out}/teachers/B/config.yaml", f"{out}/tuning/lr0.01.phases.csv",
               f"{out}/confirm/A/lr0.02.phases.csv", f"{out}/confirm/B/lr0.02.phases.csv"]
    jobs = job_fields(tmp_path, [kept], targets, snakefile=REPO / "workflow" / "comparison.smk")
    by_rule = {}  # rule → its first wildcard's value (lr, teacher or where) → job
    for job in jobs:
        by_rule.setdefault(job["rule"], {})[next(iter(job["wildcards"].values()), None)] = job

    def teacher(name: str) -> str:
        return os.path.join(os.path.realpath(tmp_path), out, "teachers", f"{name}.model")

    assert by_rule["tuning_config"]["0.01"]["params"]["overrides"] == {
        **c["common"], "teacher": {"name": teacher("A")}, "tokenizer": {"train": False},
        "train": {"lr": 0.01, "warmup_fraction": c["warmup_fraction"]}, "seeds": c["tuning_seeds"],
        "build": list(CELLS), "diagnostics": {"runs": []}}
    assert c["tuning_seeds"] != c["fresh_seeds"] and c["teachers"]["A"] != c["teachers"]["B"]
    for name in ("A", "B"):
        confirm = [job for job in by_rule["confirm_config"].values() if job["wildcards"]["teacher"] == name]
        assert len(confirm) == 1 and confirm[0]["params"]["seeds"] == c["fresh_seeds"], name
        assert by_rule["teacher_config"][name]["params"]["overrides"] == {
            **c["common"], "teacher": {"pretrain": {"seed": c["teachers"][name]}}}, name
    runs = {where: job["input"] for where, job in by_rule["runs"].items()}
    assert runs == {where: [f"{out}/{where}/config.yaml", f"{out}/teachers/{name}.model"]
                    for where, name in (("tuning/lr0.01", "A"), ("confirm/A/lr0.02", "A"), ("confirm/B/lr0.02", "B"))}
    assert list(by_rule["select"]) == [None]  # the selection, from the kept tuning: the only runs are the targets'


def test_a_confirmation_writes_its_own_teacher_and_the_fresh_seeds_into_its_runs_config(tmp_path):
    """The config.yaml the nested workflow of a confirmation under the second teacher reads (the confirm_config
    rule run for real, on the kept selection): teacher B's directory (not the tuning's A), the fresh seeds, the
    cells of its LR in the plan (all four at the shared LR), the LR, the warm-up and the common overrides."""
    import json
    import os
    import shutil
    import subprocess

    import yaml
    from conftest import REPO, SNAKEMAKE

    c = yaml.safe_load((REPO / "configs" / "comparison.yaml").read_text())["comparison"]
    kept = REPO / "docs" / "results" / "comparison"
    out = tmp_path / "results" / "comparison"
    out.mkdir(parents=True)
    shutil.copy(kept / "selection.json", out)  # up to date: the select rule does not run
    shared = json.loads((kept / "selection.json").read_text())["shared"]
    target = f"results/comparison/confirm/B/lr{shared:g}/config.yaml"
    snakemake = [SNAKEMAKE, "-s", str(REPO / "workflow" / "comparison.smk")]
    run = subprocess.run([*snakemake, "--directory", str(tmp_path), "--cores", "1", "--config",
                          f'comparison={{"tuning": "{kept / "tuning.csv"}"}}', "--", target],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "checkpoint select:" not in run.stdout + run.stderr and "rule confirm_config:" in run.stdout + run.stderr
    assert yaml.safe_load((tmp_path / target).read_text()) == {
        **c["common"], "teacher": {"name": os.path.join(os.path.realpath(out), "teachers", "B.model")},
        "tokenizer": {"train": False}, "train": {"lr": shared, "warmup_fraction": c["warmup_fraction"]},
        "seeds": c["fresh_seeds"], "build": list(CELLS), "diagnostics": {"runs": []}}


def test_command_line_numbers_reach_the_comparison_as_numbers(tmp_path):
    """`--config 'comparison={"lrs": [...]}'`: Snakemake hands on '0.01'; the comparison reads it as a YAML file
    does (normgrow.design.config.command_line_config) and plans the tuning at each LR."""
    import subprocess

    from conftest import REPO, SNAKEMAKE
    command = [SNAKEMAKE, "-s", str(REPO / "workflow" / "comparison.smk"),
               "--directory", str(tmp_path), "-n", "--config", 'comparison={"lrs": [0.01, 0.03]}']
    dry = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    planned = set(re.findall(r"results/comparison/tuning/(lr\S+?)\.check\.json", dry.stdout))
    assert planned == {"lr0.01", "lr0.03"}, dry.stdout
