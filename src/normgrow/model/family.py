"""The teacher's model family: the `transformers` sub-layers a student is built from.

"The same sub-layers as the teacher" holds for any supported decoder-only family: the student's
attention, MLP, RMSNorm and rotary embedding are the classes of the teacher's `model_type`
(`transformers.models.<type>.modeling_<type>`), built from a config of the teacher's class with
the student's depth. What differs between families and matters here:
- Qwen3: q/k RMSNorm per head inside attention;
- Qwen2: biases on the q/k/v projections;
- Llama, Mistral: neither (Mistral's sliding window comes with its config);
- Gemma: embeddings scaled by √H before the first layer, and RMSNorm computing (1 + w)·x̂, so a norm
  is the identity at w = 0 (not 1).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

PREFIXES = {"qwen3": "Qwen3", "qwen2": "Qwen2", "llama": "Llama", "mistral": "Mistral", "gemma": "Gemma"}


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


def family(config) -> Family:
    """The family of a `transformers` config (a teacher's or a student's), or a clear error."""
    model_type = getattr(config, "model_type", None)
    if model_type not in PREFIXES:
        raise ValueError(f"teacher model_type {model_type!r} is not supported; supported decoder families: "
                         f"{', '.join(PREFIXES)}")
    prefix = PREFIXES[model_type]
    modeling = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    configuration = importlib.import_module(f"transformers.models.{model_type}.configuration_{model_type}")
    gemma = model_type == "gemma"
    return Family(model_type, getattr(configuration, f"{prefix}Config"), getattr(modeling, f"{prefix}Attention"),
                  getattr(modeling, f"{prefix}MLP"), getattr(modeling, f"{prefix}RMSNorm"),
                  getattr(modeling, f"{prefix}RotaryEmbedding"), embedding_scale=gemma,
                  norm_identity=0.0 if gemma else 1.0)
