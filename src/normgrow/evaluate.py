"""Held-out evaluation on the fixed validation set.

CE, KD: token-weighted means over all loss positions of the validation set (every position whose
next token is real), with the objective's definitions; PPL = exp(CE).
"""

from __future__ import annotations

import math

import torch

from normgrow.data import Batch
from normgrow.forward import causal_lm_logits, distillation_terms, positions_and_labels
from normgrow.objective import Objective


@torch.inference_mode()
def evaluate_student(student, teacher, batches: list[Batch], objective: Objective,
                     chunk: int = 4096) -> dict[str, float]:
    was_training = student.training
    student.eval()
    ce = kd = 0.0
    count = 0
    for batch in batches:
        terms = distillation_terms(student, teacher, batch, objective, chunk)
        n = int(batch.attention_mask[:, 1:].sum())
        ce += float(terms["ce"]) * n
        kd += float(terms["kd"]) * n
        count += n
    student.train(was_training)
    return {"ce": ce / count, "kd": kd / count, "ppl": math.exp(ce / count), "positions": count}


@torch.inference_mode()
def causal_lm_ce(model, batches: list[Batch]) -> float:
    """Token-weighted next-token CE of a causal LM over the batches' loss positions."""
    total, count = 0.0, 0
    for batch in batches:
        positions, labels = positions_and_labels(batch)
        logits = causal_lm_logits(model, batch, positions).float()
        total += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
        count += len(labels)
    return total / count
