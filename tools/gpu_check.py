"""The checks that need a GPU, in one run sized for 9 minutes on one H100 (80 GB).

    python tools/gpu_check.py [--dry] [--out DIR] [--only STEP ...]

Steps, each in its own process under its own time limit; the expected times on an H100 are
ESTIMATES (no GPU has run this script yet), the limits are what the script enforces:

- `tests` (expected 120 s, limit 150 s): `pytest tests/test_gpu.py` without `-x` (the bf16 CUDA phase
  against the CPU's fp32, the fused loss's bf16 path, flex attention in one row against the padded
  phase, the benchmark's MFU);
- `fused-loss` (30 s, limit 50 s): the fused KD + CE at N = 8,192 positions, H = 4,096, V = 151,936 in
  bf16, before (the head's weight gradient as an fp32 matmul) and after (bf16 operands, fp32
  accumulation): time per call and the profiler's top kernels;
- `step` (170 s, limit 200 s): `benchmarks/distill_step.py` at the paper's step (`paper-docs-1block` on
  an 80 GB card, `paper-docs` from 120 GB), padding-free in rows and on flex attention in one row, each
  update on a batch of its own: step time, tokens/s, MFU, peak reserved memory, graphs compiled in the
  warm-up and in the timed updates (recompiles);
- `save` (25 s, limit 40 s): one resume state of about one rank's share at paper scale (3.8 GB: weights
  and AdamW moments) written by `ResumeStore.save` and verified by `ResumeStore.latest_step`: GB, write
  and hash rates;
- `repeat` (60 s, limit 80 s): the padding-free step's first three updates again, in a fresh process:
  max |Δ loss| against `step`'s (the GPU's determinism figure, docs/reliability.md).

Limits: 520 s in all, the estimates about 6.8 minutes; with the machine's start (1–2 min) one full run
fits 15 minutes of device time, and `--only STEP ...` reruns the steps that failed. Each step's log is
kept in `--out` (default: a fresh temporary directory), a Markdown summary to paste closes the run
(`summary.md` there too), and the exit status is 1 if a step failed or ran out of time.

`--dry` runs the same steps on the CPU at tiny shapes (the GPU tests skip but the CPU test beside
them runs; the fused loss at N = 512, H = 64, V = 2,048; the step at the `tiny` shape, padding-free
only: flex attention has no backward on a CPU; a 16 MB state), so that the script is checked before a
GPU is lent (`tests/test_gpu_check.py` runs it). On a CPU "before" and "after" of the fused loss are
the same fp32 matmul (torch has no bf16 × bf16 → fp32 matmul there).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))  # distill_step: the cards' peaks the summary divides by
STEPS = ("tests", "fused-loss", "step", "save", "repeat")
PAPER_LOSS = (8192, 4096, 151936)  # N positions (one rank's 8 documents of ≤ 8,192 tokens), H, V
LOSS_CHUNK = 1024  # configs/paper.yaml's train.loss_chunk
SAVE_GB = 3.8  # one rank's share of the paper's 30.8 GB resume state (docs/cluster.md)


@dataclass(frozen=True)
class Step:
    """One command of the check, with its time limit in seconds."""
    name: str
    command: list[str]
    limit: int


def step_shape(dry: bool, gpu_gb: float) -> str:
    """The step benchmark's shape: `tiny` on a CPU, the paper's student from 120 GB, else the first phase's."""
    if dry:
        return "tiny"
    return "paper-docs" if gpu_gb >= 120 else "paper-docs-1block"


