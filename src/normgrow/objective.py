"""The distillation objective (paper Eq. 5, SPEC §2).

For every non-padding position that has a next token:

    L = α·τ²·KL(q_τ^teacher ‖ q_τ^student) + γ·CE(y, z_student),   q_τ = softmax(z / τ)

averaged over those positions (token-weighted across the whole batch). CE is the next-token
cross-entropy of the student at temperature 1; KD is the KL term before weighting; PPL = exp(CE).
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

        Returns `total`, `ce` and `kd` (all means over the N positions).
        """
        tau = self.temperature
        student_logp = F.log_softmax(student_logits.float() / tau, dim=-1)
        teacher_logp = F.log_softmax(teacher_logits.float() / tau, dim=-1)
        kd = F.kl_div(student_logp, teacher_logp, log_target=True, reduction="batchmean")
        ce = F.cross_entropy(student_logits.float(), labels)
        total = self.alpha * tau**2 * kd + self.gamma * ce
        return {"total": total, "ce": ce, "kd": kd}


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
