"""The regime properties on a run whose answers are known."""

import pandas as pd
import pytest

from normgrow.paper.reference import paper_reference
from normgrow.paper.regime import leaves_regime, regime

TEACHER = {"num_hidden_layers": 12, "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
           "head_dim": 4, "intermediate_size": 16, "vocab_size": 10, "tie_word_embeddings": False,
           "parameters": 5000, "validation_ce": 4.0}
DATA = {"splits": {"train": {"tokens": 4000}}}


def config(layers_per_block=1, warmup_fraction=0.15):
    return {"student": {"blocks": 3, "layers_per_block": layers_per_block},
            "train": {"phase_steps": 150, "warmup_fraction": warmup_fraction}}


def phases(final_ces=(4.5, 4.4)):
    rows = []
    for (run, ce) in zip(("pre-grow", "post-grow"), final_ces, strict=True):
        for p in range(3):
            rows.append({"run": run, "seed": 42, "phase": p, "ce": ce + 0.2 * (2 - p), "kd": 0.5, "kd_soft": 5.0,
                         "run_unique_tokens": 1000})
    return pd.DataFrame(rows)


def by_name(properties):
    """The properties by their short name: what stands before the first " (" or ":" of each name."""
    return {p.name.split(" (")[0].split(":")[0]: p for p in properties}


def test_a_run_in_the_regime():
    props = by_name(regime(config(), TEACHER, DATA, phases(), paper_reference()["regime"]))
    depth = props["student depth / teacher depth"]
    assert depth.ours == "3 / 12 = 0.25" and depth.in_regime
    # layer = attention 8·8 + 2·8·4 + 8·8 + 2·4 = 200, MLP 3·8·16 = 384, norms 16: 600; ×3 + 2·10·8 + 8 = 1968
    assert props["student / teacher parameters"].ours == "0.00M / 0.01M = 0.39"
    lead = props["teacher ahead of every run"]
    assert lead.ours.startswith("+0.400 (post-grow") and lead.in_regime
    assert props["warm-up updates per phase"].ours.startswith("22 ") and props["warm-up updates per phase"].in_regime
    assert props["tokens per student parameter"].ours == f"{1000 / 1968:.2f}"
    assert props["unique-token coverage"].ours == "0.25"
    kd = [p for p in props.values() if p.name.startswith("KD soft / CE")]
    assert kd[0].ours == f"{(5.0 / 4.9 + 5.0 / 4.8) / 2:.3f}; KL 0.500"  # phase 0: CE 4.5 + 0.4, 4.4 + 0.4
    assert leaves_regime(list(props.values())) == []


def test_a_run_outside_the_regime_names_each_property():
    short = phases((4.1, 3.9)).assign(run_unique_tokens=900)  # 900 / 1968 = 0.46 tokens per parameter
    props = regime(config(layers_per_block=2, warmup_fraction=0.015), TEACHER, DATA, short,
                   paper_reference()["regime"])
    out = leaves_regime(props)
    assert len(out) == 4
    assert out[0].startswith("student depth") and out[1].startswith("teacher ahead") and out[2].startswith("warm-up")
    assert out[3].startswith("tokens per student parameter")
    lead = next(p for p in props if p.name.startswith("teacher ahead"))
    assert lead.ours == "-0.100 (post-grow; teacher 4.000)"


def test_the_teacher_lead_reads_each_runs_own_last_phase():
    """A one-phase joint run ends at phase 0: its final CE counts, though other runs go on to phase 2."""
    joint = pd.DataFrame([{"run": "post-joint", "seed": 42, "phase": 0, "ce": 4.1, "kd": 0.5, "kd_soft": 5.0,
                           "run_unique_tokens": 1000}])
    props = by_name(regime(config(), TEACHER, DATA, pd.concat([phases(), joint], ignore_index=True),
                           paper_reference()["regime"]))
    lead = props["teacher ahead of every run"]
    assert lead.ours == "+0.100 (post-joint; teacher 4.000)" and lead.in_regime is False


@pytest.mark.parametrize("fraction,updates", [(0.015, 2), (0.134, 20), (0.13, 20), (0.12, 18)])
def test_warmup_updates(fraction, updates):
    prop = next(p for p in regime(config(warmup_fraction=fraction), TEACHER, DATA, phases(),
                                  paper_reference()["regime"]) if p.name.startswith("warm-up"))
    assert prop.ours.startswith(f"{updates} ") and prop.in_regime == (updates >= 20)


@pytest.mark.parametrize("layers,teacher_layers,in_regime", [(4, 12, True), (3, 9, True), (4, 11, False)])
def test_depth_ratio_of_one_third_is_in_the_regime(layers, teacher_layers, in_regime):
    """S/T ≤ 1/3: 4 layers under a 12-layer teacher (exactly 1/3) is in the regime."""
    cfg = config()
    cfg["student"] = {"blocks": 1, "layers_per_block": layers}
    prop = regime(cfg, {**TEACHER, "num_hidden_layers": teacher_layers}, DATA, phases(), paper_reference()["regime"])[0]
    assert prop.name.startswith("student depth") and prop.in_regime is in_regime
