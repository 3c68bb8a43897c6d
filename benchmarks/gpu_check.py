"""The checks that need a GPU, in one run sized for about ten minutes on one H200 (141 GB).

    python benchmarks/gpu_check.py [--dry] [--out DIR]

1. `pytest tests/test_gpu.py`: the CUDA path of a phase (NCCL, bf16 against the CPU's fp32), the step
   benchmark's MFU, and a phase trained on `flex_attention` in one row against the padded one;
2. `benchmarks/distill_step.py --shapes paper-docs --variants ours ours-padding-free ours-flex`: the
   paper's bf16 training step (the 36-layer Qwen3-8B-shaped teacher, the 3 × 3-layer student, FSDP2,
   activation checkpointing, loss chunks of 1,024) on one GPU's 8 documents of the paper's length mix,
   padded, padding-free in rows of the micro-batch's width (`configs/paper.yaml`'s setting) and on
   flex attention in one row: step time, tokens/s, peak memory and MFU against the card's dense bf16 peak.

Each step runs under its own time limit, its output is kept in `--out` (default: a fresh temporary
directory), and a summary closes the run; the exit status is 1 if a step failed or ran out of time.

`--dry` runs what a CPU can, to check the script before a GPU is lent: the GPU tests collected (on a
CPU they are skipped), and the step benchmark's padded and padding-free variants at the `docs-mix`
shape (the paper's length mix at a reduced width; flex attention has no backward on CPU).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Step:
    """One command of the check, with its time limit in seconds."""
    name: str
    command: list[str]
    limit: int


def steps(dry: bool) -> list[Step]:
    """The check's commands: on a GPU (module docstring), or `dry` on a CPU."""
    python = sys.executable
    if dry:
        return [Step("GPU tests (collected)", [python, "-m", "pytest", "--collect-only", "-q", "tests/test_gpu.py"],
                     120),
                Step("step benchmark", [python, "benchmarks/distill_step.py", "--shapes", "docs-mix", "--variants",
                                        "ours", "ours-padding-free", "--reps", "1"], 600)]
    return [Step("GPU tests", [python, "-m", "pytest", "-x", "-q", "tests/test_gpu.py"], 240),
            Step("paper step", [python, "benchmarks/distill_step.py", "--shapes", "paper-docs", "--variants", "ours",
                                "ours-padding-free", "ours-flex", "--reps", "2"], 330)]


def run(step: Step, out: Path) -> tuple[str, float]:
    """Run `step` from the repository root with this checkout's normgrow, under coreutils' `timeout`, its
    output to the console and to `out/<name>.log`; its outcome (`passed`, `FAILED (exit N)` or `TIMED
    OUT`) and seconds."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    log = out / ("-".join(step.name.replace("(", "").replace(")", "").split()) + ".log")
    print(f"== {step.name}: {shlex.join(step.command)} (at most {step.limit} s)", flush=True)
    start = time.time()
    with open(log, "w") as f:
        process = subprocess.Popen(["timeout", "-k", "10", str(step.limit), *step.command], cwd=REPO,
                                   env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in process.stdout:
            print(line, end="", flush=True)
            f.write(line)
    code = process.wait()
    outcome = "passed" if code == 0 else "TIMED OUT" if code in (124, 137) else f"FAILED (exit {code})"
    return outcome, time.time() - start


def device() -> str:
    """The device the check runs on, as torch sees it."""
    import torch

    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        return (f"{torch.cuda.get_device_name()} ({total / 1e9:.0f} GB, {free / 1e9:.0f} GB free), "
                f"torch {torch.__version__}")
    return f"no GPU ({os.cpu_count()} CPU cores), torch {torch.__version__}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry", action="store_true", help="the CPU-safe parts only (see the module docstring)")
    parser.add_argument("--out", type=Path, help="directory for the logs (default: a new temporary directory)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpu_check on {device()}; logs in {out}", flush=True)
    outcomes = [(step, *run(step, out)) for step in steps(args.dry)]
    print("== summary")
    for step, outcome, seconds in outcomes:
        print(f"{step.name:24} {outcome:18} {seconds:6.0f} s")
    return 0 if all(outcome == "passed" for _, outcome, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
