"""Result tables in the docs are written by the benchmark that measured them (or the tool that renders them
from kept results), never copied by hand.

A block of a Markdown file is the text between a marker that names the command writing it and an
end marker:

    <!-- written by: python benchmarks/distill_step.py --shapes embedded --reps 10 --write docs/performance.md -->
    ...the command's tables...
    <!-- end of written block -->

Run with `--write FILE`, a benchmark or tool finds the block of FILE whose marker names the command it was
run with (the marker's `--write` argument aside, so the block is found in a copy of the file too)
and replaces the text between the two markers, and nothing else. It refuses, naming the file and
the marker, when there is no such block, when there are several, or when one lacks its end marker;
the benchmarks check this before they measure (`check`), so a typo costs no run.

Not cog (PyPI `cogapp`), whose markers hold the generator's code: cog runs every generator whenever it
rewrites or checks a file (`cog -r`, `cog --check`), and most blocks here are measurements (a GPU's step,
the workflow run twice) that must run only when asked for, one command at a time. The blocks rendered from
kept results (tools/comparison.py, control.py, formation.py) are checked current by their tests, which is
what `cog --check` would do for them.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex
from pathlib import Path

BEGIN = "<!-- written by: {command} -->"
END = "<!-- end of written block -->"
_BEGIN = re.compile(r"<!-- written by: (.*?) -->")


class BlockError(ValueError):
    """A Markdown file's written blocks are missing, duplicated or unterminated."""


def without_write(command: str) -> list[str]:
    """The command's words without `--write FILE`: what identifies its block."""
    return _strip_write(shlex.split(command))


def _strip_write(words: list[str]) -> list[str]:
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == "--write":
            skip = True
        elif not word.startswith("--write="):
            out.append(word)
    return out


def invocation(script: str, argv: list[str]) -> str:
    """The command a benchmark or tool was run with, as the docs write it (from the repository root, without
    `--write FILE`): `python benchmarks/NAME.py ARGS` or `python tools/NAME.py ARGS`."""
    path = Path(script)
    return shlex.join(["python", f"{path.parent.name}/{path.name}", *_strip_write(argv)])


def add_write_option(parser, what: str = "table") -> None:
    parser.add_argument("--write", metavar="DOC", help=f"also write the {what} into DOC's block marked with this "
                                                       "command (see tools/docs_block.py)")


def checked_command(parser, args, script: str, argv: list[str]) -> str | None:
    """With `--write DOC`: the command naming the block, once DOC is known to have it (a usage error
    otherwise, before anything is measured); None without `--write`."""
    if not args.write:
        return None
    command = invocation(script, argv)
    try:
        check(args.write, command)
    except BlockError as error:
        parser.error(str(error))
    return command


def blocks(text: str, where: str = "the text") -> list[tuple[str, int, int]]:
    """Every written block of a Markdown text: (the marker's command, start and end of the text
    between the markers). BlockError when a marker has no end marker before the next marker."""
    found = []
    markers = list(_BEGIN.finditer(text))
    for i, match in enumerate(markers):
        end = text.find(END, match.end())
        limit = markers[i + 1].start() if i + 1 < len(markers) else len(text)
        if end < 0 or end > limit:
            raise BlockError(f"{where}: the block marked '{match.group(0)}' has no '{END}' before "
                             + ("the next marker" if i + 1 < len(markers) else "the end of the file"))
        found.append((match.group(1), match.end(), end))
    stray = text.count(END) - len(found)
    if stray:
        raise BlockError(f"{where}: {stray} '{END}' without a '{BEGIN.format(command='…')}' marker")
    return found


def find(text: str, command: str, where: str = "the text") -> tuple[str, int, int]:
    """The one block whose marker names `command` (compared without `--write FILE`)."""
    key = without_write(command)
    matching = [b for b in blocks(text, where) if without_write(b[0]) == key]
    marker = BEGIN.format(command=shlex.join(key) + " --write …")
    if not matching:
        mine = [b[0] for b in blocks(text, where) if without_write(b[0])[:2] == key[:2]]
        raise BlockError(f"{where}: no block marked '{marker}'; put that marker and '{END}' around the table it "
                         f"writes" + (f" (blocks of {key[1]} there: {'; '.join(mine)})" if mine else ""))
    if len(matching) > 1:
        raise BlockError(f"{where}: {len(matching)} blocks marked '{marker}'; the command writes one")
    return matching[0]


def replace(text: str, command: str, content: str, where: str = "the text") -> str:
    """The text with the block of `command` holding `content` (between blank lines), the rest unchanged."""
    _, start, end = find(text, command, where)
    return text[:start] + "\n\n" + content.strip("\n") + "\n\n" + text[end:]


def check(path: str | Path, command: str) -> None:
    """BlockError unless the file has exactly one well-formed block of `command`."""
    path = Path(path)
    if not path.is_file():
        raise BlockError(f"{path}: no such file")
    find(path.read_text(), command, str(path))


def write(path: str | Path, command: str, content: str) -> bool:
    """Replace the block of `command` in the file; True when its text changed."""
    path = Path(path)
    check(path, command)
    text = path.read_text()
    new = replace(text, command, content, str(path))
    if new != text:
        path.write_text(new)
    return new != text


def emit(text: str, path: str | Path | None, command: str | None) -> None:
    """Print a block's text and, when the command was run with `--write` (`command` from checked_command),
    write it into that file's block."""
    print(text)
    if command:
        write(path, command, text)


def conditions(gpu: str | None = None, libraries: tuple[str, ...] = ("torch",)) -> str:
    """Where and when: the device (a GPU's name, else the CPU cores), the libraries' versions and the date."""
    import importlib

    device = f"{gpu} ({os.cpu_count()} CPU cores)" if gpu else f"{os.cpu_count()} CPU cores"
    versions = [f"{name} {importlib.import_module(name).__version__}" for name in libraries]
    return ", ".join([device, *versions, datetime.date.today().isoformat()])
