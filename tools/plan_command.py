"""The plan command's output written into the docs: `python -m normgrow.cli plan ARGS` (memory per
GPU, GPU-hours by batch packing, wall time on a number of nodes, the critical path, disk), run as a
user runs it.

    python tools/plan_command.py CONFIG [CONFIG ...] [plan options] [--write DOC]

Every argument but `--write DOC` goes to the plan command unchanged. With `--write DOC` its output
goes into DOC's block marked with this command (tools/docs_block.py).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import docs_block

REPO = Path(__file__).resolve().parents[1]


def plan_output(arguments: list[str]) -> str:
    """What `python -m normgrow.cli plan ARGUMENTS` prints, run from the repository root with this checkout's
    normgrow."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "normgrow.cli", "plan", *arguments], cwd=REPO, env=environment,
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"plan_command: the plan command failed:\n{result.stderr}")
    return result.stdout


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    docs_block.add_write_option(parser, "plan")
    args, arguments = parser.parse_known_args(argv)
    command = docs_block.checked_command(parser, args, __file__, argv)
    output = plan_output(arguments)
    print(output, end="")
    if command:
        plan = shlex.join(["python", "-m", "normgrow.cli", "plan", *arguments])
        lead = f"`{command}` on {docs_block.conditions(libraries=())}: the output of `{plan}`:"
        docs_block.write(args.write, command, "\n".join([lead, "", "```", output.rstrip("\n"), "```"]))


if __name__ == "__main__":
    main(sys.argv[1:])
