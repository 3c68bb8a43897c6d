"""The memory plan against the memory trace (docs/cluster.md): the traced peak per rank of the
training step (normgrow.cluster.trace) and the plan's total (normgrow.cluster.plan) at 1–16 documents per rank on
8 GPUs and 1–4 on one GPU, with and without activation checkpointing, and their ratio.

    python benchmarks/trace_vs_plan.py configs/paper.yaml configs/teachers/qwen3-8b-base
    python benchmarks/trace_vs_plan.py configs/mid.yaml configs/teachers/qwen3-0.6b-base

It prints the table row by row. With `--write DOC` it also writes, into DOC's block marked with
this command (tools/docs_block.py), a summary (plan ÷ trace per checkpointing setting) and the
table, under a line naming the command, torch's and transformers' versions and the date. The trace
runs on fake tensors: its numbers depend on the code and the library versions, not on the machine
or its load.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))  # the helpers the benchmarks share with the tools
import docs_block  # noqa: E402

SHAPES = [(8, 1), (8, 2), (8, 4), (8, 8), (8, 16), (1, 1), (1, 4)]
HEADER = ["| checkpointing | GPUs | documents per rank | traced peak (GB) | plan (GB) | plan ÷ trace |",
          "|---|---|---|---|---|---|"]


def measure(base: dict, teacher):
    """Each shape's row: checkpointing, gpus, rows, traced and planned GB (trace and plan of `base`
    with train.activation_checkpointing and train.batch_size changed)."""
    from normgrow.cluster.plan import plan
    from normgrow.cluster.trace import GiB, Shape, trace_training

    for checkpointing in (True, False):
        for gpus, rows in SHAPES:
            config = {**base, "train": {**base["train"], "activation_checkpointing": checkpointing,
                                        "batch_size": rows * gpus}}
            result = trace_training(config, teacher, Shape(gpus, rows, config["data"]["max_length"]))
            traced = (result["peak_gib"]["Total"] + result["teacher_gib"]) * GiB / 1e9
            planned = plan(config, teacher, gpus, 80)["total_gb"]
            yield dict(checkpointing=checkpointing, gpus=gpus, rows=rows, traced=traced, planned=planned)


def table_row(r: dict) -> str:
    return (f"| {'on' if r['checkpointing'] else 'off'} | {r['gpus']} | {r['rows']} | {r['traced']:.1f} | "
            f"{r['planned']:.1f} | {r['planned'] / r['traced']:.2f} |")


def ratio(r: dict) -> float:
    return round(r["planned"] / r["traced"], 2)  # as the table prints it


def summary(results: list[dict], setting: bool) -> list[str]:
    """Plan ÷ trace per checkpointing setting: its range and the shape farthest from 1."""
    lines = ["| checkpointing | plan ÷ trace | farthest from 1 |", "|---|---|---|"]
    for checkpointing in (setting, not setting):
        rs = [r for r in results if r["checkpointing"] == checkpointing]
        if not rs:
            continue
        far = max(rs, key=lambda r: abs(ratio(r) - 1))
        where = f"{far['gpus']} GPU{'s' if far['gpus'] > 1 else ''}, {far['rows']} document" + \
            ("s" if far["rows"] > 1 else "") + " per rank"
        label = ("on" if checkpointing else "off") + (" (the config's setting)" if checkpointing == setting else "")
        lines.append(f"| {label} | {min(map(ratio, rs)):.2f}–{max(map(ratio, rs)):.2f} | "
                     f"{ratio(far):.2f} ({where}) |")
    return lines


def block(command: str, results: list[dict], setting: bool) -> str:
    """The Markdown written into the docs: the conditions, the summary and the table."""

    return "\n".join([f"`{command}` (fake tensors; {docs_block.conditions(libraries=('torch', 'transformers'))}):", "",
                      *summary(results, setting), "", *HEADER, *map(table_row, results)])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config_file", help="merged over config.yaml")
    parser.add_argument("teacher_dir", help="a directory with the teacher's config.json")
    docs_block.add_write_option(parser, "tables")
    args = parser.parse_args(argv)
    command = docs_block.checked_command(parser, args, __file__, argv)

    from transformers import AutoConfig

    from normgrow.cli import read_configs

    base = read_configs([REPO / "config.yaml", Path(args.config_file)])
    teacher = AutoConfig.from_pretrained(args.teacher_dir)
    print("\n".join(HEADER), flush=True)
    results = []
    for r in measure(base, teacher):
        results.append(r)
        print(table_row(r), flush=True)
    if args.write:
        changed = docs_block.write(args.write, command, block(command, results,
                                                              base["train"]["activation_checkpointing"]))
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


if __name__ == "__main__":
    main(sys.argv[1:])
