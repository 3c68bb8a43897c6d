"""The distillation objective (paper Eq. 5, docs/definitions.md §2).

For every non-padding position that has a next token:

    L = α·τ²·KL(q_τ^teacher ‖ q_τ^student) + γ·CE(y, z_student),   q_τ = softmax(z / τ)

averaged over those positions (token-weighted across the whole batch). CE is the next-token
cross-entropy of the student at temperature 1; KD is the KL term before weighting; PPL = exp(CE).

KD soft = the soft cross-entropy −Σ q_τ^teacher · log q_τ^student = KL + H(q_τ^teacher), logged
beside KD: it is what the paper's KD column reports (its Table 2 prints a KD above the CE, which a
KL of a student that close to its teacher cannot be, and a soft cross-entropy is). Only KD
(the KL) enters the loss; KD soft differs from it by the teacher's entropy, a constant of the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Objective:
    alpha: float = 0.7
    gamma: float = 0.3
    temperature: float = 1.0

    def __call__(self, student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                 labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Loss terms for logits of shape (N, V) over the N loss positions; labels (N,).

        Returns `total`, `ce`, `kd` and `kd_soft` (all means over the N positions).
        """
        tau = self.temperature
        student_logp = F.log_softmax(student_logits.float() / tau, dim=-1)
        teacher_logp = F.log_softmax(teacher_logits.float() / tau, dim=-1)
        kd = F.kl_div(student_logp, teacher_logp, log_target=True, reduction="batchmean")
        ce = F.cross_entropy(student_logits.float(), labels)
        kd_soft = -(teacher_logp.exp() * student_logp).sum(-1).mean()
        total = self.alpha * tau**2 * kd + self.gamma * ce
        return {"total": total, "ce": ce, "kd": kd, "kd_soft": kd_soft}


def loss_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Boolean (B, T) mask of positions t whose next token t+1 is a real (non-padding) token.

    With right padding these are the first len−1 positions of every sequence; the last column is
    never a loss position.
    """
    valid = torch.zeros_like(attention_mask, dtype=torch.bool)
    valid[:, :-1] = attention_mask[:, 1:].bool() & attention_mask[:, :-1].bool()
    return valid


def next_token_labels(input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Labels y_t = x_{t+1} for the selected positions, flattened in (B, T) order."""
    shifted = torch.roll(input_ids, shifts=-1, dims=1)
    return shifted[positions]


class FusedDistillationLoss(torch.autograd.Function):
    """The objective fused with both LM heads and computed in chunks of positions.

    Inputs are hidden states at the N loss positions (student (N, H) with its head (V, H); teacher
    (N, H_t) with its head (V, H_t)), so no (N, V) logits tensor ever exists: each chunk's logits
    are formed, turned into loss terms and gradients, and freed. The gradients are computed in the
    forward pass (d total / d z = α·τ/N·(softmax(z/τ) − softmax(z_t/τ)) + γ/N·(softmax(z) − e_y))
    and scaled in backward. Values equal `Objective` on the full logits (up to summation order).

    `normalizer` divides the sums instead of N: the global number of loss positions when the N
    positions are one rank's share of a batch, 1 for plain sums.
    """

    @staticmethod
    def forward(ctx, hidden, weight, teacher_hidden, teacher_weight, labels, objective: Objective, chunk, normalizer):
        n = normalizer
        ctx.weight_dtype = weight.dtype
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_hidden = torch.empty_like(hidden) if need_h else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        kd_sum = hidden.new_zeros((), dtype=torch.float32)
        ce_sum = hidden.new_zeros((), dtype=torch.float32)
        entropy_sum = hidden.new_zeros((), dtype=torch.float32)  # of the teacher, for KD soft
        rows = torch.arange(min(chunk, hidden.shape[0]), device=hidden.device)
        for start in range(0, hidden.shape[0], chunk):
            part = slice(start, start + chunk)
            kd, entropy, ce = _chunk_terms(hidden[part], weight, teacher_hidden[part], teacher_weight, labels[part],
                                           objective=objective, n=n, rows=rows, grad_hidden=grad_hidden,
                                           grad_weight=grad_weight, part=part)
            kd_sum += kd
            entropy_sum += entropy
            ce_sum += ce
        kd, ce, kd_soft = kd_sum / n, ce_sum / n, (kd_sum + entropy_sum) / n
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.mark_non_differentiable(ce, kd, kd_soft)
        return objective.alpha * objective.temperature**2 * kd + objective.gamma * ce, ce, kd, kd_soft

    @staticmethod
    def backward(ctx, grad_total, grad_ce, grad_kd, grad_kd_soft):
        grad_hidden, grad_weight = ctx.saved_tensors  # used once: scaled in place, no copies
        if grad_hidden is not None:
            grad_hidden.mul_(grad_total.to(grad_hidden.dtype))
        if grad_weight is not None:
            grad_weight = grad_weight.mul_(grad_total).to(ctx.weight_dtype)
        return grad_hidden, grad_weight, None, None, None, None, None, None


