"""Diagnostics on inputs with known answers: kurtosis, angular distance, RMS, token types, removal."""

import math

import numpy as np
import pytest
import torch
from conftest import student_logits

from normgrow.model.student import BlockStackStudent
from normgrow.train.data import collate
from normgrow.train.diagnostics import (
    angular_distance,
    attention_on_structural,
    diagnose,
    kurtosis,
    per_token_rms,
    rms_stats,
    scalar_outlier,
    scalar_structural_over_regular,
    structural_mask,
)
from normgrow.train.forward import positions_and_labels


def test_kurtosis_of_known_samples():
    # two-point ±1: E[x⁴]/σ⁴ = 1
    assert kurtosis(torch.tensor([-1.0, 1.0, -1.0, 1.0])) == pytest.approx(1.0)
    # uniform on many points: 9/5
    assert kurtosis(torch.linspace(-1, 1, 200001)) == pytest.approx(1.8, rel=1e-3)
    # normal: 3
    assert kurtosis(torch.randn(400000, generator=torch.Generator().manual_seed(0))) == pytest.approx(3.0, abs=0.05)
    # one outlier among n−1 zeros: (n−1)(n²−3n+3)/(n−1)² ... = n − 2 + 1/(n−1) for the population moments
    n = 100
    x = torch.zeros(n)
    x[0] = 1.0
    assert kurtosis(x) == pytest.approx(n - 2 + 1 / (n - 1))
    assert math.isnan(kurtosis(torch.ones(5)))


def test_angular_distance_of_known_vectors():
    mask = torch.ones(1, 3, dtype=torch.long)
    h_in = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]]])
    h_out = torch.tensor([[[3.0, 0.0], [0.0, 1.0], [0.0, -1.0]]])
    # same direction 0, orthogonal 1/2, opposite 1
    assert angular_distance(h_in, h_out, mask) == pytest.approx((0 + 0.5 + 1) / 3)
    # a padded position is ignored
    mask[0, 2] = 0
    assert angular_distance(h_in, h_out, mask) == pytest.approx(0.25)


