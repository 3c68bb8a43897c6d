"""The distillation objective (docs/definitions.md §2) and its loss positions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import yaml
from conftest import REPO, student_logits

from normgrow.model.student import BlockStackStudent
from normgrow.paper.reference import paper_reference
from normgrow.train.data import collate
from normgrow.train.forward import causal_lm_logits, positions_and_labels
from normgrow.train.objective import Objective, loss_positions, next_token_labels


def reference_terms(student: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor,
                    alpha: float, gamma: float, tau: float) -> dict[str, float]:
    """Position by position, in float64, straight from the formula."""
    kd_sum = ce_sum = 0.0
    n = student.shape[0]
    for i in range(n):
        s, t = student[i].double(), teacher[i].double()
        p_t = torch.softmax(t / tau, -1)
        kd_sum += float((p_t * (torch.log(p_t) - torch.log_softmax(s / tau, -1))).sum())
        ce_sum += float(-torch.log_softmax(s, -1)[labels[i]])
    kd, ce = kd_sum / n, ce_sum / n
    return {"kd": kd, "ce": ce, "total": alpha * tau**2 * kd + gamma * ce}


@pytest.mark.parametrize("tau", [1.0, 2.0])
def test_objective_matches_reference(tau):
    generator = torch.Generator().manual_seed(0)
    student = torch.randn(11, 17, generator=generator) * 3
    teacher = torch.randn(11, 17, generator=generator) * 3
    labels = torch.randint(0, 17, (11,), generator=generator)
    objective = Objective(alpha=0.4, gamma=1.3, temperature=tau)
    got = objective(student, teacher, labels)
    want = reference_terms(student, teacher, labels, 0.4, 1.3, tau)
    for key in ("total", "ce", "kd"):
        assert float(got[key]) == pytest.approx(want[key], rel=1e-5, abs=1e-6), key


def test_the_objective_s_defaults_and_the_embedded_default_s_are_the_papers():
    """Objective() and config.yaml's `objective` both give the paper's α, γ and τ (its Table A1, as the
    reference file has it)."""
    paper = paper_reference()["tableA1"]
    papers = Objective(alpha=paper["α (KD weight)"], gamma=paper["γ (CE weight)"], temperature=paper["τ (temperature)"])
    assert Objective() == papers == Objective(**yaml.safe_load((REPO / "config.yaml").read_text())["objective"])


def test_kd_of_identical_logits_is_zero():
    logits = torch.randn(5, 9, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1, 2, 3, 4])
    terms = Objective()(logits, logits.clone(), labels)
    assert float(terms["kd"]) == pytest.approx(0.0, abs=1e-6)
    assert float(terms["total"]) == pytest.approx(0.3 * float(terms["ce"]), rel=1e-6)
    assert float(terms["kd"]) >= 0


def test_kd_direction_is_teacher_to_student():
    """KL(q_teacher ‖ q_student), not the reverse."""
    student = torch.tensor([[2.0, 0.0, -1.0]])
    teacher = torch.tensor([[0.0, 3.0, 0.0]])
    p_s, p_t = torch.softmax(student, -1), torch.softmax(teacher, -1)
    forward = float((p_t * (p_t.log() - p_s.log())).sum())
    reverse = float((p_s * (p_s.log() - p_t.log())).sum())
    assert abs(forward - reverse) > 0.1
    kd = float(Objective()(student, teacher, torch.tensor([0]))["kd"])
    assert kd == pytest.approx(forward, rel=1e-5)


def test_kd_soft_is_the_soft_cross_entropy():
    """KD soft = −Σ q_teacher log q_student = KL + H(teacher): with identical uniform logits over V
    classes it is log V (KL 0); for a one-hot-like teacher it is the student's CE on the teacher's class."""
    uniform = torch.zeros(2, 8)
    terms = Objective()(uniform, uniform.clone(), torch.tensor([0, 1]))
    assert float(terms["kd_soft"]) == pytest.approx(math.log(8), rel=1e-6)
    assert float(terms["kd"]) == pytest.approx(0.0, abs=1e-7)
    student = torch.tensor([[2.0, 0.0, -1.0]])
    teacher = torch.tensor([[0.0, 60.0, 0.0]])  # all its mass on class 1
    got = Objective()(student, teacher, torch.tensor([0]))
    assert float(got["kd_soft"]) == pytest.approx(-float(torch.log_softmax(student, -1)[0, 1]), rel=1e-5)
    entropy = -float((torch.softmax(teacher, -1) * torch.log_softmax(teacher, -1)).sum())
    assert float(got["kd_soft"]) == pytest.approx(float(got["kd"]) + entropy, rel=1e-5)


def test_loss_positions_right_padded():
    lengths = [5, 3, 1, 6]
    mask = torch.zeros(4, 6, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    positions = loss_positions(mask)
    assert positions.dtype == torch.bool
    for row, n in enumerate(lengths):
        expected = [t < n - 1 for t in range(6)]
        assert positions[row].tolist() == expected
    assert not positions[:, -1].any()


def test_next_token_labels():
    ids = torch.tensor([[10, 11, 12, 13], [20, 21, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    positions = loss_positions(mask)
    assert next_token_labels(ids, positions).tolist() == [11, 12, 13, 21]


def test_padding_is_excluded_from_the_loss(teacher):
    """A padded batch's loss equals the token-weighted mean of per-document unpadded losses, and
    does not depend on the padding token id."""
    student = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0).eval()
    rng = np.random.default_rng(4)
    docs = [rng.integers(1, 64, size=n) for n in (9, 2, 6, 4)]
    objective = Objective(alpha=0.6, gamma=0.5, temperature=2.0)

    def loss(batch):
        positions, labels = positions_and_labels(batch)
        with torch.no_grad():
            return objective(student_logits(student, batch, positions),
                             causal_lm_logits(teacher, batch, positions), labels)

    padded = {k: float(v) for k, v in loss(collate(docs, pad_id=0)).items()}
    sums = dict.fromkeys(("total", "ce", "kd"), 0.0)
    count = 0
    for doc in docs:
        ids = torch.from_numpy(doc).long().unsqueeze(0)
        with torch.no_grad():
            s = student.lm_head(student(ids, torch.ones_like(ids)))[0, :-1]
            t = teacher(input_ids=ids).logits[0, :-1]
        terms = reference_terms(s, t, ids[0, 1:], 0.6, 0.5, 2.0)
        for key in sums:
            sums[key] += terms[key] * (len(doc) - 1)
        count += len(doc) - 1
    for key in sums:
        assert padded[key] == pytest.approx(sums[key] / count, rel=1e-5, abs=1e-6), key

    other = {k: float(v) for k, v in loss(collate(docs, pad_id=17)).items()}
    for key in padded:
        assert other[key] == pytest.approx(padded[key], rel=1e-6, abs=1e-7), key
    assert math.isfinite(padded["total"])


def test_evaluation_is_the_objective_over_every_loss_position(teacher):
    """Validation CE, KD and KD soft are means over the loss positions of all batches (token-weighted,
    right padding excluded): the objective on full logits at those positions, batch by batch."""
    from normgrow.train.evaluate import evaluate_students

    student = BlockStackStudent.from_teacher(teacher, "post", 2, 1, seed=0)
    rng = np.random.default_rng(5)
    batches = [collate([rng.integers(1, 64, size=n) for n in lengths], pad_id=0) for lengths in ((9, 2, 6), (3, 7))]
    objective = Objective(alpha=0.6, gamma=0.5, temperature=2.0)
    sums, count = dict.fromkeys(("ce", "kd", "kd_soft"), 0.0), 0
    for batch in batches:
        positions, labels = positions_and_labels(batch)
        with torch.no_grad():
            terms = objective(student_logits(student, batch, positions), causal_lm_logits(teacher, batch, positions),
                              labels)
        for key in sums:
            sums[key] += float(terms[key]) * len(labels)
        count += len(labels)
    assert count < sum(batch.tokens for batch in batches)  # loss positions are fewer than tokens
    [got] = evaluate_students([student], [objective], teacher, batches, chunk=5)
    assert got["positions"] == count
    for key in sums:
        assert got[key] == pytest.approx(sums[key] / count, rel=1e-5), key
    assert got["ppl"] == pytest.approx(math.exp(sums["ce"] / count), rel=1e-5)
    assert student.training  # evaluation restores the training mode