def steps(dry: bool, out: Path, gpu_gb: float = 80.0) -> list[Step]:
    """The check's commands (module docstring), `dry` on a CPU; `out` holds their logs and JSON."""
    python, me = sys.executable, str(Path(__file__).resolve())
    dry_flag = ["--dry"] if dry else []
    variants = ["ours-padding-free"] if dry else ["ours-padding-free", "ours-flex"]
    bench = [python, "benchmarks/distill_step.py", "--shapes", step_shape(dry, gpu_gb), "--reps", "3",
             "--vary-batch"]
    return [Step("tests", [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_gpu.py"], 150),
            Step("fused-loss", [python, me, "--part", "fused-loss", "--out", str(out), *dry_flag], 50),
            Step("step", [*bench, "--variants", *variants, "--json", str(out / "step.json")], 200),
            Step("save", [python, me, "--part", "save", "--out", str(out), *dry_flag], 40),
            Step("repeat", [python, me, "--part", "repeat", "--out", str(out), "--shape", step_shape(dry, gpu_gb)],
                 80)]


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


def device() -> tuple[str, float]:
    """The device the check runs on, as torch sees it, and its memory in GB (0 without a GPU)."""
    import torch

    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        return (f"{torch.cuda.get_device_name()} ({total / 1e9:.0f} GB, {free / 1e9:.0f} GB free), "
                f"torch {torch.__version__}", total / 1e9)
    return f"no GPU ({os.cpu_count()} CPU cores), torch {torch.__version__}", 0.0


# ---------------------------------------------------------------- the parts this script runs itself
def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def fused_loss(dry: bool) -> dict:
    """The fused KD + CE's forward and backward in bf16 (N, H, V: PAPER_LOSS, tiny when `dry`), before and
    after the head gradient's bf16 matmul: median seconds of 3 calls after a warm-up, the top 5 kernels
    of one profiled call."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from normgrow.train import objective as module

    n, h, v = (512, 64, 2048) if dry else PAPER_LOSS
    cuda = torch.cuda.is_available()
    on = "cuda" if cuda else "cpu"
    g = torch.Generator(on).manual_seed(0)

    def tensor(*size, scale=1.0):
        return (torch.randn(*size, generator=g, device=on) * scale).to(torch.bfloat16)

    hidden, weight = tensor(n, h).requires_grad_(), tensor(v, h, scale=0.02).requires_grad_()
    teacher_hidden, teacher_weight = tensor(n, h), tensor(v, h, scale=0.02)
    labels = torch.randint(0, v, (n,), generator=g, device=on)

    def call():
        out = module.fused_objective(module.Objective(), hidden, weight, teacher_hidden, teacher_weight, labels,
                                     chunk=LOSS_CHUNK)
        out["total"].backward()
        hidden.grad = weight.grad = None
        synchronize()

    result = {"shape": {"N": n, "H": h, "V": v, "chunk": LOSS_CHUNK}, "device": on}
    mixed = module.MIXED_PRECISION_MATMUL
    for label, devices in (("before", frozenset()), ("after", mixed)):
        module.MIXED_PRECISION_MATMUL = devices
        call()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
        with profile(activities=activities) as profiler:
            call()
        key = "self_device_time_total" if cuda else "self_cpu_time_total"
        events = sorted(profiler.key_averages(), key=lambda e: getattr(e, key), reverse=True)[:5]
        result[label] = {"seconds": statistics.median(times),
                         "top": [[e.key[:80], getattr(e, key) / 1e3] for e in events]}  # ms
    module.MIXED_PRECISION_MATMUL = mixed
    result["speedup"] = result["before"]["seconds"] / result["after"]["seconds"]
    return result


def sharded_save(scratch: Path, dry: bool) -> dict:
    """One resume state of SAVE_GB (weights and AdamW moments; 16 MB when `dry`) saved by the trainer's
    ResumeStore in a world of one and verified as a job start verifies it: sizes, seconds and rates."""
    import torch

    from normgrow.train.distributed import process_group
    from normgrow.train.resume import ResumeStore

    width = 256 if dry else 4096
    layers = max(1, round((0.016 if dry else SAVE_GB) * 1e9 / (12 * width * width)))  # 12 B per parameter
    with process_group() as ranks:
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
        model.to(ranks.device)
        optimizer = torch.optim.AdamW(model.parameters())
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        optimizer.step()  # the moments exist
        store = ResumeStore(scratch / "resume", {"gpu_check": 1}, ranks)
        synchronize()
        start = time.perf_counter()
        store.save(1, model, optimizer, {"step": 1})
        saved = time.perf_counter() - start
        start = time.perf_counter()
        step = store.latest_step()
        verified = time.perf_counter() - start
    gb = sum(p.stat().st_size for p in (scratch / "resume").rglob("*") if p.is_file()) / 1e9
    return {"gb": gb, "save_seconds": saved, "verify_seconds": verified, "verified_step": step,
            "save_gb_per_s": gb / saved, "verify_gb_per_s": gb / verified}


def repeat(out: Path, shape: str) -> dict:
    """The padding-free step's first three updates again (a fresh process, the same batches and seeds):
    max |Δ loss| against the `step` part's."""
    first = json.loads((out / "step.json").read_text())[shape]["ours-padding-free"]
    command = [sys.executable, str(REPO / "benchmarks" / "distill_step.py"), "--shapes", shape, "--reps", "2",
               "--vary-batch", "--variants", "ours-padding-free", "--json", str(out / "repeat.json")]
    subprocess.run(command, cwd=REPO, check=True)
    again = json.loads((out / "repeat.json").read_text())[shape]["ours-padding-free"]
    deltas = [abs(a - b) for a, b in zip(first["losses"][:3], again["losses"][:3], strict=True)]
    return {"losses": first["losses"][:3], "again": again["losses"][:3], "max_abs_delta": max(deltas)}


def part(name: str, args) -> None:
    """Run one part in this process and write its JSON to `args.out/<name>.json`."""
    if name == "fused-loss":
        result = fused_loss(args.dry)
    elif name == "save":
        scratch = Path(tempfile.mkdtemp(prefix="gpu-check-save-"))  # not under --out: gigabytes
        try:
            result = sharded_save(scratch, args.dry)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    else:
        result = repeat(args.out, args.shape)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


# ---------------------------------------------------------------- the summary
def summary(device_line: str, outcomes: list[tuple[Step, str, float]], out: Path) -> str:
    """Markdown a developer can paste: each step's outcome and time, and what the parts measured."""
    from distill_step import PEAK_TFLOPS

    lines = [f"GPU check on {device_line}", "", "| step | outcome | seconds |", "|---|---|---:|"]
    lines += [f"| {step.name} | {outcome} | {seconds:.0f} |" for step, outcome, seconds in outcomes]

    def read(name: str) -> dict | None:
        path = out / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    if loss := read("fused-loss"):
        s = loss["shape"]
        lines += ["", f"Fused KD + CE, N = {s['N']:,}, H = {s['H']:,}, V = {s['V']:,}, bf16, chunks of {s['chunk']} "
                  f"({loss['device']}): before {loss['before']['seconds'] * 1e3:.1f} ms, after "
                  f"{loss['after']['seconds'] * 1e3:.1f} ms ({loss['speedup']:.2f}×). Top kernels (ms):"]
        for label in ("before", "after"):
            lines.append(f"- {label}: " + "; ".join(f"{name} {ms:.1f}" for name, ms in loss[label]["top"]))
    if step := read("step"):
        peak = next((p for card, p in PEAK_TFLOPS.items() if card in device_line), None)
        lines += ["", "| step shape | variant | s/update | tokens/s | MFU | reserved GB | graphs warm-up / timed |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for shape, variants in step.items():
            for variant, r in variants.items():
                if r.get("oom"):
                    lines.append(f"| {shape} | {variant} | out of memory | | | | |")
                    continue
                mfu = f"{r['flops'] / r['seconds'] / (peak * 1e12):.1%}" if peak else "–"
                reserved = f"{r['reserved_mb'] / 1024:.1f}" if r["reserved_mb"] is not None else "–"
                lines.append(f"| {shape} | {variant} | {r['seconds']:.3f} | {r['tokens'] / r['seconds']:,.0f} | {mfu} "
                             f"| {reserved} | {r['graphs_warmup']} / {r['graphs_timed']} |")
    if save := read("save"):
        lines += ["", f"Resume state: {save['gb']:.2f} GB saved in {save['save_seconds']:.1f} s "
                  f"({save['save_gb_per_s']:.2f} GB/s, writing and the manifest's hashes), verified in "
                  f"{save['verify_seconds']:.1f} s ({save['verify_gb_per_s']:.2f} GB/s read and hashed)"]
    if again := read("repeat"):
        lines += ["", f"Determinism: the same three updates twice, max |Δ loss| = {again['max_abs_delta']:.3g} "
                  f"(losses {', '.join(f'{x:.6f}' for x in again['losses'])})"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry", action="store_true", help="on the CPU at tiny shapes (see the module docstring)")
    parser.add_argument("--out", type=Path, help="directory for the logs (default: a new temporary directory)")
    parser.add_argument("--only", nargs="+", choices=STEPS, help="run these steps only (e.g. to rerun a failed one)")
    parser.add_argument("--part", choices=("fused-loss", "save", "repeat"), help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out = (args.out or Path(tempfile.mkdtemp(prefix="gpu-check-"))).resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part:
        part(args.part, args)
        return 0
    device_line, gpu_gb = device()
    if not args.dry and not gpu_gb:
        parser.error("no GPU is visible: run with --dry on a CPU")
    print(f"gpu_check on {device_line}; logs in {args.out}", flush=True)
    chosen = [step for step in steps(args.dry, args.out, gpu_gb) if not args.only or step.name in args.only]
    outcomes = [(step, *run(step, args.out)) for step in chosen]
    text = summary(device_line, outcomes, args.out)
    (args.out / "summary.md").write_text(text + "\n")
    print("== summary\n" + text)
    return 0 if all(outcome == "passed" for _, outcome, _ in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
