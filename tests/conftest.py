"""Shared fixtures: a tiny random Qwen3 teacher and the repository's paths."""

from __future__ import annotations

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
