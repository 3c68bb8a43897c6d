"""The chunked, head-fused objective equals the naive full-logits objective: values and gradients."""

import pytest
import torch

from normgrow.train.objective import Objective, fused_objective


@pytest.mark.parametrize(("tau", "chunk"), [(1.0, 7), (2.0, 5), (1.0, 64)])
def test_fused_equals_naive(tau, chunk):
    g = torch.Generator().manual_seed(0)
    n, h, h_t, v = 23, 16, 12, 50
    hidden = torch.randn(n, h, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(v, h, generator=g, dtype=torch.float64, requires_grad=True)
    teacher_hidden = torch.randn(n, h_t, generator=g, dtype=torch.float64)
    teacher_weight = torch.randn(v, h_t, generator=g, dtype=torch.float64)
    labels = torch.randint(0, v, (n,), generator=g)
    objective = Objective(alpha=0.6, gamma=0.4, temperature=tau)

    naive = objective(hidden @ weight.T, teacher_hidden @ teacher_weight.T, labels)
    naive["total"].backward()
    want_h, want_w = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None

    fused = fused_objective(objective, hidden, weight, teacher_hidden, teacher_weight, labels, chunk=chunk)
    (3.0 * fused["total"]).backward()  # a non-unit upstream gradient is applied
    for key in ("total", "ce", "kd", "kd_soft"):
        torch.testing.assert_close(fused[key].double(), naive[key].double(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(hidden.grad, 3.0 * want_h, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(weight.grad, (3.0 * want_w), rtol=1e-5, atol=1e-7)


def test_fused_without_head_gradient():
    hidden = torch.randn(9, 4, requires_grad=True)
    weight = torch.randn(11, 4)
    out = fused_objective(Objective(), hidden, weight, torch.randn(9, 3), torch.randn(11, 3),
                          torch.randint(0, 11, (9,)), chunk=4)
    out["total"].backward()
    assert hidden.grad is not None and weight.grad is None


def test_no_gradient_is_formed_under_no_grad(monkeypatch):
    """Evaluation runs the fused loss under `torch.no_grad()` with a trainable student: no gradient
    buffer (N × H, V × H in fp32) is allocated and no backward matmul runs, and the values are the same."""
    from normgrow.train import objective as module

    buffers = []
    chunk_terms = module._chunk_terms

    def recording(*args, **kwargs):
        buffers.append((kwargs["grad_hidden"], kwargs["grad_weight"]))
        return chunk_terms(*args, **kwargs)

    monkeypatch.setattr(module, "_chunk_terms", recording)
    hidden, weight = torch.randn(9, 4, requires_grad=True), torch.randn(11, 4, requires_grad=True)
    inputs = (torch.randn(9, 3), torch.randn(11, 3), torch.randint(0, 11, (9,)))
    with torch.no_grad():
        evaluated = fused_objective(Objective(), hidden, weight, *inputs, chunk=4)
    assert len(buffers) == 3 and all(b == (None, None) for b in buffers)
    buffers.clear()
    trained = fused_objective(Objective(), hidden, weight, *inputs, chunk=4)
    assert all(h is not None and w is not None for h, w in buffers)
    for key in evaluated:
        torch.testing.assert_close(evaluated[key], trained[key].detach())
