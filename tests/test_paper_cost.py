"""benchmarks/paper_cost.py: the DAG's FLOPs alone and grouped, counted by normgrow.cluster.budget's
phases and jobs (the counts themselves: tests/test_budget.py)."""

import sys

import pytest
from conftest import REPO
from transformers import AutoConfig

sys.path.insert(0, str(REPO / "benchmarks"))  # as when run as a script
import paper_cost  # noqa: E402


def test_grouping_saves_the_teachers_passes_on_full_rows():
    """Groups of ≤ 64 pay 7 teacher passes instead of 18: 0.66× the FLOPs on full rows
    (docs/performance.md, the grouping block)."""
    config = paper_cost.paper_config()
    full = paper_cost.PerDocument(8192.0, 8192 * 8193 / 2)
    flops = paper_cost.dag_flops(config, AutoConfig.from_pretrained(REPO / "configs" / "teachers" /
                                                                          "qwen3-8b-base"), {"full rows": full}, 64)
    assert config["data"]["max_length"] == 8192
    assert flops["full rows"]["grouped"] / flops["full rows"]["alone"] == pytest.approx(0.66, abs=0.005)
    assert flops["full rows"]["alone"] / 1e18 == pytest.approx(15_303, rel=1e-4)
