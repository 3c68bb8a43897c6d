"""Time and size of exporting a student (docs/workflow.md, Exporting a student): a phase directory
holding a student of a config's shape (random weights; the time does not depend on their values)
is exported with `normgrow.model.export.export_phase` as the family's own class (pre-norm) and through the
remote code (post-norm), then loaded back with `AutoModelForCausalLM.from_pretrained`.

    python benchmarks/export_time.py embedded mid

Shapes: `embedded` is config.yaml's (the teacher it pretrains: Qwen3, `teacher.pretrain`'s dimensions,
`tokenizer.vocab_size` tokens; its K × L student); `mid` is configs/mid.yaml's (the Qwen3-0.6B-Base
teacher of configs/teachers/qwen3-0.6b-base, a 3 × 3 student). Every block is active, as after a
run's last phase. The tokenizer is a small byte-level BPE (its files are a few kB of the directory).
With `--write DOC` the table goes into DOC's block marked with this command (tools/docs_block.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))  # the helpers the benchmarks share with the tools
import docs_block  # noqa: E402

SHAPES = {"embedded": ([], None), "mid": (["configs/mid.yaml"], "configs/teachers/qwen3-0.6b-base")}
HEADER = ["| shape | student (K × L) | placement | parameters | export | model.safetensors | load |",
          "|---|---|---|---|---|---|---|"]


def teacher_config(shape: str, config: dict):
    """The teacher's config: the pretrained one's (embedded) or the shape's config.json."""
    from transformers import AutoConfig, Qwen3Config

    teacher_dir = SHAPES[shape][1]
    if teacher_dir:
        return AutoConfig.from_pretrained(REPO / teacher_dir)
    spec = config["teacher"]["pretrain"]
    return Qwen3Config(vocab_size=config["tokenizer"]["vocab_size"], tie_word_embeddings=False,
                       **{k: spec[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                               "num_key_value_heads", "head_dim", "intermediate_size",
                                               "max_position_embeddings")})


def measure(shape: str, placement: str, root: Path, tokenizer: Path) -> dict:
    """Export one phase of a student of `shape` under `placement`; seconds and bytes."""
    import torch
    from transformers import AutoModelForCausalLM

    from normgrow.cli import read_configs
    from normgrow.model.export import export_phase
    from normgrow.model.student import BlockStackStudent, student_config
    from normgrow.train.outputs import save_student

    config = read_configs([REPO / "config.yaml", *(REPO / path for path in SHAPES[shape][0])])
    teacher = teacher_config(shape, config)
    K, L = config["student"]["blocks"], config["student"]["layers_per_block"]
    student = BlockStackStudent(student_config(teacher, K * L), placement, K, L)
    phase, out = root / "phase", root / "out"
    save_student(student, phase / "student.safetensors")
    (phase / "state.json").write_text(json.dumps({"placement": placement, "active_blocks": K,
                                                  "active_layers": K * L}))
    del student
    start = time.perf_counter()
    summary = export_phase(phase, out, teacher, tokenizer)
    exported = time.perf_counter() - start
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=placement != "pre", dtype=torch.float32)
    loaded = time.perf_counter() - start
    result = dict(shape=shape, student=f"{K} × {L}", placement=placement, parameters=summary["parameters"],
                  export_s=exported, bytes=(out / "model.safetensors").stat().st_size, load_s=loaded,
                  loaded_as=type(model).__name__)
    shutil.rmtree(phase)
    shutil.rmtree(out)
    return result


def table_row(r: dict) -> str:
    return (f"| {r['shape']} | {r['student']} | {r['placement']} ({r['loaded_as']}) | {r['parameters']:,} | "
            f"{r['export_s']:.2f} s | {r['bytes'] / 1e6:,.1f} MB | {r['load_s']:.2f} s |")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("shapes", nargs="+", choices=list(SHAPES))
    docs_block.add_write_option(parser)
    args = parser.parse_args(argv)
    command = docs_block.checked_command(parser, args, __file__, argv)

    from normgrow.train.data import train_tokenizer

    rows = []
    print("\n".join(HEADER), flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        texts = ["a small byte-level tokenizer, only for the export's directory"] * 20
        train_tokenizer(texts, 300, "<|endoftext|>").save_pretrained(root / "tokenizer")
        for shape in args.shapes:
            for placement in ("pre", "post"):
                rows.append(measure(shape, placement, root, root / "tokenizer"))
                print(table_row(rows[-1]), flush=True)
    if args.write:
        text = "\n".join([f"`{command}` ({docs_block.conditions(libraries=('torch', 'transformers'))}):", "",
                          *HEADER, *map(table_row, rows)])
        changed = docs_block.write(args.write, command, text)
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


if __name__ == "__main__":
    main(sys.argv[1:])
