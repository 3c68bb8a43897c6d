"""The massive-activation probe (normgrow.train.probe) finds an outlier token, and an outlier scalar, where
one is built in, and its attention mass is the exact one on a model whose attention is uniform."""

import pytest
import torch
from conftest import tiny_config
from transformers import AutoModelForCausalLM

from normgrow.train.data import collate
from normgrow.train.probe import massive_activations

SPECIAL = 1


def tiny(attn="eager"):
    """A randomly initialised Qwen3 of `tiny_config` with 2 heads of width 16 (Qwen3's own init), on `attn`."""
    torch.manual_seed(0)
    config = tiny_config("qwen3", num_attention_heads=2, num_key_value_heads=1, head_dim=16)
    config._attn_implementation = attn
    return AutoModelForCausalLM.from_config(config).eval()


def batch():
    import numpy as np

    g = np.random.default_rng(0)
    docs = [np.concatenate([[SPECIAL], g.integers(2, 64, n)]) for n in (15, 9)]
    return collate(docs, pad_id=0)


def test_an_outlier_token_is_found_on_its_structural_position():
    model = tiny()
    plain = massive_activations(model, batch(), [SPECIAL])
    with torch.no_grad():
        model.get_input_embeddings().weight[SPECIAL] *= 300
    outlier = massive_activations(model, batch(), [SPECIAL])
    assert [r["layer"] for r in outlier] == [1, 2]
    assert max(r["max_over_median"] for r in plain) < 5
    for row in outlier:  # the scale rides the residual stream through every layer
        assert row["max_over_median"] > 50 and row["structural_over_regular"] > 50
        assert row["scalar_structural_over_regular"] > 50
    assert max(r["scalar_structural_over_regular"] for r in plain) < 5


def test_an_outlier_scalar_is_found_in_its_dimension_and_position_beyond_its_token_rms():
    """One dimension of the structural token's embedding at 300× the largest entry of the table: the probe finds
    that scalar at position 0 in its dimension in every layer, standing further above the median
    |activation| than the token's RMS stands above the median token's (diluted by about √32)."""
    model = tiny()
    with torch.no_grad():
        table = model.get_input_embeddings().weight
        table[SPECIAL, 5] = 300 * table.abs().max()
    for row in massive_activations(model, batch(), [SPECIAL]):
        assert (row["scalar_dimension"], row["scalar_position"]) == (5, 0)
        assert row["scalar_max_over_median"] > 3 * row["max_over_median"] > 50


def test_attention_mass_on_structural_keys_is_exact_under_uniform_attention():
    model = tiny()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.zero_()  # every logit 0: each query spreads evenly over its keys
    rows = massive_activations(model, batch(), [SPECIAL])
    # only position 0 is structural; query q > 0 puts 1 / (q + 1) on it
    expected = torch.tensor([1 / (q + 1) for n in (16, 10) for q in range(1, n)]).mean()
    for row in rows:
        assert row["attention_on_structural"] == pytest.approx(float(expected), rel=1e-5)


def test_the_probe_refuses_a_model_without_attention_weights():
    with pytest.raises(ValueError, match="eager"):
        massive_activations(tiny("sdpa"), batch(), [SPECIAL])
