"""The memory trace (normgrow.trace): the trainer's own step on fake tensors over a fake world of
ranks, at a reduced shape (bounds that the fused loss and the teacher forward must keep) and once at
the paper's shape through the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from transformers import Qwen3Config

from normgrow.cli import main
from normgrow.config import validate_config
from normgrow.plan import plan
from normgrow.trace import GiB, Shape, trace_one_gpu, trace_training

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def reduced():
    """bf16, activation checkpointing, 2 documents × 256 tokens per rank on 4 ranks, vocabulary 4096:
    full logits of one rank's positions (510 × 4096) would be 4× the head's fp32 gradient."""
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()))
    config["train"].update(precision="bfloat16", activation_checkpointing=True, loss_chunk=64, batch_size=8)
    config["teacher"]["dtype"] = "bfloat16"
    config["data"].update(max_length=256, diag_docs=2, diag_max_length=256)
    teacher = Qwen3Config(vocab_size=4096, hidden_size=64, intermediate_size=192, num_hidden_layers=4,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False)
    return config, teacher


def test_traced_step_keeps_the_plan_and_never_materialises_logits(reduced):
    config, teacher = reduced
    shape = Shape(gpus=4, rows=2, tokens=256)
    result = trace_training(config, teacher, shape)
    positions = shape.rows * (shape.tokens - 1)
    logits_bytes = positions * teacher.vocab_size * 2  # bf16 logits of this rank's loss positions
    assert result["largest_tensor"]["gib"] * GiB < logits_bytes / 2, result["largest_tensor"]
    traced = (result["peak_gib"]["Total"] + result["teacher_gib"]) * GiB / 1e9
    planned = plan(config, teacher, shape.gpus, 80)["total_gb"]
    assert traced <= 1.1 * planned, (traced, planned)
    assert result["peak_gib"]["OptState"] * GiB == pytest.approx(
        8 * plan(config, teacher, shape.gpus, 80)["parameters"]["trainable"] / shape.gpus, rel=0.01)


def test_teacher_check_keeps_one_layer_of_transients(reduced):
    """Inference frees each layer's activations and keeps no KV cache: the teacher check's working
    set stays within one layer's transients and one chunk of logits, whatever the depth (16 layers
    of keys and values would exceed it); the diagnostics' CE never forms full logits either."""
    config, _ = reduced
    config["train"]["loss_chunk"] = 16
    teacher = Qwen3Config(vocab_size=4096, hidden_size=64, intermediate_size=192, num_hidden_layers=16,
                          num_attention_heads=4, num_key_value_heads=4, head_dim=16, tie_word_embeddings=False)
    rows, tokens = 2, config["data"]["max_length"]
    one_gpu = trace_one_gpu(config, teacher, rows)
    layer = 2 * rows * tokens * (3 * teacher.intermediate_size + 4 * teacher.hidden_size)
    hidden, logits = 2 * rows * tokens * teacher.hidden_size, 3 * 4 * 16 * teacher.vocab_size
    kv_cache = teacher.num_hidden_layers * 2 * 2 * rows * tokens * teacher.num_key_value_heads * teacher.head_dim
    assert layer + 2 * hidden + logits < kv_cache  # the bound below can tell
    assert one_gpu["teacher check"]["working set"] * GiB <= layer + 2 * hidden + logits, one_gpu["teacher check"]
    assert one_gpu["diagnostics"]["largest tensor"]["gib"] * GiB < 4 * 255 * teacher.vocab_size


@pytest.mark.slow
def test_paper_shape_traced_from_the_command_line(capsys):
    args = [str(REPO / "config.yaml"), str(REPO / "configs" / "paper.yaml"), "--gpus", "8", "--no-search",
            "--teacher-config", str(REPO / "configs" / "teachers" / "qwen3-8b-base")]
    assert main(["trace", *args, "--gpu-gb", "80"]) == 0
    out = capsys.readouterr().out
    assert "8 documents × 8,192 tokens per rank" in out and "→ fits in 90% of 80 GB" in out
    assert main(["trace", *args, "--gpu-gb", "40"]) == 1
    assert "does NOT fit" in capsys.readouterr().out
