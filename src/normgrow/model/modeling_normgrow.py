"""`NormgrowForCausalLM`: an exported block-stack student of any placement as a `transformers` causal LM
(normgrow.model.export; the remote code that `AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True)`
runs).

It has no forward loop of its own: it holds the training code's `BlockStackStudent`
(normgrow.model.student), built with the active blocks only, and puts the LM head after its forward.
The export directory must load where normgrow is not installed, so normgrow.model.export copies this
file there with every module of this room it imports (student, placement, layout, family,
configuration), their imports made relative: the very code the student trained with. The parameter
names are the student's under `student.` (`student.embed_tokens`, `student.blocks.b.i.*`,
`student.boundary_norm`, `student.lm_head`), so the export's weights are the student's saved weights
restricted to its active blocks.

No KV cache: every forward, and every `generate()` step, runs the whole sequence (the placement
layers take no cache). Positions are 0..T-1 in every row, as in training: pad on the right.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from normgrow.model.configuration_normgrow import NormgrowConfig
from normgrow.model.student import BlockStackStudent, DecoderLayer


class NormgrowForCausalLM(PreTrainedModel, GenerationMixin):
    """The first `active_blocks` blocks of a trained student between its embedding and LM head."""

    config_class = NormgrowConfig
    base_model_prefix = "student"
    _supports_sdpa = True
    _no_split_modules = [DecoderLayer.__name__]

    def __init__(self, config: NormgrowConfig):
        super().__init__(config)
        self.student = BlockStackStudent(config.family_config(), config.placement, config.blocks,
                                         config.layers_per_block, built_blocks=config.active_blocks)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """transformers' initialisation, and the rotary embedding's buffers (not in the saved weights) as its
        class computes them from the config: the generic initialisation knows only `inv_freq`, not Gemma
        3's one per layer type (`full_attention_inv_freq`), which it would leave unset."""
        super()._init_weights(module)
        if module is getattr(getattr(self, "student", None), "rotary_emb", None):
            fresh = type(module)(module.config)
            for name, buffer in fresh.named_buffers():
                module.get_buffer(name).copy_(buffer)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.student.embed_tokens

    def get_output_embeddings(self) -> nn.Linear:
        return self.student.lm_head

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, attention_mask=None, **kwargs) -> dict:
        """Every generation step runs the whole sequence so far (no KV cache)."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, **kwargs) -> CausalLMOutputWithPast:
        """Logits (B, T, V) of `input_ids` (B, T); `attention_mask` is 1 on tokens, 0 on right
        padding. With `labels` (B, T; -100 ignored) also the mean next-token cross-entropy."""
        logits = self.student.lm_head(self.student(input_ids, attention_mask))
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size)
        return CausalLMOutputWithPast(loss=loss, logits=logits)


__all__ = ["NormgrowForCausalLM"]
