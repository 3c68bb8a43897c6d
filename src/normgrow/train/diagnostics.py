"""Boundary-scale diagnostics on the fixed diagnostic batch (paper §Boundary-Scale Diagnostics,
App. B.2). Every statistic is over real tokens only: padding never enters.

Definitions (h is the residual stream, a (B, T, H) tensor; "real" = attention_mask == 1):
- per-token RMS: rms(h_{b,t}) = sqrt(mean_k h_{b,t,k}²), one value per real token;
- max/median |scalar|: the largest |h_{b,t,k}| over every real token and hidden dimension ÷ the median
  |h_{b,t,k}| over the same, with the dimension k and the position t where the largest sits (reported
  with the RMS statistics of all real tokens). The massive activations of Sun et al. 2024 ("Massive
  activations in large language models") are single scalars, a few dimensions of a few tokens thousands
  of times the median magnitude; a token's RMS dilutes one such dimension by about √H;
- structural/regular |scalar|: the mean over structural tokens of each token's largest |h_{b,t,k}| (over k)
  ÷ the same mean over regular tokens — the structural/regular RMS with a token's RMS replaced by its
  largest scalar, so that one massive dimension is not diluted;
- attention on structural tokens (per layer): for each head and each real query position q > 0, the
  attention weight summed over the structural key positions ≤ q; the mean over heads, queries and
  documents (Sun et al. 2024's "attention sink": 0.3–0.8 on position 0 in SmolLM2-135M, uniform
  attention gives 1/(q + 1));
- boundary b: the stream entering block 0 (b = 0, after N_entry for post-norm) and leaving block
  b−1 (b = 1..active blocks; for pre-norm before N_final);
- RMS statistics of a set of tokens: mean, standard deviation across tokens (population, ddof 0),
  max, median, and Pearson kurtosis E[(x−μ)⁴]/σ⁴ (3 for a normal distribution; over n tokens it
  cannot exceed n − 2 + 1/(n − 1), so the paper's > 2,400 needs a batch of more than 2,400 tokens);
- structural tokens: special tokens (the document-boundary token and any other special id) and the
  first position of every sequence; regular tokens: all other real tokens;
- block removal of block l: ΔCE_l = CE(block l bypassed) − CE(full), next-token CE over the batch's
  loss positions; angular distance_l = mean over real tokens of arccos(cos(h_in, h_out))/π, where
  h_in / h_out are the streams entering / leaving block l in the full forward pass.
"""

from __future__ import annotations

import math

import torch

from normgrow.model.student import at_positions
from normgrow.train.data import Batch
from normgrow.train.forward import positions_and_labels


