"""Massive activations in a decoder: per layer, how far the largest token's hidden-state RMS and the
largest single activation stand above the typical ones, whether that scale sits on the structural
tokens, and how much attention falls on them (Sun et al. 2024, "Massive activations in large language
models"; the paper's Fig. 5a and §Boundary-Scale Diagnostics measure the same concentration in the
pre-norm student's stream).

On one batch, real tokens only, for each decoder layer ℓ = 1..T with output h_ℓ (the residual
stream leaving layer ℓ, before any final norm):
- max/median token RMS: the largest per-token RMS (normgrow.train.diagnostics.per_token_rms) over the
  batch ÷ the median one;
- max/median |scalar|: the largest |activation| over the batch's real tokens × hidden dimensions ÷ the
  median one, with its dimension and position (defined in normgrow.train.diagnostics: Sun et al.'s
  massive activations are single scalars, which the per-token RMS dilutes by about √width);
- structural/regular RMS: the mean per-token RMS of the structural tokens
  (normgrow.train.diagnostics.structural_mask: special ids and the first position) ÷ that of the others;
- structural/regular |scalar|: the same with each token's largest |activation| in place of its RMS
  (normgrow.train.diagnostics.scalar_structural_over_regular);
- attention on structural tokens: for each head and each real query position q > 0, the attention
  weight summed over the structural key positions ≤ q; the mean over heads, queries and documents
  (eager attention: the probe loads or runs the model with `attn_implementation="eager"`).

Every layer's attention weights are reduced as the layer runs and dropped, so no
(layers × heads × T × T) tensor is held.
"""

from __future__ import annotations

import torch

from normgrow.train.data import Batch
from normgrow.train.diagnostics import (
    attention_on_structural,
    per_token_rms,
    scalar_outlier,
    scalar_structural_over_regular,
    structural_mask,
)


def _first(output):
    return output[0] if isinstance(output, tuple) else output


@torch.inference_mode()
def massive_activations(model, batch: Batch, special_ids: list[int]) -> list[dict]:
    """The probe's statistics for every decoder layer of a transformers causal LM (module
    docstring), on `batch`; one dict per layer, `layer` counted from 1."""
    if model.config._attn_implementation != "eager":
        raise ValueError("the massive-activation probe reads attention weights: load the model with "
                         "attn_implementation='eager'")
    layers = model.get_decoder().layers
    real = batch.attention_mask.bool()
    structural = structural_mask(batch, special_ids)
    rows: list[dict] = [{"layer": i + 1} for i in range(len(layers))]
    hooks = []

    def on_layer(i):
        def hook(module, args, output):
            h = _first(output)
            rms = per_token_rms(h, batch.attention_mask)
            flat = structural[real]
            rows[i].update(max_over_median=float(rms.max() / rms.median()),
                           structural_over_regular=float(rms[flat].mean() / rms[~flat].mean()),
                           max_rms=float(rms.max()), median_rms=float(rms.median()),
                           **scalar_outlier(h, batch.attention_mask),
                           scalar_structural_over_regular=scalar_structural_over_regular(h, batch.attention_mask,
                                                                                         structural))
        return hook

    def on_attention(i):
        def hook(module, args, output):
            rows[i]["attention_on_structural"] = attention_on_structural(output[1], structural, batch.attention_mask)
            return (output[0], None)
        return hook

    for i, layer in enumerate(layers):
        hooks.append(layer.register_forward_hook(on_layer(i)))
        hooks.append(layer.self_attn.register_forward_hook(on_attention(i)))
    try:
        model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True,
              use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return rows
