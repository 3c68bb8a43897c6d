"""Held-out evaluation on the fixed validation set.

CE, KD, KD soft: token-weighted means over all loss positions of the validation set (every position
whose next token is real), with the objective's definitions (normgrow.objective); PPL = exp(CE).
"""

from __future__ import annotations

import math

import torch

from normgrow.data import Batch
from normgrow.forward import causal_lm_hidden, distillation_terms, positions_and_labels
from normgrow.objective import Objective, loss_positions


@torch.no_grad()
def evaluate_student(student, teacher, batches: list[Batch], objective: Objective, chunk: int = 4096,
                     ranks=None) -> dict[str, float]:
    """CE, KD, KD soft and PPL of the student on `batches`. With `ranks` (a sharded student), `batches` are
    this rank's rows of the validation batches (`Ranks.rows`, once per phase) and the sums are
    combined over ranks. (`no_grad`, not inference mode: FSDP reuses the gathered parameters in
    training afterwards.)"""
    was_training = student.training
    student.eval()
    ce = kd = kd_soft = count = 0.0
    for batch in batches:
        terms = distillation_terms(student, teacher, batch, objective, chunk, normalizer=1.0)
        ce += float(terms["ce"])
        kd += float(terms["kd"])
        kd_soft += float(terms["kd_soft"])
        count += int(loss_positions(batch.attention_mask).sum())
    if ranks:
        ce, kd, kd_soft, count = ranks.sum(ce, kd, kd_soft, count)
    student.train(was_training)
    return {"ce": ce / count, "kd": kd / count, "kd_soft": kd_soft / count, "ppl": math.exp(ce / count),
            "positions": int(count)}


@torch.inference_mode()
def causal_lm_ce(model, batches: list[Batch], chunk: int = 4096) -> float:
    """Token-weighted next-token CE of a causal LM over the batches' loss positions. Logits are
    formed `chunk` positions at a time, in fp32, so no (positions × vocabulary) tensor exists."""
    total, count = 0.0, 0
    device = next(model.parameters()).device
    for batch in batches:
        batch = batch.to(device)
        targets = positions_and_labels(batch)
        total += float(causal_lm_ce_sum(model, batch, targets, chunk))
        count += len(targets[1])
    return total / count


def causal_lm_ce_sum(model, batch: Batch, targets: tuple[torch.Tensor, torch.Tensor], chunk: int) -> torch.Tensor:
    """Summed next-token CE of a causal LM on one batch at its `targets` (`positions_and_labels`)."""
    positions, labels = targets
    hidden = causal_lm_hidden(model, batch, positions)
    head = model.get_output_embeddings()
    total = hidden.new_zeros((), dtype=torch.float64)  # fp32 sums per chunk, accumulated in fp64
    for start in range(0, len(labels), chunk):
        logits = head(hidden[start:start + chunk]).float()
        total += torch.nn.functional.cross_entropy(logits, labels[start:start + chunk], reduction="sum").double()
    return total
