"""The CUDA path of a phase: NCCL process group, teacher and student on the GPU, bf16 compute.

Skipped where no GPU is visible (the rest of the suite hides GPUs to test the CPU path); on a GPU
machine: `pytest tests/test_gpu.py`.
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


pytestmark = pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible")


def test_a_bf16_phase_on_the_gpu_tracks_the_cpu_fp32_phase(tmp_path):
    write_phase_inputs(tmp_path, seed=3, documents=40, longest=14, valid=5)
    config = tiny_run_config()
    config["train"].update(phase_steps=8, batch_size=4, eval_every=4)
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


def test_flex_attention_in_one_row_trains_the_padded_phase(tmp_path):
    """student.attn_implementation: flex_attention with train.padding_free (each batch in one row, attention
    within each document) trains phase 0 as the padded sdpa phase does: the same token counts, losses
    within float rounding (fp32; the forward alone is checked on CPU, tests/test_padding_free.py)."""
    write_phase_inputs(tmp_path, seed=3, documents=40, longest=14, valid=5)
    config = tiny_run_config()
    config["train"].update(phase_steps=6, batch_size=5, eval_every=3)
    padded = train_on_the_gpu(tmp_path, "padded", config)
    config["train"]["padding_free"] = True
    config["student"]["attn_implementation"] = "flex_attention"
    flex = train_on_the_gpu(tmp_path, "flex", config)
    assert flex["tokens"].equals(padded["tokens"])
    assert (flex["loss"] - padded["loss"]).abs().max() < 1e-3


def test_the_benchmark_measures_the_step_and_its_mfu_on_the_gpu():
    command = [sys.executable, str(REPO / "benchmarks" / "distill_step.py"), "--shapes", "embedded", "--reps", "2",
               "--variants", "naive", "ours", "--peak-tflops", "100"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, env=GPU_ENV, check=True).stdout
    ours = out.splitlines()[-1].split()
    assert ours[1] == "ours" and ours[5].endswith("%") and ours[6].endswith("x")
