"""benchmarks/own_best.py: pre-norm's runs from one finished run, post-norm's from another, paired by
seed, their last phase's CE."""

import importlib.util

import pandas as pd
import pytest
from conftest import REPO

spec = importlib.util.spec_from_file_location("own_best", REPO / "benchmarks" / "own_best.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def finished_run(root, ces: dict[str, list[float]], seeds=(1, 2, 3)):
    """A workdir whose phases.csv holds, per run and seed, a first phase at CE 9 and a last at `ces`."""
    rows = [{"run": run, "seed": seed, "phase": phase, "ce": 9.0 if phase == 0 else values[i]}
            for run, values in ces.items() for i, seed in enumerate(seeds) for phase in (1, 0)]
    (root / "results" / "metrics").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(root / "results" / "metrics" / "phases.csv", index=False)
    return root


def test_each_placement_is_read_from_its_own_run_and_paired_by_seed(tmp_path):
    pre = finished_run(tmp_path / "a", {"pre-joint": [4.0, 4.1, 4.2], "pre-grow": [3.8, 3.9, 4.0],
                                        "post-joint": [0.0] * 3, "post-grow": [0.0] * 3})
    post = finished_run(tmp_path / "b", {"pre-joint": [0.0] * 3, "pre-grow": [0.0] * 3,
                                         "post-joint": [4.3, 4.1, 4.3], "post-grow": [3.7, 3.8, 3.9]},
                        seeds=(3, 2, 1))
    result = bench.own_best(pre, post)
    # seed 1: joint 4.3 − 4.0, grow 3.9 − 3.8; seed 2: 0, −0.1; seed 3: 0.3 − 0.2, 3.7 − 4.0
    assert result["Δ_joint"][0] == pytest.approx((0.3 + 0.0 + 0.1) / 3)
    assert result["Δ_grow"][0] == pytest.approx((0.1 - 0.1 - 0.3) / 3)
    assert result["interaction"][0] == pytest.approx(result["Δ_grow"][0] - result["Δ_joint"][0])
    assert result["Δ_joint"][1] < result["Δ_joint"][0] < result["Δ_joint"][2]


def test_only_the_seeds_both_runs_trained_are_paired(tmp_path):
    """Seeds 1–3 in the pre-norm run, 2–4 in the post-norm one: seeds 2 and 3 are paired, 1 and 4 left out."""
    pre = finished_run(tmp_path / "a", {"pre-joint": [4.0, 4.1, 4.2], "pre-grow": [3.8, 3.9, 4.0],
                                        "post-joint": [0.0] * 3, "post-grow": [0.0] * 3})
    post = finished_run(tmp_path / "b", {"pre-joint": [0.0] * 3, "pre-grow": [0.0] * 3,
                                         "post-joint": [4.3, 4.4, 4.5], "post-grow": [3.7, 3.6, 3.5]},
                        seeds=(2, 3, 4))
    result = bench.own_best(pre, post)
    # seed 2: joint 4.3 − 4.1, grow 3.7 − 3.9; seed 3: joint 4.4 − 4.2, grow 3.6 − 4.0
    assert result["Δ_joint"][0] == pytest.approx(0.2)
    assert result["Δ_grow"][0] == pytest.approx((-0.2 - 0.4) / 2)
    assert result["interaction"][0] == pytest.approx((-0.4 - 0.6) / 2)
    with pytest.raises(SystemExit, match="no seed in both"):
        bench.own_best(pre, finished_run(tmp_path / "c", {"post-joint": [4.0], "post-grow": [3.0]}, seeds=(9,)))
