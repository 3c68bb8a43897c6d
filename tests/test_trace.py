"""The memory trace (normgrow.cluster.trace): the trainer's own step on fake tensors over a fake world of
ranks, at a reduced shape (bounds that the fused loss and the teacher forward must keep; what each
student of a group on one teacher forward adds) and once at the paper's shape through the command
line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from transformers import Qwen3Config

from normgrow.cli import main
from normgrow.cluster.plan import plan
from normgrow.cluster.trace import GiB, Shape, trace_one_gpu, trace_training
from normgrow.design.config import validate_config

REDUCED = {"train": {"precision": "bfloat16", "activation_checkpointing": True, "loss_chunk": 64, "batch_size": 8},
           "teacher": {"dtype": "bfloat16"}, "data": {"max_length": 256, "diag_docs": 2, "diag_max_length": 256}}

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def reduced():
    """bf16, activation checkpointing, 2 documents × 256 tokens per rank on 4 ranks, vocabulary 4096:
    full logits of one rank's positions (510 × 4096) would be 4× the head's fp32 gradient."""
    return reduced_setting()


def reduced_setting():
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()))
    for section, values in REDUCED.items():
        config[section].update(values)
    teacher = Qwen3Config(vocab_size=4096, hidden_size=64, intermediate_size=192, num_hidden_layers=4,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False)
    return config, teacher


@pytest.fixture(scope="module")
def groups():
    """The reduced setting's training traced for a phase alone and a group of two (4 ranks, 2
    documents × 256 tokens per rank)."""
    config, teacher = reduced_setting()
    shape = Shape(gpus=4, rows=2, tokens=256)
    return config, teacher, shape, {n: trace_training(config, teacher, shape, students=n) for n in (1, 2)}


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


def test_each_student_of_a_group_adds_its_sharded_weights_and_adamw_state_not_a_teacher(groups):
    """A group on one teacher forward, traced as Trainer.train_step runs it: the second student adds
    its sharded fp32 weights and AdamW moments; its gradients are freed by its optimizer step and its
    activations by its backward, and the teacher runs once (a second teacher forward's hidden states
    alone would exceed the tolerance). The plan adds exactly that and stays within the trace's bound."""
    config, teacher, shape, traces = groups
    one, two = traces[1], traces[2]
    counts = plan(config, teacher, shape.gpus, 80)["parameters"]
    student = (12 * counts["trainable"] + 4 * counts["embedding"]) / shape.gpus
    added = (two["peak_gib"]["Total"] - one["peak_gib"]["Total"]) * GiB
    teacher_hidden = 2 * shape.rows * (shape.tokens - 1) * teacher.hidden_size
    assert teacher_hidden > 0.01 * student  # the bound below can tell a second teacher forward
    assert added == pytest.approx(student, rel=0.01), (added, student)
    assert two["peak_gib"]["OptState"] == pytest.approx(2 * one["peak_gib"]["OptState"])
    assert two["peak_gib"]["Sharded Grad"] == one["peak_gib"]["Sharded Grad"]  # one student's at a time
    assert two["teacher_gib"] == one["teacher_gib"] and (one["students"], two["students"]) == (1, 2)
    planned = [plan(config, teacher, shape.gpus, 80, students=n)["total_gb"] for n in (1, 2)]
    assert (planned[1] - planned[0]) * 1e9 == pytest.approx(student)
    for result, gb in zip((one, two), planned, strict=True):
        assert (result["peak_gib"]["Total"] + result["teacher_gib"]) * GiB / 1e9 <= 1.1 * gb


def test_trace_command_traces_the_configs_group_and_finds_the_largest_that_fits(groups, tmp_path, capsys):
    """`trace` traces a group of resources.train.group_size students by default, prints it, compares
    it with the plan of the same group, and `--largest-group` finds the largest group under 90% of
    --gpu-gb (here set half a student above the peak of 3: each student adds the same, test above)."""
    config, teacher, _, traces = groups
    one, two = ((traces[n]["peak_gib"]["Total"] + traces[n]["teacher_gib"]) * GiB / 1e9 for n in (1, 2))
    gpu_gb = (one + 2.5 * (two - one)) / 0.9
    teacher.save_pretrained(tmp_path / "teacher")
    (tmp_path / "reduced.yaml").write_text(yaml.safe_dump({**REDUCED, "resources": {"train": {"group_size": 2}}}))
    args = ["trace", str(REPO / "config.yaml"), str(tmp_path / "reduced.yaml"), "--gpus", "4", "--gpu-gb",
            str(gpu_gb), "--teacher-config", str(tmp_path / "teacher"), "--no-search", "--largest-group",
            "--json", str(tmp_path / "trace.json")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2 documents × 256 tokens per rank, a group of 2 students on one teacher forward per batch" in out
    assert "largest group that fits: 3 students at 2 documents per rank" in out
    result = json.loads((tmp_path / "trace.json").read_text())
    assert result["students"] == 2 and result["plan_gb"] == plan(config, teacher, 4, gpu_gb, students=2)["total_gb"]


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
    assert "8 documents × 8,192 tokens per rank, one phase" in out and "→ fits in 90% of 80 GB" in out
    assert main(["trace", *args, "--gpu-gb", "40"]) == 1
    assert "does NOT fit" in capsys.readouterr().out


def test_a_varlen_kernel_is_refused_in_one_line(tmp_path, capsys):
    """flex_attention builds its block mask from the data, which fake tensors do not hold: the trace says so
    and exits 1 before tracing, instead of failing deep inside FlexAttention."""
    flex = tmp_path / "flex.yaml"
    flex.write_text("student: {attn_implementation: flex_attention}\n")
    assert main(["trace", str(REPO / "config.yaml"), str(REPO / "configs" / "paper.yaml"), str(flex), "--gpus", "8",
                 "--no-search", "--teacher-config", str(REPO / "configs" / "teachers" / "qwen3-8b-base")]) == 1
    assert capsys.readouterr().err.startswith("normgrow trace: student.attn_implementation 'flex_attention' cannot be "
                                              "traced on fake tensors")