def _chunk_terms(h, weight, teacher_h, teacher_weight, y, *, objective: Objective, n, rows, grad_hidden, grad_weight,
                 part: slice) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One chunk of FusedDistillationLoss (hidden states and labels of the chunk's positions; `n` the
    normalizer, `rows` 0..chunk−1): its KL, teacher-entropy and CE sums; its gradients are written into
    `grad_hidden[part]` and added to `grad_weight` (either may be None). A function of its own so that
    the chunk's (chunk × V) tensors are freed when it returns, before the next chunk's exist (found by
    the memory trace: a loop body kept the previous chunk's alive; docs/cluster.md, "What the trace found")."""
    alpha, gamma, tau = objective.alpha, objective.gamma, objective.temperature
    z = (h @ weight.T).float()
    z_t = (teacher_h @ teacher_weight.T).float()
    log_p = F.log_softmax(z / tau if tau != 1.0 else z, dim=-1)
    log_q = F.log_softmax(z_t / tau if tau != 1.0 else z_t, dim=-1)
    del z_t
    q = log_q.exp()
    kd = (q * (log_q - log_p)).sum()
    entropy = -(q * log_q).sum()
    del log_q
    log_p1 = log_p if tau == 1.0 else F.log_softmax(z, dim=-1)
    del z
    ce = -log_p1.gather(1, y[:, None]).sum()
    if grad_hidden is not None or grad_weight is not None:
        p = log_p.exp()  # d total / d z, built in place of p
        del log_p
        if tau == 1.0:
            grad = p.mul_((alpha + gamma) / n).sub_(q, alpha=alpha / n)
        else:
            grad = p.sub_(q).mul_(alpha * tau / n).add_(log_p1.exp(), alpha=gamma / n)
        grad[rows[: len(y)], y] -= gamma / n
        if grad_hidden is not None:
            torch.mm(grad.to(weight.dtype), weight, out=grad_hidden[part])
        if grad_weight is not None:
            add_head_gradient(grad_weight, grad, h)
    return kd, entropy, ce


MIXED_PRECISION_MATMUL = frozenset({"cuda"})  # devices with a bf16 × bf16 → fp32 matmul (torch's `out_dtype`)


def add_head_gradient(grad_weight: torch.Tensor, grad: torch.Tensor, h: torch.Tensor) -> None:
    """grad_weight += gradᵀ · h: one chunk's share of the LM head's weight gradient (grad_weight (V, H) and
    grad (chunk, V) in fp32, h (chunk, H) the hidden states). With bf16 or fp16 hidden states on a device
    in MIXED_PRECISION_MATMUL the product runs on operands in their dtype, accumulated in fp32 into
    grad_weight, at the tensor cores' rate: as an fp32 matmul it was 2·V·N·H FLOPs of SGEMM per update
    (≈ 9.7 TFLOP per rank at the paper's shape, 15–25 % of an update). fp32 hidden states keep the fp32
    product, bit for bit, and so does the CPU (torch has no `out_dtype` matmul there; its bf16 runs are
    tests)."""
    if h.dtype in (torch.bfloat16, torch.float16) and h.device.type in MIXED_PRECISION_MATMUL:
        torch.addmm(grad_weight, grad.T.to(h.dtype), h, out_dtype=torch.float32, out=grad_weight)
    else:
        grad_weight.addmm_(grad.T, h.float())


def fused_objective(objective: Objective, hidden, weight, teacher_hidden, teacher_weight, labels, *,
                    chunk: int, normalizer: float | None = None) -> dict[str, torch.Tensor]:
    """`objective` on hidden states at the loss positions, chunked over positions and fused with the
    LM heads (see FusedDistillationLoss). Returns `total`, `ce`, `kd` and `kd_soft` like `Objective`:
    means over the positions, or sums divided by `normalizer` if given. Under `torch.no_grad()`
    (evaluation, diagnostics) no gradient is formed: a Function's `needs_input_grad` follows
    `requires_grad` even there, so the inputs are detached first."""
    if not torch.is_grad_enabled():
        hidden, weight = hidden.detach(), weight.detach()
    total, ce, kd, kd_soft = FusedDistillationLoss.apply(
        hidden, weight, teacher_hidden.detach(), teacher_weight.detach(), labels, objective, chunk,
        normalizer or hidden.shape[0])
    return {"total": total, "ce": ce, "kd": kd, "kd_soft": kd_soft}
