"""Normalization placements: the one thing that differs between the compared students.

Every placement's layer holds the sub-modules of a `transformers` decoder layer of the teacher's
family (normgrow.model.family; for Qwen3: attention with q/k RMSNorm, RoPE and GQA, SwiGLU MLP,
RMSNorms) under the same parameter names, and adds its
own norms under names ending in `norm.weight`; so one seed initialises every placement to identical
weights wherever the parameters coincide (norms start as the identity and draw nothing:
normgrow.model.student). Only the data flow differs (N_* are RMSNorms; Attn and MLP the family's):

    pre       h = h + Attn(N_a(h));  h = h + MLP(N_m(h))                                   [final]
    post      h = N_a(h + Attn(h));  h = N_m(h + MLP(h))                                   [entry]
    sandwich  h = h + N_ao(Attn(N_a(h)));  h = h + N_mo(MLP(N_m(h)))                       [final]
    deepnorm  h = N_a(α·h + Attn(h));  h = N_m(α·h + MLP(h));  α = (2N)^¼                 [entry]
    mix-ln    post layers in the first `post_blocks` blocks (name `mix-ln@B`, default 1), pre
              layers after them                                                           [final]
    hybridnorm  u = h + Attn_qkv(h);  h = N_m(u);  h = h + MLP(h)                         [final]

The bracket is the model-boundary norm (one per student): `final` applies N_final after the last
active layer (pre-norm's interface), `entry` applies N_entry to the embedding output (post-norm's:
its layers normalise their outputs, but the first receives the raw embedding). Each placement takes
what its paper prescribes; see each class. N is the student's total decoder layers (K·L).

The registry (names, each block's layer kind, the boundary norm) and where each layer kind puts its
norms are torch-free data in normgrow.model.layout; LAYERS maps each layer kind to its class here.
"""

from __future__ import annotations

import torch
from torch import nn

from normgrow.model.family import family
from normgrow.model.layout import layer_kinds, residual_scale


class _Layer(nn.Module):
    """Sub-modules shared by every placement; subclasses define the data flow (as their layout in
    normgrow.model.layout.LAYOUTS describes it)."""

    def __init__(self, config, layer_idx: int, depth: int):
        super().__init__()
        f = family(config)
        self.self_attn = f.attention(config, layer_idx)
        self.mlp = f.mlp(config)
        self.attn_layernorm = f.norm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp_layernorm = f.norm(config.hidden_size, eps=config.rms_norm_eps)

    def attend(self, x: torch.Tensor, position_embeddings, attention_mask) -> torch.Tensor:
        return self.self_attn(x, position_embeddings, attention_mask)[0]

    def scale_init_(self) -> None:
        """Rescale the freshly drawn weights as the placement's paper prescribes (default: none)."""


class PreNormLayer(_Layer):
    """h = h + Attn(N_a(h)); h = h + MLP(N_m(h)). Boundary: N_final."""

    def forward(self, h, position_embeddings, attention_mask):
        h = h + self.attend(self.attn_layernorm(h), position_embeddings, attention_mask)
        return h + self.mlp(self.mlp_layernorm(h))


class PostNormLayer(_Layer):
    """u = h + Attn(h); h = N_a(u); v = h + MLP(h); h = N_m(v). Boundary: N_entry."""

    def forward(self, h, position_embeddings, attention_mask):
        h = self.attn_layernorm(h + self.attend(h, position_embeddings, attention_mask))
        return self.mlp_layernorm(h + self.mlp(h))


class SandwichLayer(_Layer):
    """Sandwich / peri-LN: a norm on each sub-layer's input and on its output before the residual
    add (Gemma 2/3's post_attention/post_feedforward norms; peri-LN):
    h = h + N_ao(Attn(N_a(h))); h = h + N_mo(MLP(N_m(h))). Two more RMSNorms per layer than pre/post.
    Boundary: N_final, as in those models."""

    def __init__(self, config, layer_idx: int, depth: int):
        super().__init__(config, layer_idx, depth)
        norm = family(config).norm
        self.attn_out_layernorm = norm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp_out_layernorm = norm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, h, position_embeddings, attention_mask):
        h = h + self.attn_out_layernorm(self.attend(self.attn_layernorm(h), position_embeddings, attention_mask))
        return h + self.mlp_out_layernorm(self.mlp(self.mlp_layernorm(h)))


class DeepNormLayer(_Layer):
    """DeepNorm (Wang et al., DeepNet 2022), post-norm with an up-weighted residual:
    h = N_a(α·h + Attn(h)); h = N_m(α·h + MLP(h)), and the value, output and MLP projections
    initialised ×β; for a decoder-only stack of N layers α = (2N)^¼, β = (8N)^-¼ (N = K·L, the full
    student, so every phase of a run has the same layers). Boundary: N_entry, as post-norm."""

    def __init__(self, config, layer_idx: int, depth: int):
        super().__init__(config, layer_idx, depth)
        self.alpha = residual_scale(depth)
        self.beta = (8 * depth) ** -0.25

    def forward(self, h, position_embeddings, attention_mask):
        h = self.attn_layernorm(self.alpha * h + self.attend(h, position_embeddings, attention_mask))
        return self.mlp_layernorm(self.alpha * h + self.mlp(h))

    @torch.no_grad()
    def scale_init_(self) -> None:
        for weight in value_output_and_mlp_weights(self.self_attn, self.mlp):
            weight.mul_(self.beta)