def per_token_rms(h: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """RMS over the hidden dimension at every real token, flattened in (B, T) order."""
    return h.float().pow(2).mean(-1).sqrt()[attention_mask.bool()]


def scalar_outlier(h: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, float | int]:
    """max/median |scalar| of `h` over its real tokens (module docstring), with the largest and the median
    |activation| and the dimension and position (in its sequence) of the largest."""
    real = attention_mask.bool()
    magnitude = h.float().abs()[real]  # (real tokens, H), in (B, T) order
    token, dimension = divmod(int(magnitude.argmax()), magnitude.shape[1])
    top, median = magnitude[token, dimension], magnitude.median()
    return {"scalar_max_over_median": float(top / median), "scalar_max": float(top), "scalar_median": float(median),
            "scalar_dimension": dimension, "scalar_position": int(real.nonzero()[token, 1])}


def scalar_structural_over_regular(h: torch.Tensor, attention_mask: torch.Tensor, structural: torch.Tensor) -> float:
    """structural/regular |scalar| (module docstring); `structural` the (B, T) mask of structural_mask."""
    real = attention_mask.bool()
    peak = h.float().abs().amax(-1)  # (B, T): each token's largest |activation|
    return float(peak[structural & real].mean() / peak[~structural & real].mean())


def attention_on_structural(weights: torch.Tensor, structural: torch.Tensor, attention_mask: torch.Tensor) -> float:
    """Attention on structural tokens of one layer (module docstring) from its (B, heads, T, T) weights."""
    keys = structural[:, None, None, :].float()  # (B, 1, 1, T): structural key positions
    queries = attention_mask.bool().clone()
    queries[:, 0] = False  # queries after position 0
    mass = (weights.float() * keys).sum(-1).mean(1)  # (B, T): per query, over heads
    return float(mass[queries].mean())


def kurtosis(x: torch.Tensor) -> float:
    """Pearson kurtosis E[(x−μ)⁴]/σ⁴ with population moments (3 for a normal distribution)."""
    x = x.double()
    centred = x - x.mean()
    var = centred.pow(2).mean()
    return float(centred.pow(4).mean() / var.pow(2)) if var > 0 else math.nan


def rms_stats(values: torch.Tensor) -> dict[str, float]:
    if values.numel() == 0:
        return {"mean": math.nan, "std": math.nan, "max": math.nan, "median": math.nan, "kurtosis": math.nan,
                "count": 0}
    return {"mean": float(values.mean()), "std": float(values.std(unbiased=False)), "max": float(values.max()),
            "median": float(values.median()), "kurtosis": kurtosis(values), "count": int(values.numel())}


def structural_mask(batch: Batch, special_ids: list[int]) -> torch.Tensor:
    """(B, T) mask of structural tokens: special ids and the first position, real tokens only."""
    special = torch.isin(batch.input_ids, torch.tensor(special_ids, dtype=batch.input_ids.dtype,
                                                       device=batch.input_ids.device))
    first = torch.zeros_like(special)
    first[:, 0] = True
    return (special | first) & batch.attention_mask.bool()


def angular_distance(h_in: torch.Tensor, h_out: torch.Tensor, attention_mask: torch.Tensor) -> float:
    """Mean over real tokens of arccos(cos(h_in, h_out))/π (0 = same direction, 1 = opposite)."""
    real = attention_mask.bool()
    cos = torch.nn.functional.cosine_similarity(h_in.double()[real], h_out.double()[real], dim=-1)
    return float((torch.arccos(cos.clamp(-1.0, 1.0)) / math.pi).mean())


def next_token_ce(student, batch: Batch, skip_block: int | None = None,
                  targets: tuple[torch.Tensor, torch.Tensor] | None = None, chunk: int = 4096) -> torch.Tensor:
    """Mean next-token CE of the student over the batch's loss positions (`targets`, if computed);
    logits `chunk` positions at a time, so no (positions × vocabulary) tensor exists."""
    positions, labels = targets if targets is not None else positions_and_labels(batch)
    hidden = at_positions(student(batch.input_ids, batch.attention_mask, skip_block=skip_block), positions)
    total = hidden.new_zeros((), dtype=torch.float32)
    for start in range(0, len(labels), chunk):
        logits = student.lm_head(hidden[start:start + chunk]).float()
        total += torch.nn.functional.cross_entropy(logits, labels[start:start + chunk], reduction="sum")
    return total / len(labels)


def block_states(student, batch: Batch) -> list[torch.Tensor]:
    """The residual stream entering block 0 and leaving every active block of one forward (boundaries
    0..active blocks), read by forward hooks on the blocks' first and last layers, as transformers'
    `output_hidden_states` returns every layer's."""
    states: list[torch.Tensor] = []
    blocks = student.blocks[:student.active_blocks]
    hooks = [blocks[0][0].register_forward_pre_hook(lambda module, args: states.append(args[0]))]
    hooks += [block[-1].register_forward_hook(lambda module, args, output: states.append(output)) for block in blocks]
    try:
        student(batch.input_ids, batch.attention_mask)
    finally:
        for hook in hooks:
            hook.remove()
    return states


@torch.inference_mode()
def block_attention_on_structural(student, batch: Batch, structural: torch.Tensor) -> list[float]:
    """Attention on structural tokens (module docstring) of every active block: the mean over its layers, from
    one forward with eager attention (the student's own kernel restored after it)."""
    per_layer: dict[int, list[float]] = {}
    hooks = []

    def on_attention(block):
        def hook(module, args, output):
            per_layer.setdefault(block, []).append(attention_on_structural(output[1], structural, batch.attention_mask))
            return (output[0], None)
        return hook

    for b in range(student.active_blocks):
        hooks += [layer.self_attn.register_forward_hook(on_attention(b)) for layer in student.blocks[b]]
    kernel = student.config._attn_implementation
    student.config._attn_implementation = "eager"  # the layers share this config: they return their weights
    try:
        student(batch.input_ids, batch.attention_mask)
    finally:
        student.config._attn_implementation = kernel
        for h in hooks:
            h.remove()
    return [sum(per_layer[b]) / len(per_layer[b]) for b in range(student.active_blocks)]


@torch.inference_mode()
def diagnose(student, batch: Batch, special_ids: list[int], removal: bool = True, chunk: int = 4096) -> dict:
    """All checkpoint-level diagnostics of `student` (at its active depth) on one batch; CE logits
    `chunk` positions at a time."""
    student.eval()
    streams = block_states(student, batch)
    mask = structural_mask(batch, special_ids)
    structural = mask[batch.attention_mask.bool()]
    attention = block_attention_on_structural(student, batch, mask)
    boundaries = []
    for b, h in enumerate(streams):
        rms = per_token_rms(h, batch.attention_mask)
        every = rms_stats(rms) | scalar_outlier(h, batch.attention_mask) | {
            "scalar_structural_over_regular": scalar_structural_over_regular(h, batch.attention_mask, mask)}
        if b >= 1:  # the attention of the block the stream has just left
            every["attention_on_structural"] = attention[b - 1]
        boundaries.append({"boundary": b, "all": every, "structural": rms_stats(rms[structural]),
                           "regular": rms_stats(rms[~structural]), "per_token_rms": rms.tolist()})
    report = {"active_blocks": student.active_blocks, "boundaries": boundaries,
              "structural_tokens": int(structural.sum()), "real_tokens": int(structural.numel())}
    if removal:
        targets = positions_and_labels(batch)
        full = float(next_token_ce(student, batch, targets=targets, chunk=chunk))
        report["ce_full"] = full
        report["blocks"] = [
            {"block": block, "delta_ce": float(next_token_ce(student, batch, block, targets, chunk)) - full,
             "angular_distance": angular_distance(streams[block], streams[block + 1], batch.attention_mask)}
            for block in range(student.active_blocks)]
    return report
