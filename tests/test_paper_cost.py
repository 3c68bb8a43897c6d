"""benchmarks/paper_cost.py: the three ways of counting a document's cost (full rows, padded to the
micro-batch's longest, padding-free), and the planning distribution's mean being the paper's."""

import sys

import numpy as np
import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))  # as when run as a script: its helpers beside it
import paper_cost  # noqa: E402


def test_each_way_counts_its_own_tokens_and_attention():
    ways = paper_cost.per_document(np.array([1, 3, 2, 2, 5]), micro_batch=2, max_length=8)
    # micro-batches [1, 3] and [2, 2]; the fifth document makes no full micro-batch
    assert ways["full rows"] == paper_cost.PerDocument(8.0, 36.0)
    assert ways["padded"].tokens == 2.5 and ways["padded"].attention == (6 + 3) / 2  # rows of 3 and of 2
    assert ways["padding-free"].tokens == 2.0 and ways["padding-free"].attention == (1 + 6 + 3 + 3) / 4


@pytest.mark.parametrize("sigma", [0.75, 1.0, 1.25])
def test_the_planned_lengths_have_the_papers_mean_under_the_cap(sigma):
    lengths = paper_cost.planned_lengths(sigma, 400_000, cap=8192)
    assert lengths.max() <= 8192 and lengths.min() >= 1
    assert lengths.mean() == pytest.approx(paper_cost.PAPER_TOKENS_PER_DOCUMENT, rel=0.01)


def test_padding_costs_more_the_wider_the_lengths_spread():
    padded = [paper_cost.per_document(paper_cost.planned_lengths(s, 100_000, 8192), 8, 8192)["padded"].tokens
              for s in (0.5, 1.0, 1.5)]
    assert padded == sorted(padded) and padded[0] > paper_cost.PAPER_TOKENS_PER_DOCUMENT