def value_output_and_mlp_weights(attn: nn.Module, mlp: nn.Module) -> list[torch.Tensor]:
    """The value, output and MLP projections' weights (views into the fused ones: Phi-3's value rows of
    `qkv_proj`, its whole `gate_up_proj`)."""
    if hasattr(attn, "qkv_proj"):
        values = attn.config.num_key_value_heads * attn.head_dim
        weights = [attn.qkv_proj.weight[-values:], attn.o_proj.weight]
    else:
        weights = [attn.v_proj.weight, attn.o_proj.weight]
    mlp_names = ("gate_up_proj", "down_proj") if hasattr(mlp, "gate_up_proj") else ("gate_proj", "up_proj", "down_proj")
    return weights + [getattr(mlp, name).weight for name in mlp_names]


class _NormedHeads(nn.Module):
    """A projection followed by an RMSNorm over each head's dimensions (as Qwen3 does for q and k)."""

    def __init__(self, linear: nn.Linear, head_dim: int, norm: type, eps: float):
        super().__init__()
        self.linear = linear
        self.head_norm = norm(head_dim, eps=eps)
        self.head_dim = head_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return self.head_norm(y.view(*y.shape[:-1], -1, self.head_dim)).view(y.shape)


class _NormedFusedHeads(nn.Module):
    """A fused q/k/v projection (Phi-3's `qkv_proj`) followed by an RMSNorm over each head's dimensions,
    one norm for the queries, one for the keys, one for the values (as three _NormedHeads would)."""

    def __init__(self, linear: nn.Linear, head_dim: int, widths: tuple[int, int, int], norm: type, eps: float):
        super().__init__()
        self.linear = linear
        self.widths = widths
        self.head_dim = head_dim
        self.q_norm, self.k_norm, self.v_norm = (norm(head_dim, eps=eps) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = self.linear(x).split(self.widths, dim=-1)
        return torch.cat([n(y.view(*y.shape[:-1], -1, self.head_dim)).view(y.shape)
                          for n, y in zip((self.q_norm, self.k_norm, self.v_norm), parts, strict=True)], dim=-1)


class HybridNormLayer(_Layer):
    """HybridNorm (Zhuo et al. 2025): QKV normalisation inside attention — RMSNorm on every head's
    queries, keys and values — and post-norm around the FFN's input: u = h + Attn_qkv(h);
    h = N_m(u); h = h + MLP(h). Queries and keys take the family's own per-head norms where it has
    them (Qwen3's and Gemma 3's per head, OLMo 2's over the full width), otherwise a per-head norm on the
    projection's output, before RoPE, as Qwen3 places its own (Phi-3: on each of the fused projection's
    q, k and v parts); values always take one. It has no attention-input norm: one RMSNorm of H
    weights per layer instead of pre/post's two, plus the per-head norms (head_dim weights each).
    Boundary: N_final (its output is not normalised)."""

    def __init__(self, config, layer_idx: int, depth: int):
        super().__init__(config, layer_idx, depth)
        attn, norm = self.self_attn, family(config).norm
        if hasattr(attn, "qkv_proj"):  # Phi-3: one fused projection, no q/k norms of its own
            q, kv = config.num_attention_heads * attn.head_dim, config.num_key_value_heads * attn.head_dim
            attn.qkv_proj = _NormedFusedHeads(attn.qkv_proj, attn.head_dim, (q, kv, kv), norm, config.rms_norm_eps)
        else:
            projections = ("v_proj",) if hasattr(attn, "q_norm") else ("q_proj", "k_proj", "v_proj")
            for name in projections:
                setattr(attn, name, _NormedHeads(getattr(attn, name), attn.head_dim, norm, config.rms_norm_eps))
        del self.attn_layernorm

    def forward(self, h, position_embeddings, attention_mask):
        h = self.mlp_layernorm(h + self.attend(h, position_embeddings, attention_mask))
        return h + self.mlp(h)


LAYERS: dict[str, type[_Layer]] = {"pre": PreNormLayer, "post": PostNormLayer, "sandwich": SandwichLayer,
                                   "deepnorm": DeepNormLayer, "hybridnorm": HybridNormLayer}


def layer_classes(placement: str, blocks: int) -> list[type[_Layer]]:
    """The layer class of each of `blocks` blocks under `placement` (normgrow.model.layout.layer_kinds:
    a clear error for unknown names)."""
    return [LAYERS[kind] for kind in layer_kinds(placement, blocks)]
