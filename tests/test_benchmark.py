"""The benchmark: its documented command prints ours/naive ratios measured in the same run; its FLOP
count and peak lookup give known answers; the GPU shapes' code path (FSDP, bf16, activation
checkpointing) runs on the CPU."""

import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from normgrow.train.data import collate


def load_benchmark():
    spec = importlib.util.spec_from_file_location("distill_step", REPO / "benchmarks" / "distill_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load_benchmark()

TINY_TEACHER = dict(vocab_size=64, hidden_size=16, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                    intermediate_size=24, num_hidden_layers=2, max_position_embeddings=64)


def tiny_shape(**changes):
    return {**dict(teacher=TINY_TEACHER, teacher_dtype="float32", blocks=2, layers_per_block=1, rows=2, seq=12,
                   loss_chunk=5, precision="float32", activation_checkpointing=False, loss_positions=16), **changes}


@pytest.mark.slow
def test_benchmark_prints_ratios_for_the_embedded_shape(tmp_path):
    command = [sys.executable, str(REPO / "benchmarks" / "distill_step.py"), "--shapes", "embedded", "--reps", "1"]
    doc = tmp_path / "performance.md"
    written_by = "python benchmarks/distill_step.py --shapes embedded --reps 1"
    marker = f"<!-- written by: {written_by} --write docs/performance.md -->"
    doc.write_text(f"before\n\n{marker}\n\nold\n\n<!-- end of written block -->\n\nafter\n")
    out = subprocess.run([*command, "--write", str(doc)], capture_output=True, text=True, timeout=600,
                         check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "device: cpu; no MFU (give --peak-tflops)"
    rows = {line.split()[1]: line for line in lines[2:9]}
    assert set(rows) == {"naive", "ours", "ours-padding-free", "loss-naive", "loss-ours", "eval-before", "eval-ours"}
    for variant in ("ours", "ours-padding-free", "loss-ours", "eval-ours"):
        speed, memory = re.findall(r"(\d+\.\d+)x", rows[variant])
        assert float(speed) > 0 and float(memory) > 0
    assert float(re.findall(r"(\d+\.\d+)x", rows["loss-ours"])[1]) < 0.5  # no full-vocabulary logits
    # --write: the same measurements as a Markdown table, in the doc's block and only there
    written = doc.read_text()
    assert written.startswith(f"before\n\n{marker}\n\n`{written_by}` on ")
    assert written.endswith("<!-- end of written block -->\n\nafter\n") and "old" not in written
    speed, memory = re.findall(r"(\d+\.\d+)x", rows["ours"])
    assert f"| {speed}× | {memory}× |" in written
    assert lines[9] == f"wrote the block of `{written_by}` in {doc}"


def test_step_flops_count_every_matmul_and_causal_attention():
    s = tiny_shape()
    teacher, student = bench.build(s, "cpu")
    batch = collate([np.arange(1, 4), np.arange(1, 6)], pad_id=0)  # rows of 3 and 5 tokens
    h, i, v, q, kv = 16, 24, 64, 4 * 8, 2 * 8
    layer = h * q + 2 * h * kv + q * h + 3 * h * i  # q, k, v, o, gate, up, down
    matmuls = 2 * (2 * layer + v * h) * 8 + 6 * (2 * layer + v * h) * 8  # teacher 2 layers, student 2; 8 tokens
    attention = 4 * q * (3 * 4 // 2 + 5 * 6 // 2) * (2 + 3 * 2)
    assert bench.step_flops(s, teacher, student, batch) == matmuls + attention


def test_mfu_peak_is_the_flag_or_the_known_card():
    assert bench.peak_tflops("NVIDIA H200", None) == 989.4
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3", None) == 989.4
    assert bench.peak_tflops("cpu", None) is None
    assert bench.peak_tflops("cpu", 0.5) == 0.5


@pytest.mark.parametrize("variant", ["ours", "naive"])
def test_a_bf16_checkpointed_step_runs_as_on_a_gpu(monkeypatch, variant):
    s = tiny_shape(precision="bfloat16", activation_checkpointing=True, teacher_dtype="bfloat16")
    monkeypatch.setattr(bench, "shape", lambda name: s)
    result = bench.run_variant("tiny", variant, reps=2)
    assert result["device"] == "cpu" and result["seconds"] > 0
    assert result["tokens"] == int(bench.batch_for(s).attention_mask.sum())


def test_the_paper_shape_asks_for_a_gpu():
    with pytest.raises(SystemExit, match="needs a GPU"):
        bench.run_variant("paper", "ours", reps=1)
