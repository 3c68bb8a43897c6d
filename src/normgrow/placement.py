"""Normalization placements: the one thing that differs between the compared students.

Both layers hold the same four sub-modules as a `transformers` Qwen3 decoder layer (attention with
q/k RMSNorm, RoPE and GQA; SwiGLU MLP; two RMSNorms), under the same parameter names, so that a
single seed initialises pre- and post-norm layers to identical weights. Only the data flow differs:

    pre:  h = h + Attn(N_a(h));  h = h + MLP(N_m(h))
    post: u = h + Attn(h);  h = N_a(u);  v = h + MLP(h);  h = N_m(v)

The model-boundary norm (one per student) also depends on the placement: pre-norm applies
`N_final` after the last active layer, post-norm applies `N_entry` to the embedding output.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3MLP, Qwen3RMSNorm


class _Layer(nn.Module):
    """Sub-modules shared by every placement; subclasses define the data flow."""

    boundary: str  # "final" (after the last active layer) or "entry" (after the embedding)

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.self_attn = Qwen3Attention(config, layer_idx)
        self.mlp = Qwen3MLP(config)
        self.attn_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def attend(self, x: torch.Tensor, position_embeddings, attention_mask) -> torch.Tensor:
        return self.self_attn(x, position_embeddings, attention_mask)[0]


class PreNormLayer(_Layer):
    """h = h + Attn(N_a(h)); h = h + MLP(N_m(h))."""

    boundary = "final"

    def forward(self, h, position_embeddings, attention_mask):
        h = h + self.attend(self.attn_layernorm(h), position_embeddings, attention_mask)
        return h + self.mlp(self.mlp_layernorm(h))


class PostNormLayer(_Layer):
    """u = h + Attn(h); h = N_a(u); v = h + MLP(h); h = N_m(v)."""

    boundary = "entry"

    def forward(self, h, position_embeddings, attention_mask):
        h = self.attn_layernorm(h + self.attend(h, position_embeddings, attention_mask))
        return self.mlp_layernorm(h + self.mlp(h))


PLACEMENTS: dict[str, type[_Layer]] = {"pre": PreNormLayer, "post": PostNormLayer}


def layer_class(placement: str) -> type[_Layer]:
    """The layer class registered for `placement`, with a clear error for unknown names."""
    try:
        return PLACEMENTS[placement]
    except KeyError:
        raise ValueError(
            f"unknown placement {placement!r}; registered placements: {sorted(PLACEMENTS)}"
        ) from None
