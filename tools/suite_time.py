"""The test suite's time at two commits, on one machine, in one sitting: each commit in a clean clone of
this repository, each step run for both commits one after the other, the order alternating from step to
step (A B, then B A, …) so that a machine that slows or speeds up over the sitting does not favour one
commit. Prints each run's seconds and, per step, the ratio of the second commit's time to the first's.

    python tools/suite_time.py BASE [HEAD] [--steps ci fast] [--workdir DIR] [--write DOC]

Steps: `ci` is `.ci/run` (what CI runs on a clean checkout: install, lint, both tiers; it builds the
clone's .venv), `fast` the fast tier as the README writes it (`pytest -n auto`), `slow` the end-to-end tier
as that commit's README writes it; these two run in the clone's .venv, built beforehand by the README's
install (untimed) unless a `ci` step comes first. A step may be named more than once (`--steps fast fast`:
A B, then B A). Absolute times on a shared machine move by tens of per cent between sittings
(docs/performance.md, "The test suite's time"): compare commits by the ratio of one sitting, with nothing
else on the cores.
With `--write DOC` the table goes into DOC's block marked with this command (tools/docs_block.py).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docs_block

REPO = Path(__file__).resolve().parents[1]
INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install --quiet -e '.[test]'"
READ_TIERS = re.compile(r"^pytest .*&& (pytest -m slow.*)$", re.M)  # the README's test line: fast && slow


def slow_command(clone: Path) -> str:
    """The end-to-end tier as the clone's README writes it (`pytest -m slow`, later `pytest -m slow -n 2`)."""
    found = READ_TIERS.search((clone / "README.md").read_text())
    if not found:
        raise SystemExit(f"{clone / 'README.md'}: no line `pytest … && pytest -m slow …` (the test command)")
    return found.group(1)


def step_command(step: str, clone: Path) -> str:
    if step == "ci":
        return ".ci/run"
    tier = "pytest -n auto" if step == "fast" else slow_command(clone)
    return f". .venv/bin/activate && {tier}"


def clone(commit: str, workdir: Path, venv: bool) -> Path:
    """A clean clone of this repository at `commit` under `workdir`, with its .venv built by the README's install
    when `venv` (untimed: a `fast` or `slow` step runs in it; a `ci` step builds its own)."""
    sha = subprocess.run(["git", "rev-parse", "--short", commit], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    path = workdir / sha
    if not path.exists():
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(path)], check=True)
        subprocess.run(["git", "checkout", "--quiet", sha], cwd=path, check=True)
    if venv and not (path / ".venv" / "bin" / "pytest").exists():  # none, or an install that was cut short
        subprocess.run(["bash", "-c", INSTALL], cwd=path, check=True)
    return path


def timed(step: str, path: Path, log: Path) -> tuple[float, int]:
    """Seconds and exit status of `step` in the clone at `path`; its output goes to `log`. The step runs in
    its own process group, killed with this script (Ctrl-C or SIGTERM), so that no orphaned test run goes on
    beside the next measurement."""
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", step_command(step, path)], cwd=path, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return time.monotonic() - start, rc


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base")
    parser.add_argument("head", nargs="?", default="HEAD")
    parser.add_argument("--steps", nargs="+", choices=["ci", "fast", "slow"], default=["ci", "fast"])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "normgrow-suite-time",
                        help="where the clones and their logs go (default: %(default)s)")
    docs_block.add_write_option(parser)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds through `timed`, which kills its step
    command = docs_block.checked_command(parser, args, __file__, argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    venv = args.steps[0] != "ci"  # the steps after a first `ci` run in the venv it built
    clones = [clone(args.base, args.workdir, venv), clone(args.head, args.workdir, venv)]
    times: dict[tuple[int, str], float] = {}  # (the step's place in --steps, the commit) → seconds
    for (i, step), path in alternating(list(enumerate(args.steps)), clones):
        log = args.workdir / f"{path.name}.{i}-{step}.log"
        seconds, rc = timed(step, path, log)
        times[(i, path.name)] = seconds
        print(f"{step:5} {path.name}  {seconds:7.0f} s  ({seconds / 60:.1f} min)  exit {rc}", flush=True)
        if rc != 0:
            raise SystemExit(f"{step} failed at {path.name}: {log}")
    table = table_of(times, args.steps, [path.name for path in clones])
    print(table)
    if command:
        text = "\n".join([f"`{command}` ({docs_block.conditions(libraries=())}, in this order: "
                          f"{order(args.steps, [path.name for path in clones])}):", "", table])
        changed = docs_block.write(args.write, command, text)
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


def alternating(steps: list, commits: list) -> list[tuple]:
    """(step, commit) in the order they run: both commits per step, the first step in the given order, the next
    reversed, and so on (A B, B A, A B, …)."""
    return [(step, commit) for i, step in enumerate(steps) for commit in (commits if i % 2 == 0 else commits[::-1])]


def order(steps: list[str], names: list[str]) -> str:
    """The runs in the order they ran: `ci` 112720d, `ci` 956e957, `fast` 956e957, …"""
    return ", ".join(f"`{step}` {name}" for step, name in alternating(steps, names))


def table_of(times: dict[tuple[int, str], float], steps: list[str], names: list[str]) -> str:
    """A Markdown table: per step, each commit's minutes and seconds and the second's time over the first's."""
    def clock(seconds: float) -> str:
        return f"{int(seconds // 60)} min {round(seconds % 60):02d} s"

    lines = [f"| step | {names[0]} | {names[1]} | {names[1]} / {names[0]} |", "|---|---:|---:|---:|"]
    for i, step in enumerate(steps):
        base, head = times[(i, names[0])], times[(i, names[1])]
        lines.append(f"| `{step}` | {clock(base)} | {clock(head)} | {head / base:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
