"""Command line: `python -m normgrow.cli train-phase ...` runs one phase outside Snakemake (the
same function the workflow's train rule calls), e.g. under torchrun or for fault-injection tests."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from normgrow.trainer import Preempted, run_phase


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="normgrow")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train-phase", help="train one phase of one run")
    train.add_argument("--spec", type=Path, required=True, help="phase spec as JSON (normgrow.config.phase_spec)")
    train.add_argument("--teacher", required=True, help="teacher hub id or local directory")
    train.add_argument("--tokens", type=Path, required=True, help="tokenized data directory")
    train.add_argument("--previous", type=Path, help="the previous phase's output directory")
    train.add_argument("--out", type=Path, required=True, help="this phase's output directory")
    args = parser.parse_args(argv)
    spec = json.loads(args.spec.read_text())
    try:
        run_phase(spec, args.teacher, args.tokens, args.previous, args.out)
    except Preempted as stop:
        print(stop, file=sys.stderr)
        return Preempted.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
