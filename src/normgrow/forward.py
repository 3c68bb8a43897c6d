"""Hidden states and logits at the loss positions only: padding never reaches an LM head, the
loss or a metric."""

from __future__ import annotations

import torch

from normgrow.data import Batch
from normgrow.objective import loss_positions, next_token_labels


def positions_and_labels(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    positions = loss_positions(batch.attention_mask)
    return positions, next_token_labels(batch.input_ids, positions)


def causal_lm_logits(model, batch: Batch, positions: torch.Tensor) -> torch.Tensor:
    """(N, V) logits of a `transformers` causal LM (e.g. the teacher) at the N loss positions."""
    hidden = model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    return model.get_output_embeddings()(hidden[positions])


def causal_lm_hidden(model, batch: Batch, positions: torch.Tensor) -> torch.Tensor:
    """(N, H) final hidden states of a `transformers` causal LM at the N loss positions."""
    hidden = model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    return hidden[positions]


def distillation_terms(student, teacher, batch: Batch, objective, chunk: int,
                       normalizer: float | None = None) -> dict[str, torch.Tensor]:
    """The objective's terms on one batch: the teacher runs once under inference mode, and KD + CE
    are computed chunk by chunk, fused with both LM heads (no full-vocabulary logits tensor).

    The loss runs inside the student's forward (`loss=`), where a sharded student's head is
    gathered. Terms are means over the batch's loss positions, or sums divided by `normalizer`."""
    from normgrow.objective import fused_objective

    positions, labels = positions_and_labels(batch)
    with torch.inference_mode():
        teacher_hidden = causal_lm_hidden(teacher, batch, positions)
    teacher_weight = teacher.get_output_embeddings().weight

    def loss(hidden, weight):
        return fused_objective(objective, hidden[positions], weight, teacher_hidden, teacher_weight, labels,
                               chunk, normalizer)

    return student(batch.input_ids, batch.attention_mask, loss=loss)
