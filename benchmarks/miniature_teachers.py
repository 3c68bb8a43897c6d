"""Teacher variants for choosing the embedded miniature (docs/miniature.md): pretrain each
LAYERS:STEPS:LR[:BATCH] teacher, otherwise the embedded default's (config.yaml's teacher.pretrain:
width, heads, batch, schedule), on the tokens of a finished run, and print its validation CE and wall time.

    python benchmarks/miniature_teachers.py results/data OUT 9:1000:3e-3 12:1000:3e-3

With `--write DOC` it also writes the Markdown table of the variants into DOC's block marked with
this command (benchmarks/docs_block.py), under a line naming the command, the CPU cores, torch's
version and the date.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import docs_block

HEADER = ["| teacher | pretraining steps × documents | LR | wall | validation CE |", "|---|---|---|---|---|"]


def table_row(r: dict) -> str:
    return (f"| {r['layers']} layers | {r['steps']:,} × {r['batch']} | {r['lr']:g} | {r['wall_s']:.0f} s | "
            f"{r['validation_ce']:.3f} |")


def default_pretrain() -> dict:
    """The embedded default's teacher.pretrain (config.yaml, schema defaults filled): width, heads, batch,
    schedule."""
    import yaml

    from normgrow.design.config import validate_config

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config.yaml").read_text())
    return validate_config(config)["teacher"]["pretrain"]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="a finished run's results/data (tokenizer, tokens)")
    parser.add_argument("out", help="where the teachers are saved")
    parser.add_argument("variants", nargs="+", metavar="LAYERS:STEPS:LR[:BATCH]")
    docs_block.add_write_option(parser, "table")
    args = parser.parse_args(argv)
    command = docs_block.checked_command(parser, args, __file__, argv)

    import torch
    from transformers import AutoTokenizer

    from normgrow.train.data import TokenStore
    from normgrow.train.teacher import check_teacher, pretrain_teacher, save_teacher

    data, out = Path(args.data), Path(args.out)
    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(data / "tokenizer")
    train, valid = TokenStore(data / "tokens" / "train"), TokenStore(data / "tokens" / "valid")
    results, load = [], os.getloadavg()[0]
    for variant in args.variants:
        layers, steps, lr, *batch = variant.split(":")
        spec = {**default_pretrain(), "num_hidden_layers": int(layers), "steps": int(steps), "lr": float(lr)}
        spec["batch_size"] = int(batch[0]) if batch else spec["batch_size"]
        start = time.time()
        model = pretrain_teacher(spec, tokenizer, train, 0, 42, open("/dev/null", "w"))
        wall = time.time() - start
        report = check_teacher(model, tokenizer, train, valid, 0, 8, 0.5, 4096)
        save_teacher(model, tokenizer, out / f"teacher-L{layers}-s{steps}-lr{lr}")
        results.append({"layers": int(layers), "steps": int(steps), "lr": float(lr), "batch": spec["batch_size"],
                        "wall_s": round(wall, 1), "validation_ce": report["validation_ce"]})
        print(json.dumps(results[-1]), flush=True)
    if args.write:
        lead = (f"`{command}` on {docs_block.conditions()} (2 threads; the wall time is pretraining alone; "
                f"load average {load:.1f} at the start):")
        changed = docs_block.write(args.write, command, "\n".join([lead, "", *HEADER, *map(table_row, results)]))
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


if __name__ == "__main__":
    main(sys.argv[1:])
