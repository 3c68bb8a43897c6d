"""Shared fixtures: a tiny random Qwen3 teacher and the repository's paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def make_teacher(vocab_size: int = 64, hidden_size: int = 32, seed: int = 0) -> Qwen3ForCausalLM:
    """A small randomly initialised Qwen3ForCausalLM with a non-trivial final norm."""
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                         intermediate_size=48, max_position_embeddings=64, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    teacher = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        teacher.model.norm.weight.uniform_(0.5, 1.5)
    return teacher


@pytest.fixture
def teacher() -> Qwen3ForCausalLM:
    return make_teacher()


def snakemake_command(workdir: Path, *args: str, config: Path | None = REPO / "configs" / "ci.yaml") -> list[str]:
    """A Snakemake command line on the repository's workflow, run in `workdir`."""
    command = [str(Path(sys.executable).parent / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory",
               str(workdir)]
    if config is not None:
        command += ["--configfile", str(config)]
    return command + list(args)


@pytest.fixture(scope="session")
def ci_workdir(tmp_path_factory) -> Path:
    """A working directory in which the CI config has been run end to end (results/paper built)."""
    workdir = tmp_path_factory.mktemp("ci-run")
    result = subprocess.run(snakemake_command(workdir, "--cores", "2", "--", "results/paper"),
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return workdir
