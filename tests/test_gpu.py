"""The CUDA path of a phase: NCCL process group, teacher and student on the GPU, bf16 compute.

Skipped where no GPU is visible (the rest of the suite hides GPUs to test the CPU path); on a GPU
machine: `pytest tests/test_gpu.py`. Their tiny teacher has heads of GPU_HEAD_DIM: CUDA flex attention
needs a head dimension of at least 16 (torch/_inductor/kernel/flex/flex_attention.py, "NYI: embedding
dimension ... must be at least 16"), the CPU tests' teacher has 8; a CPU test checks it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import torch
from conftest import REPO, VISIBLE_GPUS, phase_job, tiny_run_config, with_out, write_phase_inputs
from safetensors.torch import load_file

GPU_ENV = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
if VISIBLE_GPUS is not None:
    GPU_ENV["CUDA_VISIBLE_DEVICES"] = VISIBLE_GPUS


def gpu_available() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, env=GPU_ENV)
    return probe.stdout.strip() == "True"


needs_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible")
GPU_HEAD_DIM = 16  # the least head dimension CUDA flex attention runs


def write_gpu_phase_inputs(root, **settings) -> None:
    """`write_phase_inputs` with a teacher whose heads CUDA flex attention can run."""
    write_phase_inputs(root, **settings, head_dim=GPU_HEAD_DIM)


def test_the_gpu_tests_teacher_has_heads_cuda_flex_attention_runs(tmp_path):
    """On the CPU: the GPU tests' teacher (and so the student built from it) has head_dim ≥ 16."""
    write_gpu_phase_inputs(tmp_path, seed=3, documents=4, longest=6, valid=1)
    config = json.loads((tmp_path / "teacher" / "config.json").read_text())
    assert config["head_dim"] >= 16


@needs_gpu
def test_the_fused_loss_in_bf16_on_the_gpu_is_its_fp32_loss():
    """The fused loss's bf16 path on CUDA (the head gradient's bf16 matmul into fp32, `add_head_gradient`)
    runs and gives the fp32 loss and gradients within bf16 rounding."""
    code = (
        "import torch\n"
        "from normgrow.train.objective import Objective, fused_objective\n"
        "g = torch.Generator().manual_seed(0)\n"
        "x = [torch.randn(300, 64, generator=g), torch.randn(1000, 64, generator=g) * 0.2,\n"
        "     torch.randn(300, 48, generator=g), torch.randn(1000, 48, generator=g) * 0.2]\n"
        "labels = torch.randint(0, 1000, (300,), generator=g).cuda()\n"
        "out = {}\n"
        "for dtype in (torch.float32, torch.bfloat16):\n"
        "    h, w, th, tw = (t.to('cuda', dtype) for t in x)\n"
        "    h.requires_grad_(); w.requires_grad_()\n"
        "    loss = fused_objective(Objective(), h, w, th, tw, labels, chunk=128)['total']\n"
        "    loss.backward()\n"
        "    out[dtype] = (loss.float(), w.grad.float(), h.grad.float())\n"
        "(a, b) = out[torch.float32], out[torch.bfloat16]\n"
        "torch.testing.assert_close(b[0], a[0], rtol=2e-2, atol=2e-2)\n"
        "for got, want in zip(b[1:], a[1:]):\n"
        "    torch.testing.assert_close(got, want, rtol=5e-2, atol=5e-3)\n"
        "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=GPU_ENV, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-4000:]


@needs_gpu
def test_a_bf16_phase_on_the_gpu_tracks_the_cpu_fp32_phase(tmp_path):
    write_gpu_phase_inputs(tmp_path, seed=3, documents=40, longest=14, valid=5)
    config = tiny_run_config(phase_steps=8, batch_size=4, eval_every=4)
    jobs = {"cpu": phase_job(config, "post-freeze", 7, 0, tmp_path)}
    config["train"]["precision"] = "bfloat16"
    config["teacher"]["dtype"] = "bfloat16"
    jobs["gpu"] = phase_job(config, "post-freeze", 7, 0, tmp_path)
    for name, job in jobs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(with_out(job, tmp_path / name)))
        command = [sys.executable, "-m", "normgrow.cli", "train-phase", "--job", str(tmp_path / f"{name}.json")]
        env = GPU_ENV if name == "gpu" else {**GPU_ENV, "CUDA_VISIBLE_DEVICES": ""}
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
    weights = load_file(tmp_path / "gpu" / "student.safetensors")
    assert {w.dtype for w in weights.values()} == {torch.float32}
    gpu, cpu = pd.read_csv(tmp_path / "gpu" / "train.csv"), pd.read_csv(tmp_path / "cpu" / "train.csv")
    assert (gpu["loss"] - cpu["loss"]).abs().max() < 0.05
    assert gpu["tokens"].equals(cpu["tokens"])


def train_on_the_gpu(tmp_path, name: str, config: dict) -> pd.DataFrame:
    """Phase 0 of post-freeze under `config`, trained on the GPU by the command line; its train.csv."""
    job = with_out(phase_job(config, "post-freeze", 7, 0, tmp_path), tmp_path / name)
    (tmp_path / f"{name}.json").write_text(json.dumps(job))
    command = [sys.executable, "-m", "normgrow.cli", "train-phase", "--job", str(tmp_path / f"{name}.json")]
    proc = subprocess.run(command, capture_output=True, text=True, env=GPU_ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return pd.read_csv(tmp_path / name / "train.csv")


@needs_gpu
def test_flex_attention_in_one_row_trains_the_padded_phase(tmp_path):
    """student.attn_implementation: flex_attention with train.padding_free (each batch in one row, attention
    within each document) trains phase 0 as the padded sdpa phase does: the same token counts, losses
    within float rounding (fp32; the forward alone is checked on CPU, tests/test_padding_free.py)."""
    write_gpu_phase_inputs(tmp_path, seed=3, documents=40, longest=14, valid=5)
    config = tiny_run_config(phase_steps=6, batch_size=5, eval_every=3)
    padded = train_on_the_gpu(tmp_path, "padded", config)
    config["train"]["padding_free"] = True
    config["student"]["attn_implementation"] = "flex_attention"
    flex = train_on_the_gpu(tmp_path, "flex", config)
    assert flex["tokens"].equals(padded["tokens"])
    assert (flex["loss"] - padded["loss"]).abs().max() < 1e-3


@needs_gpu
def test_the_benchmark_measures_the_step_and_its_mfu_on_the_gpu():
    command = [sys.executable, str(REPO / "benchmarks" / "distill_step.py"), "--shapes", "embedded", "--reps", "2",
               "--variants", "naive", "ours", "--peak-tflops", "100"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, env=GPU_ENV, check=True).stdout
    ours = out.splitlines()[-1].split()
    assert ours[1] == "ours" and ours[5].endswith("%") and ours[6].endswith("x")
