"""The block-stack student (paper §Methodology, docs/definitions.md §1).

K blocks × L decoder layers of one placement, between a frozen copy of the teacher's embedding and
a trainable copy of its LM head, with one model-boundary RMSNorm initialised from the teacher's
final norm (the paper's start, `student.boundary_norm_init: teacher`) or at the identity (`identity`:
the family's norm_identity, so that it computes plain x̂ — the teacher's final norm scales a
Gemma stream by (1 + w), RMS ≈ 54, which pre-norm's N_final passes on to the head and post-norm's
N_entry feeds into its first layer). `active_blocks` (constructor state: a phase's depth) selects how
many blocks the forward pass runs (curriculum growth); inactive blocks keep their weights untouched.
This is the one definition of the stack's forward: training runs it, and the exported model
(normgrow.model.modeling_normgrow) wraps it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.masking_utils import create_causal_mask

from normgrow.model.family import attention_kernel, family
from normgrow.model.layout import LAYOUTS, boundary, layer_kinds, residual_scale


def student_config(teacher_config, num_layers: int, attn_implementation: str = "sdpa"):
    """A config of the teacher's class (normgrow.model.family) for `num_layers` student layers with the
    teacher's layer dimensions.

    The attention implementation is always set explicitly: a config without one makes
    `create_causal_mask` return None for unpadded batches, and attention then runs non-causal (eager
    for SDPA where the family caps attention logits: normgrow.model.family.attention_kernel). Every
    layer is a global-attention layer (normgrow.model.family: why).
    """
    fields = teacher_config.to_dict()
    for key in ("architectures", "auto_map", "model_type", "transformers_version", "dtype", "torch_dtype"):
        fields.pop(key, None)
    fields.update(num_hidden_layers=num_layers, layer_types=["full_attention"] * num_layers,
                  use_sliding_window=False)
    config = family(teacher_config).config_class(**fields)
    config._attn_implementation = attention_kernel(config, attn_implementation)
    return config


def at_positions(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The (N, ...) rows of a (B, T, ...) tensor at flat `positions` ((B, T) order): the loss positions
    (normgrow.train.forward)."""
    return hidden.flatten(0, 1)[positions]


def init_normal_(module: nn.Module, std: float, generator: torch.Generator, norm_identity: float = 1.0) -> None:
    """Every parameter of `module` drawn or set as Qwen3's init scheme does, in parameter-name order from one
    generator (whatever the family).

    Linear weights ~ N(0, std²), biases 0, RMSNorm weights at the identity (1; 0 for Gemma's (1 + w)
    norms) — the scheme `PreTrainedModel.post_init` applies, which standalone modules never receive.
    """
    for name, param in module.named_parameters():
        with torch.no_grad():
            if name.endswith("norm.weight"):
                param.fill_(norm_identity)
            elif name.endswith("bias"):
                param.zero_()
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * std)


ZEROED_OUTPUTS = ("self_attn.o_proj.weight", "mlp.down_proj.weight")  # the zero operator's projections
BOUNDARY_NORM_INITS = ("teacher", "identity")  # student.boundary_norm_init


class DecoderLayer(nn.Module):
    """One decoder layer of a placement's layer kind, `kind` a key of normgrow.model.layout.LAYOUTS —
    where each placement is described once, as the RMSNorms it puts around each residual add
    (`Layout.equation` writes them out; Fig. 1 is drawn from them).

    The layer holds the sub-modules of the teacher family's decoder layer (normgrow.model.family; for
    Qwen3: attention with q/k RMSNorm, RoPE and GQA, a SwiGLU MLP) under the same parameter names, and
    its kind's norms under names ending in `norm.weight`, so that one seed initialises every placement to
    identical weights wherever the parameters coincide (norms start at the identity and draw nothing).
    Each of its two residual sub-layers, attention then MLP, with branch F is

        h ← N_sum(α·h + N_output(F(N_input(h))))

    with only the norms the layout puts at each site; α = 1 but for DeepNorm (Wang et al. 2022:
    `scaled_residual`, α = (2N)^¼, its value, output and MLP projections initialised ×β = (8N)^-¼, N = K·L
    the whole student's layers, so every phase of a run has the same layers); HybridNorm (Zhuo et al.
    2025: `qkv_norm`) also normalises every head's queries, keys and values inside attention."""

    def __init__(self, config, layer_idx: int, depth: int, kind: str):
        super().__init__()
        f, self.layout = family(config), LAYOUTS[kind]
        self.self_attn = f.attention(config, layer_idx)
        self.mlp = f.mlp(config)
        for site in sorted(self.layout.norms, key=lambda site: site.position == "output"):  # sub-layer inputs first
            setattr(self, site.module, f.norm(config.hidden_size, eps=config.rms_norm_eps))
        self.sites = {(site.sublayer, site.position): site.module for site in self.layout.norms}
        self.alpha = residual_scale(depth) if self.layout.scaled_residual else None
        self.beta = (8 * depth) ** -0.25 if self.layout.scaled_residual else None
        if self.layout.qkv_norm:
            normalize_qkv_(self.self_attn, config, f.norm)

    def forward(self, h, position_embeddings, attention_mask):
        h = self.residual("attn", h, lambda x: self.self_attn(x, position_embeddings, attention_mask)[0])
        return self.residual("mlp", h, self.mlp)

    def residual(self, sublayer: str, h: torch.Tensor, branch) -> torch.Tensor:
        """One residual sub-layer (`attn` or `mlp`): h ← N_sum(α·h + N_output(F(N_input(h))))."""
        out = self.norm(sublayer, "output", branch(self.norm(sublayer, "input", h)))
        return self.norm(sublayer, "sum", (h if self.alpha is None else self.alpha * h) + out)

    def norm(self, sublayer: str, position: str, x: torch.Tensor) -> torch.Tensor:
        name = self.sites.get((sublayer, position))
        return x if name is None else getattr(self, name)(x)

    @torch.no_grad()
    def scale_init_(self) -> None:
        """DeepNorm's β on the freshly drawn value, output and MLP projections (other kinds: none)."""
        if self.beta is not None:
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


