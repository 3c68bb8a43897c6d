"""The teacher's model family: the `transformers` sub-layers a student is built from.

"The same sub-layers as the teacher" holds for any supported decoder-only family: the student's
attention, MLP, RMSNorm and rotary embedding are the classes of the teacher's `model_type`
(`transformers.models.<module>.modeling_<module>`), built from a config of the teacher's class with
the student's depth. What a family keeps inside those classes comes with them; what lies between
them on the residual stream (the layer's own norms) is the placement's, the one thing compared.
What differs between families and matters here:
- Qwen3: q/k RMSNorm per head inside attention;
- Qwen2: biases on the q/k/v projections;
- Llama, Mistral: neither;
- Gemma: embeddings scaled by √H before the first layer, and RMSNorm computing (1 + w)·x̂, so a norm
  is the identity at w = 0 (not 1);
- Gemma 2 (`gemma2`): Gemma's √H and (1 + w) norms, attention logits capped by tanh
  (`attn_logit_softcapping`, kept: the family's attention applies it, so the student's and the
  teacher's attention run eager where SDPA was asked for, which has no cap: `attention_kernel`), and
  layers alternating sliding-window and global attention (`layer_types`). Its final logit cap
  (`final_logit_softcapping`, 30 in its released configs) is refused: the fused KD + CE loss,
  evaluation and diagnostics form logits as h·Wᵀ, so a capped teacher would be distilled from logits
  it never produces; set it to null in the teacher's config.json to distil from uncapped logits;
- Gemma 3 (`gemma3_text`): Gemma 2's layer with q/k RMSNorm per head (kept, in attention), separate
  rotary bases for sliding (local) and global layers, no softcapping by default (a final cap is
  refused as for Gemma 2); a bidirectional config (`use_bidirectional_attention`) is no decoder and
  is refused;
- OLMo 2 (`olmo2`): q/k RMSNorm over the full query and key widths (kept, in attention), and its
  layer's norms on the sub-layer outputs before the residual add (h + N(Attn(h)); h + N(MLP(h)):
  no placement here is that layer, so no placement exports as OLMo 2's own class);
- Phi-3 (`phi3`): fused q/k/v (`qkv_proj`) and gate/up (`gate_up_proj`) projections, kept fused (the
  placements that touch single projections — DeepNorm's β, HybridNorm's q/k/v norms — act on the
  value rows or the q/k/v parts of the fused weight); its residual and embedding dropout
  (`resid_pdrop`, `embd_pdrop`: 0 in its released configs) are not applied by any placement.

Every student layer is a global-attention layer (`layer_types` all `full_attention`, no sliding
window, whatever the teacher's config says; Gemma 3's layers take its global rotary base): the K
blocks are then of one kind, so that growth's `copy` operator copies a block onto a block like it
whatever L is, and the student's causal mask spans the whole sequence (as for Mistral and Qwen2's
sliding windows). Where the training sequences fit the teacher's window (`data.max_length` ≤
`sliding_window`), a sliding layer attends as a global one; only Gemma 3's local rotary base is
then not used.

Each family's own decoder layer is one placement's layer (`own_placement`): pre-norm for most,
sandwich for Gemma 2 and 3 (norms on each sub-layer's input and output), none for OLMo 2. A student of
that placement is the family's own decoder and exports as its own class (normgrow.model.export).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

# model_type → (transformers module, class prefix, config class name)
SOURCES = {"qwen3": ("qwen3", "Qwen3", "Qwen3Config"), "qwen2": ("qwen2", "Qwen2", "Qwen2Config"),
           "llama": ("llama", "Llama", "LlamaConfig"), "mistral": ("mistral", "Mistral", "MistralConfig"),
           "gemma": ("gemma", "Gemma", "GemmaConfig"), "gemma2": ("gemma2", "Gemma2", "Gemma2Config"),
           "gemma3_text": ("gemma3", "Gemma3", "Gemma3TextConfig"), "olmo2": ("olmo2", "Olmo2", "Olmo2Config"),
           "phi3": ("phi3", "Phi3", "Phi3Config")}
PREFIXES = {model_type: prefix for model_type, (_, prefix, _) in SOURCES.items()}  # the CausalLM's prefix
GEMMA_NORMS = ("gemma", "gemma2", "gemma3_text")  # (1 + w)·x̂ norms and √H-scaled embeddings
# The student's norm names → the family decoder layer's, where the family's layer is a placement's layer.
PRE_NORM_NAMES = {"attn_layernorm": "input_layernorm", "mlp_layernorm": "post_attention_layernorm"}
SANDWICH_NORM_NAMES = {"attn_layernorm": "input_layernorm", "attn_out_layernorm": "post_attention_layernorm",
                       "mlp_layernorm": "pre_feedforward_layernorm", "mlp_out_layernorm": "post_feedforward_layernorm"}
OWN_PLACEMENT = {"gemma2": "sandwich", "gemma3_text": "sandwich", "olmo2": None}  # others: "pre"


@dataclass(frozen=True)
class Family:
    model_type: str
    config_class: type
    attention: type
    mlp: type
    norm: type
    rotary: type
    embedding_scale: bool = False  # embeddings × √H (Gemma)
    norm_identity: float = 1.0  # the norm weight at which an RMSNorm only normalises
    rotary_layer_type: str | None = None  # the layer type the rotary's forward takes (Gemma 3: per-type bases)
    own_placement: str | None = "pre"  # the placement whose layer is the family's decoder layer (None: none)
    own_norm_names: dict = field(default_factory=lambda: dict(PRE_NORM_NAMES))  # that layer's norm names


def check_supported(config) -> None:
    """A ValueError naming what a config of a supported family sets that the student cannot keep."""
    cap = getattr(config, "final_logit_softcapping", None)
    if cap is not None:
        raise ValueError(f"{config.model_type}: final_logit_softcapping={cap} is not supported: the distillation "
                         "loss, evaluation and diagnostics form logits as h·Wᵀ without a cap; set "
                         "final_logit_softcapping to null in the teacher's config.json to distil from its "
                         "uncapped logits")
    if getattr(config, "use_bidirectional_attention", False):
        raise ValueError(f"{config.model_type}: use_bidirectional_attention is set: a bidirectional encoder "
                         "is no decoder teacher")


def family(config) -> Family:
    """The family of a `transformers` config (a teacher's or a student's), or a clear error."""
    model_type = getattr(config, "model_type", None)
    if model_type not in SOURCES:
        raise ValueError(f"teacher model_type {model_type!r} is not supported; supported decoder families: "
                         f"{', '.join(SOURCES)}")
    check_supported(config)
    module, prefix, config_name = SOURCES[model_type]
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    configuration = importlib.import_module(f"transformers.models.{module}.configuration_{module}")
    gemma = model_type in GEMMA_NORMS
    own = OWN_PLACEMENT.get(model_type, "pre")
    return Family(model_type, getattr(configuration, config_name), getattr(modeling, f"{prefix}Attention"),
                  getattr(modeling, f"{prefix}MLP"), getattr(modeling, f"{prefix}RMSNorm"),
                  getattr(modeling, f"{prefix}RotaryEmbedding"), embedding_scale=gemma,
                  norm_identity=0.0 if gemma else 1.0,
                  rotary_layer_type="full_attention" if model_type == "gemma3_text" else None,
                  own_placement=own, own_norm_names=dict(SANDWICH_NORM_NAMES if own == "sandwich" else PRE_NORM_NAMES))


def attention_kernel(config, requested: str) -> str:
    """The attention implementation a model of `config`'s family runs under: `requested`, but eager where
    the config caps attention logits (Gemma 2's `attn_logit_softcapping`) and SDPA was requested, which
    has no cap (transformers refuses SDPA for Gemma 2); the family's attention passes the cap to eager
    (and to flash or flex attention, which keep it)."""
    if requested == "sdpa" and getattr(config, "attn_logit_softcapping", None) is not None \
            and getattr(config, "model_type", None) == "gemma2":
        return "eager"
    return requested
