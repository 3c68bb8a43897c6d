"""`NormgrowForCausalLM`: an exported block-stack student of any placement as a `transformers` causal LM
(normgrow.export; the remote code that `AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True)`
runs).

Why this shape. The export directory must load where normgrow is not installed, yet the placements
must not be restated by hand, where they could drift from what was trained. So the layers are not
rewritten here: normgrow.export copies this file into the directory together with the package
modules it imports — `placement.py` (every placement's layer class), `family.py` (which
`transformers` sub-layers a family uses) and what they import in turn — their imports of normgrow
made relative: the very code the student trained with. Only the stack around the layers is
restated below, in a few lines that tests/test_export.py checks against `BlockStackStudent.forward`
for every placement and family: embedding (× √H for Gemma) → [entry norm] → the active layers →
[final norm] → LM head. Copying student.py instead would carry its training machinery (growth
operators, gating, checkpointing, the inactive blocks) into every export. The parameter names are
the student's own (`embed_tokens`, `blocks.b.i.*`, `boundary_norm`, `lm_head`), so the export's
weights are the student's checkpoint restricted to its active blocks.

No KV cache: every forward, and every `generate()` step, runs the whole sequence (the placement
layers take no cache). Positions are 0..T-1 in every row, as in training: pad on the right.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_normgrow import NormgrowConfig
from .family import family
from .placement import LAYERS, boundary, layer_classes


class NormgrowForCausalLM(PreTrainedModel, GenerationMixin):
    """The first `active_blocks` blocks of a trained student between its embedding and LM head."""

    config_class = NormgrowConfig
    base_model_prefix = ""
    _supports_sdpa = True
    _no_split_modules = [layer.__name__ for layer in LAYERS.values()]

    def __init__(self, config: NormgrowConfig):
        super().__init__(config)
        layers_config = config.family_config()
        self.family = family(layers_config)
        self.boundary = boundary(config.placement)
        self.layers_config = layers_config
        depth = config.blocks * config.layers_per_block  # the trained depth (DeepNorm's α)
        classes = layer_classes(config.placement, config.active_blocks)
        self.embed_tokens = nn.Embedding(layers_config.vocab_size, layers_config.hidden_size)
        self.blocks = nn.ModuleList(
            nn.ModuleList(classes[b](layers_config, b * config.layers_per_block + i, depth)
                          for i in range(config.layers_per_block))
            for b in range(config.active_blocks)
        )
        self.boundary_norm = self.family.norm(layers_config.hidden_size, eps=layers_config.rms_norm_eps)
        self.rotary_emb = self.family.rotary(layers_config)
        self.lm_head = nn.Linear(layers_config.hidden_size, layers_config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, attention_mask=None, **kwargs) -> dict:
        """Every generation step runs the whole sequence so far (no KV cache)."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **kwargs) -> CausalLMOutputWithPast:
        """Logits (B, T, V) of `input_ids` (B, T); `attention_mask` is 1 on tokens, 0 on right
        padding. With `labels` (B, T; -100 ignored) also the mean next-token cross-entropy."""
        h = self.embed_tokens(input_ids)
        if self.family.embedding_scale:  # Gemma: embeddings × √H
            h = h * torch.tensor(self.layers_config.hidden_size**0.5, dtype=h.dtype)
        if self.boundary == "entry":
            h = self.boundary_norm(h)
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        mask = create_causal_mask(config=self.layers_config, inputs_embeds=h, attention_mask=attention_mask,
                                  past_key_values=None, position_ids=position_ids)
        position_embeddings = self.rotary_emb(h, position_ids)
        for block in self.blocks:
            for layer in block:
                h = layer(h, position_embeddings, mask)
        if self.boundary == "final":
            h = self.boundary_norm(h)
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=self.layers_config.vocab_size)
        return CausalLMOutputWithPast(loss=loss, logits=logits)


__all__ = ["NormgrowForCausalLM"]
