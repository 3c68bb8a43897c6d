"""The command line the doc regenerators share (tools/comparison.py, control.py, formation.py): a study's
small result files are kept in the repository (docs/results/NAME), copied there from a finished run with
`--keep RUN`, and its docs blocks are rendered from them, printed and, with `--write DOC`, written into DOC's
block marked with the command (tools/docs_block.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import docs_block

REPO = Path(__file__).resolve().parents[1]


def parser(doc: str, study: str, kept: Path, parts: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """The options every regenerator takes: `--keep RUN`, `--write DOC` and, for a study with several blocks,
    `--part` (the last of `parts` by default)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if parts:
        parser.add_argument("--part", choices=parts, default=parts[-1])
    parser.add_argument("--keep", metavar="RUN", type=Path,
                        help=f"copy a finished {study}'s files (results/NAME) into {kept.relative_to(REPO)} first")
    docs_block.add_write_option(parser, "block")
    return parser


def main(parser: argparse.ArgumentParser, script: str, keep: Callable[[Path], None],
         render: Callable[[argparse.Namespace], str], argv: list[str] | None = None) -> None:
    """Parse the command line; with `--keep RUN` copy the run's files, otherwise print the block `render` makes
    of the arguments and, with `--write DOC`, write it into DOC (the block checked before anything runs)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    command = docs_block.checked_command(parser, args, script, argv)
    if args.keep:
        keep(args.keep)
        return
    docs_block.emit(render(args), args.write, command)