def test_per_token_rms_and_stats_skip_padding():
    h = torch.tensor([[[3.0, 4.0], [1.0, 1.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    rms = per_token_rms(h, mask)
    torch.testing.assert_close(rms, torch.tensor([math.sqrt(12.5), 1.0]))
    stats = rms_stats(rms)
    assert stats["max"] == pytest.approx(math.sqrt(12.5))
    assert stats["std"] == pytest.approx(np.std([math.sqrt(12.5), 1.0]))
    assert stats["count"] == 2


def test_one_outlier_dimension_is_found_as_a_scalar_where_the_token_rms_dilutes_it():
    """Sun et al.'s massive activation is one scalar: width 64, one dimension of one token at 100× every other
    |activation|. The token's RMS dilutes it to sqrt((63 + 100²)/64) ≈ 12.5× the median token's; the scalar
    measure finds 100× the median |activation|, its dimension and its position. A larger value in padding
    never enters."""
    h = torch.ones(2, 5, 64)
    h[1, 3, 17] = -100.0
    h[0, 4, 2] = 1000.0
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    rms = per_token_rms(h, mask)
    assert float(rms.max() / rms.median()) == pytest.approx(math.sqrt((63 + 100**2) / 64))
    assert scalar_outlier(h, mask) == {"scalar_max_over_median": 100.0, "scalar_max": 100.0, "scalar_median": 1.0,
                                       "scalar_dimension": 17, "scalar_position": 3}


def test_structural_over_regular_scalar_compares_each_token_s_largest_activation():
    """Every |activation| 1 but one dimension of each document's first token (structural) at 50 and at 10: the
    structural tokens' largest scalars average 30, the regular ones' 1; a larger value in padding never
    enters, and a regular token's RMS would dilute neither mean."""
    h = torch.ones(2, 4, 64)
    h[0, 0, 3], h[1, 0, 9] = 50.0, -10.0
    h[0, 3, 1] = 1000.0  # padding
    batch = collate([np.array([0, 5, 6]), np.array([0, 7, 8, 9])], pad_id=0)
    structural = structural_mask(batch, special_ids=[0])
    assert scalar_structural_over_regular(h, batch.attention_mask, structural) == pytest.approx(30.0)


def test_attention_on_structural_keys_of_known_weights():
    """Uniform causal attention puts 1/(q + 1) on position 0 from query q > 0; position 0's own query and the
    padding's are not counted."""
    batch = collate([np.array([0, 5, 6, 7]), np.array([0, 7])], pad_id=0)
    weights = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5)[:, None]
    weights = weights.expand(2, 3, 4, 4)  # 2 documents, 3 heads
    structural = structural_mask(batch, special_ids=[0])
    expected = (1 / 2 + 1 / 3 + 1 / 4 + 1 / 2) / 4
    assert attention_on_structural(weights, structural, batch.attention_mask) == pytest.approx(expected)


def test_the_student_s_attention_on_structural_tokens_is_measured_per_block(teacher):
    """With every query zeroed, each of the student's layers attends uniformly: every block's attention on
    position 0 is the exact uniform value, reported after the block (boundaries 1, 2), not on the embedding's
    boundary 0; the student's own attention kernel is restored after the eager forward."""
    student = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0)
    with torch.no_grad():
        for block in student.blocks:
            for layer in block:
                layer.self_attn.q_proj.weight.zero_()
    batch = collate([np.arange(1, 9), np.arange(3, 8)], pad_id=0)
    report = diagnose(student, batch, special_ids=[0])
    expected = float(torch.tensor([1 / (q + 1) for n in (8, 5) for q in range(1, n)]).mean())
    assert [b["all"].get("attention_on_structural") for b in report["boundaries"]] == [
        None, pytest.approx(expected, rel=1e-5), pytest.approx(expected, rel=1e-5)]
    assert student.config._attn_implementation == "sdpa"
    assert all("scalar_structural_over_regular" in b["all"] for b in report["boundaries"])


def test_structural_tokens_are_special_ids_and_first_position():
    batch = collate([np.array([5, 6, 0]), np.array([7, 0, 8, 9])], pad_id=0)
    mask = structural_mask(batch, special_ids=[0])
    # row 0: first position, boundary token; padding (col 3) excluded
    assert mask.tolist() == [[True, False, True, False], [True, True, False, False]]


def test_identity_block_has_zero_removal_effect(teacher):
    student = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0)
    # zero the output projections of block 1: in pre-norm it then adds nothing to the residual stream
    with torch.no_grad():
        for layer in student.blocks[1]:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    batch = collate([np.arange(1, 9), np.arange(3, 8)], pad_id=0)
    report = diagnose(student, batch, special_ids=[0])
    block1 = report["blocks"][1]
    assert block1["delta_ce"] == pytest.approx(0.0, abs=1e-6)
    assert block1["angular_distance"] == pytest.approx(0.0, abs=1e-4)
    assert report["blocks"][0]["angular_distance"] > 0.01
    assert len(report["boundaries"]) == 3
    # boundary statistics count only real tokens
    assert report["boundaries"][0]["all"]["count"] == 13
    # the largest single activation is reported with the statistics of all real tokens, not per token set
    assert {"scalar_max_over_median", "scalar_dimension", "scalar_position"} <= set(report["boundaries"][0]["all"])
    assert "scalar_max" not in report["boundaries"][0]["structural"]


def test_removing_a_block_that_helps_raises_the_ce_by_its_exact_effect(teacher):
    """ΔCE = CE(block bypassed) − CE(full): positive for a block trained on the batch, and equal to
    the CE of the student without its last block (pre-norm: the final norm follows the last active
    layer either way) minus the full student's."""
    torch.manual_seed(0)
    student = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0)
    batch = collate([np.arange(1, 9), np.arange(3, 8)], pad_id=0)
    positions, labels = positions_and_labels(batch)
    student.set_trainable([1])
    optimizer = torch.optim.Adam([p for p in student.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(30):  # block 1 (with the head) learns this batch
        loss = torch.nn.functional.cross_entropy(student_logits(student, batch, positions), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def ce(active: int) -> float:
        student.active_blocks = active
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(student_logits(student, batch, positions), labels))

    expected = ce(1) - ce(2)
    student.active_blocks = 2
    delta = diagnose(student, batch, special_ids=[0])["blocks"][1]["delta_ce"]
    assert expected > 0.3
    assert delta == pytest.approx(expected, rel=1e-5)


def test_boundaries_are_the_residual_stream_between_blocks(teacher):
    student = BlockStackStudent.from_teacher(teacher, "post", 3, 1, seed=0)
    student.active_blocks = 2
    batch = collate([np.arange(1, 7)], pad_id=0)
    report = diagnose(student, batch, special_ids=[0])
    assert report["active_blocks"] == 2 and len(report["boundaries"]) == 3 and len(report["blocks"]) == 2
    # post-norm: every boundary is the output of an RMSNorm with unit weights → per-token RMS ≈ 1
    for b in report["boundaries"][1:]:
        assert b["all"]["mean"] == pytest.approx(1.0, abs=1e-3)
