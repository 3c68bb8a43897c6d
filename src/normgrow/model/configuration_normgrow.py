"""`NormgrowConfig`: the `transformers` config of an exported block-stack student of any placement
(normgrow.model.export; the remote code that `AutoConfig.from_pretrained(dir, trust_remote_code=True)` runs).

This file is copied as it is into every non-pre-norm export directory, where it must stand alone: it
imports only `transformers`. The student's layer dimensions are those of a config of the teacher's
family (`layers_config`, e.g. a Qwen3Config's fields), kept whole rather than flattened here, so that the
family's own attention, MLP, norm and rotary classes are built from exactly the config they read.
"""

from __future__ import annotations

from transformers import AutoConfig, PreTrainedConfig


class NormgrowConfig(PreTrainedConfig):
    """An exported student: `placement` (a normgrow.model.layout placement name, e.g. "post" or "mix-ln@2"),
    `blocks` (K) × `layers_per_block` (L) trained, the first `active_blocks` exported; `layers_config`
    the family config's fields (with `model_type`) for the active layers. K is kept because DeepNorm's α
    depends on the trained depth K·L, not on the exported one."""

    model_type = "normgrow"

    layers_config: dict | None = None  # not `decoder`: transformers reads that name as a text sub-config
    placement: str = "post"
    blocks: int = 1
    layers_per_block: int = 1
    active_blocks: int = 1
    vocab_size: int | None = None
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    tie_word_embeddings: bool = False
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None

    def family_config(self):
        """The family's config (Qwen3Config, LlamaConfig, ...) that the layers are built from, with
        this config's attention implementation."""
        fields = dict(self.layers_config)
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
        config._attn_implementation = self._attn_implementation or "sdpa"
        return config


__all__ = ["NormgrowConfig"]