def normalize_qkv_(attn: nn.Module, config, norm: type) -> None:
    """HybridNorm's QKV normalisation: an RMSNorm on every head's queries, keys and values. Queries and keys
    keep the family's own norms where it has them (Qwen3's and Gemma 3's per head, OLMo 2's over the full
    width); otherwise a per-head norm on the projection's output, before RoPE, as Qwen3 places its own
    (Phi-3: on each of the fused projection's q, k and v parts); values always take one."""
    if hasattr(attn, "qkv_proj"):  # Phi-3: one fused projection, no q/k norms of its own
        q, kv = config.num_attention_heads * attn.head_dim, config.num_key_value_heads * attn.head_dim
        attn.qkv_proj = _NormedFusedHeads(attn.qkv_proj, attn.head_dim, (q, kv, kv), norm, config.rms_norm_eps)
    else:
        projections = ("v_proj",) if hasattr(attn, "q_norm") else ("q_proj", "k_proj", "v_proj")
        for name in projections:
            setattr(attn, name, _NormedHeads(getattr(attn, name), attn.head_dim, norm, config.rms_norm_eps))


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


class BlockStackStudent(nn.Module):
    """Embedding → [N_entry] → K blocks of L layers (first `active_blocks` run) → [N_final] → head."""

    def __init__(self, config, placement: str, num_blocks: int, layers_per_block: int,
                 built_blocks: int | None = None, active_blocks: int | None = None):
        """`built_blocks`: build only the first blocks (default all K; the export builds the active
        ones); the layers' kinds and DeepNorm's depth are those of the K-block student either way.
        `active_blocks`: how many of them the forward runs (default all built)."""
        super().__init__()
        built = num_blocks if built_blocks is None else built_blocks
        if not 1 <= built <= num_blocks:
            raise ValueError(f"built_blocks must be in 1..{num_blocks}, not {built}")
        active = built if active_blocks is None else active_blocks
        if not 1 <= active <= built:
            raise ValueError(f"active_blocks must be in 1..{built}, not {active}")
        if config.num_hidden_layers != built * layers_per_block:
            raise ValueError("config.num_hidden_layers must equal the built blocks × layers_per_block")
        if config._attn_implementation is None:
            raise ValueError("set config._attn_implementation explicitly (see student_config)")
        config._attn_implementation = attention_kernel(config, config._attn_implementation)
        self.config = config
        self.placement = placement
        self.num_blocks = num_blocks
        self.layers_per_block = layers_per_block
        self.active_blocks = active
        self.activation_checkpointing = False
        kinds = layer_kinds(placement, num_blocks)
        self.boundary = boundary(placement)
        depth = num_blocks * layers_per_block
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_tokens.weight.requires_grad_(False)
        self.blocks = nn.ModuleList(
            nn.ModuleList(DecoderLayer(config, b * layers_per_block + i, depth, kinds[b])
                          for i in range(layers_per_block))
            for b in range(built)
        )
        self.family = family(config)
        self.boundary_norm = self.family.norm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = self.family.rotary(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @classmethod
    def from_teacher(cls, teacher, placement: str, num_blocks: int, layers_per_block: int,
                     seed: int, attn_implementation: str = "sdpa",
                     boundary_norm_init: str = "teacher", active_blocks: int | None = None) -> BlockStackStudent:
        """Student with the teacher's embedding (frozen) and LM head (trainable), the boundary norm
        (trainable) from the teacher's final norm or at the identity (`boundary_norm_init`), and all K
        blocks freshly initialised from `seed` — identical for every placement and curriculum — of which
        the forward runs the first `active_blocks` (default all)."""
        if boundary_norm_init not in BOUNDARY_NORM_INITS:
            raise ValueError(f"boundary_norm_init must be one of {', '.join(BOUNDARY_NORM_INITS)}, "
                             f"not {boundary_norm_init!r}")
        config = student_config(teacher.config, num_blocks * layers_per_block, attn_implementation)
        student = cls(config, placement, num_blocks, layers_per_block, active_blocks=active_blocks)
        student.init_blocks(seed)
        with torch.no_grad():
            student.embed_tokens.weight.copy_(teacher.get_input_embeddings().weight)
            student.lm_head.weight.copy_(teacher.get_output_embeddings().weight)
            if boundary_norm_init == "teacher":
                student.boundary_norm.weight.copy_(teacher.base_model.norm.weight)
            else:
                student.boundary_norm.weight.fill_(student.family.norm_identity)
        return student

    def init_blocks(self, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        init_normal_(self.blocks, self.config.initializer_range, generator, self.family.norm_identity)
        for block in self.blocks:
            for layer in block:
                layer.scale_init_()

    def start_appended(self, blocks: tuple[int, ...], growth) -> None:
        """Apply `growth`'s operator (normgrow.design.curriculum.Growth) to the appended `blocks` at the
        append step: `copy` (and `zero` from a copy) loads the block before into each, in order;
        `zero` then zeroes each layer's attention output and MLP down projections. `random` and
        `ramp` change no weight (the ramp is the forward's `gate` argument)."""
        with torch.no_grad():
            for b in blocks:
                if growth.operator == "copy" or (growth.operator == "zero" and growth.source == "copy"):
                    self.blocks[b].load_state_dict(self.blocks[b - 1].state_dict())
                if growth.operator == "zero":
                    for name, param in self.blocks[b].named_parameters():
                        if name.endswith(ZEROED_OUTPUTS):
                            param.zero_()

    def set_trainable(self, blocks: list[int]) -> None:
        """Train the given blocks, the boundary norm and the head; the embedding stays frozen."""
        for b, block in enumerate(self.blocks):
            block.requires_grad_(b in blocks)
        self.boundary_norm.requires_grad_(True)
        self.lm_head.requires_grad_(True)
        self.embed_tokens.requires_grad_(False)

    def compile_layers(self) -> None:
        """`torch.compile` every decoder layer (`train.compile`); the first forward compiles."""
        for block in self.blocks:
            for layer in block:
                layer.compile()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor | None = None,
                gate: tuple[int, float] | None = None, skip_block: int | None = None) -> torch.Tensor:
        """Final hidden states (B, T, H) of the active stack, before the LM head (the loss applies the head
        to the loss positions only: normgrow.train.objective.fused_objective).

        `attention_mask` (B, T) is 1 on real tokens, 0 on right padding; positions are 0..T−1 in
        every row, or `position_ids` (B, T) for documents laid end to end (a packed batch of the trainer):
        the causal mask then stops where a row's positions restart (transformers' packed sequences),
        and `attention_mask` only marks what the caller counts. With `gate` = (b, c) (the ramp operator's c
        at this update), the blocks from b on are mixed in as h_b + c·(stack(h_b) − h_b), h_b the stream
        entering block b. `skip_block` bypasses one whole block (identity; the block-removal diagnostic).
        With `activation_checkpointing` set, training recomputes each layer's activations in backward.
        The streams between blocks are read by forward hooks (normgrow.train.diagnostics.block_states).
        """
        h = self.embed_tokens(input_ids)
        if self.family.embedding_scale:  # Gemma: embeddings × √H, as its decoder does
            h = h * torch.tensor(self.config.hidden_size**0.5, dtype=h.dtype)
        if self.boundary == "entry":
            h = self.boundary_norm(h)
        padded = position_ids is None
        if padded:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        mask = create_causal_mask(config=self.config, inputs_embeds=h,
                                  attention_mask=attention_mask if padded else None, past_key_values=None,
                                  position_ids=position_ids)
        layer_type = self.family.rotary_layer_type  # Gemma 3: its global layers' rotary base
        position_embeddings = self.rotary_emb(h, position_ids, *([layer_type] if layer_type else []))
        gated = h
        for b in range(self.active_blocks):
            if gate is not None and b == gate[0]:
                gated = h
            if b != skip_block:
                for layer in self.blocks[b]:
                    if self.activation_checkpointing and torch.is_grad_enabled():
                        h = checkpoint(layer, h, position_embeddings, mask, use_reentrant=False)
                    else:
                        h = layer(h, position_embeddings, mask)
        if gate is not None:
            h = gated + gate[1] * (h - gated)
        if self.boundary == "final":
            h = self.boundary_norm(h)
        return h


__all__ = ["BlockStackStudent", "DecoderLayer", "student_config", "init_normal_"]
