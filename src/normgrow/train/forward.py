"""Hidden states and logits at the loss positions only: padding never reaches an LM head, the
loss or a metric.

Loss positions are flat indices into a batch's B·T positions ((B, T) order), not a boolean mask:
selecting rows by index gives a result whose shape is known before the data is read, so the same
code runs on real tensors and under a fake-tensor trace (normgrow.cluster.trace)."""

from __future__ import annotations

import torch

from normgrow.model.student import at_positions
from normgrow.train.data import Batch
from normgrow.train.objective import loss_positions, next_token_labels


def positions_and_labels(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) flat indices of the batch's loss positions and (N,) their next-token labels. In a packed
    batch a document's last token is no loss position: the next token starts another document."""
    mask = loss_positions(batch.attention_mask)
    if batch.position_ids is not None:
        mask[:, :-1] &= batch.position_ids[:, 1:] == batch.position_ids[:, :-1] + 1
    return mask.flatten().nonzero().squeeze(1), next_token_labels(batch.input_ids, mask)


def causal_lm_hidden(model, batch: Batch, positions: torch.Tensor) -> torch.Tensor:
    """(N, H) final hidden states of a `transformers` causal LM at the N loss positions. No KV cache:
    with the configs' usual `use_cache: true` the model would keep every layer's keys and values
    until it returns (found by the memory trace; docs/cluster.md, "What the trace found")."""
    if batch.position_ids is None:
        hidden = model.base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                  use_cache=False).last_hidden_state
    else:  # packed: no 2D mask, so that transformers builds document-causal attention from the positions
        hidden = model.base_model(input_ids=batch.input_ids, position_ids=batch.position_ids,
                                  use_cache=False).last_hidden_state
    return at_positions(hidden, positions)


def causal_lm_logits(model, batch: Batch, positions: torch.Tensor) -> torch.Tensor:
    """(N, V) logits of a `transformers` causal LM (e.g. the teacher) at the N loss positions."""
    return model.get_output_embeddings()(causal_lm_hidden(model, batch, positions))


def teacher_hidden_states(teacher, batch: Batch, positions: torch.Tensor) -> torch.Tensor:
    """The frozen teacher's final hidden states at the loss positions, under inference mode: what
    every student reading `batch` distils from (computed once per batch for a group of students)."""
    with torch.inference_mode():
        return causal_lm_hidden(teacher, batch, positions)
