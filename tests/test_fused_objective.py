"""The chunked, head-fused objective equals the naive full-logits objective: values and gradients."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

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


MATMULS = {getattr(torch.ops.aten, name) for name in ("mm", "addmm", "addmm_", "bmm", "baddbmm", "baddbmm_", "matmul")}


class RecordedMatmuls(TorchDispatchMode):
    """Every matmul run inside the context: (operands' dtypes, output dtype, output shape). `addmm` with
    `out_dtype` (bf16 operands into fp32), which the CPU has no kernel for, runs as its fp32 equivalent
    (bf16 values and their products are exact in fp32), so that the GPU's call can be followed here."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[tuple[torch.dtype, torch.dtype], torch.dtype, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket not in MATMULS:
            return func(*args, **kwargs)
        if func in (torch.ops.aten.addmm.dtype, torch.ops.aten.addmm.dtype_out):
            added, a, b, out_dtype = args
            result = torch.addmm(added.to(out_dtype), a.float(), b.float(), beta=kwargs.get("beta", 1),
                                 alpha=kwargs.get("alpha", 1))
            result = kwargs["out"].copy_(result) if "out" in kwargs else result
        else:
            a, b = args[-2:]
            result = func(*args, **kwargs)
        self.calls.append(((a.dtype, b.dtype), result.dtype, tuple(result.shape)))
        return result


def test_the_head_gradient_is_a_bf16_matmul_into_fp32_under_bf16(monkeypatch):
    """Under bf16 compute the LM head's weight gradient is formed from bf16 operands accumulated in fp32
    (`add_head_gradient`, torch's `out_dtype` on a GPU), never as an fp32 × fp32 matmul of the head's
    size (issue 58: 2·V·N·H FLOPs of SGEMM per update), and it is the fp32 gradient within bf16
    rounding. The CPU has no such kernel: the device is declared one here and the recorder runs it."""
    from normgrow.train import objective as module

    monkeypatch.setattr(module, "MIXED_PRECISION_MATMUL", frozenset({"cpu"}))
    g = torch.Generator().manual_seed(0)
    n, h, v = 24, 16, 40
    fp32 = {"hidden": torch.randn(n, h, generator=g), "weight": torch.randn(v, h, generator=g) * 0.3,
            "teacher_hidden": torch.randn(n, h, generator=g), "teacher_weight": torch.randn(v, h, generator=g)}
    labels = torch.randint(0, v, (n,), generator=g)
    grads = {}
    for dtype in (torch.float32, torch.bfloat16):
        inputs = {k: x.detach().to(dtype).requires_grad_(k in ("hidden", "weight")) for k, x in fp32.items()}
        with RecordedMatmuls() as recorded:
            out = fused_objective(Objective(), **inputs, labels=labels, chunk=7)
            out["total"].backward()
        grads[dtype] = inputs["weight"].grad.float()
        head_sized = [(operands, result) for operands, result, shape in recorded.calls if shape == (v, h)]
        assert len(head_sized) == 4, recorded.calls  # one per chunk of 7 of the 24 positions
        if dtype == torch.bfloat16:
            assert head_sized == [((torch.bfloat16, torch.bfloat16), torch.float32)] * 4
            assert all(operands == (torch.bfloat16, torch.bfloat16) for operands, _, _ in recorded.calls)
    torch.testing.assert_close(grads[torch.bfloat16], grads[torch.float32], rtol=0.05, atol=0.02)
