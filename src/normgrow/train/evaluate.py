"""Held-out evaluation on the fixed validation set.

CE, KD, KD soft: token-weighted means over all loss positions of the validation set (every position
whose next token is real), with the objective's definitions (normgrow.train.objective); PPL = exp(CE).
"""

from __future__ import annotations

import math

import torch

from normgrow.model.student import at_positions
from normgrow.train.data import Batch
from normgrow.train.forward import causal_lm_hidden, positions_and_labels, teacher_hidden_states
from normgrow.train.objective import Objective, fused_objective


@torch.no_grad()
def evaluate_students(students: list, objectives: list[Objective], teacher, batches: list[Batch], chunk: int = 4096,
                      ranks=None, gates: list | None = None) -> list[dict[str, float]]:
    """CE, KD, KD soft and PPL of each student (under its objective and its ramp `gates`, if any) on
    `batches`, the teacher run once per batch for all of them. With `ranks` (sharded students),
    `batches` are this rank's rows of the validation batches (`Ranks.rows`, once per phase) and the sums
    are combined over ranks. (`no_grad`, not inference mode: FSDP reuses the gathered parameters in
    training afterwards.)"""
    modes = [student.training for student in students]
    sums = [[0.0, 0.0, 0.0] for _ in students]
    count = 0
    head = teacher.get_output_embeddings().weight
    for student in students:
        student.eval()
    for batch in batches:
        positions, labels = positions_and_labels(batch)
        teacher_hidden = teacher_hidden_states(teacher, batch, positions)  # the teacher run once for all
        for student, objective, gate, total in zip(students, objectives, gates or [None] * len(students), sums,
                                                   strict=True):
            hidden = student(batch.input_ids, batch.attention_mask, batch.position_ids, gate)
            terms = fused_objective(objective, at_positions(hidden, positions), student.lm_head.weight,
                                    teacher_hidden, head, labels, chunk=chunk, normalizer=1.0)  # sums
            for i, key in enumerate(("ce", "kd", "kd_soft")):
                total[i] += float(terms[key])
        count += len(positions)
    results = []
    for student, mode, (ce, kd, kd_soft) in zip(students, modes, sums, strict=True):
        n = count
        if ranks:
            ce, kd, kd_soft, n = ranks.sum(ce, kd, kd_soft, count)
        student.train(mode)
        results.append({"ce": ce / n, "kd": kd / n, "kd_soft": kd_soft / n, "ppl": math.exp(ce / n),
                        "positions": int(n)})
    return results


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
