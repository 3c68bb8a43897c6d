"""A job's speed on idle cores and beside other work, under OpenMP's default spin and normgrow's.

The job is the embedded default's teacher pretraining step (config.yaml's `teacher.pretrain` shape
and thread count; random tokens of `data.max_length`): the one 2-thread job of the default DAG and
half its wall time. It runs in a fresh process per measurement, alone, beside one busy
single-threaded process (another program holding a core), and beside a second copy of itself (a
test run or another job), once with libgomp's default spin (`GOMP_SPINCOUNT` unset) and once with
normgrow's (`normgrow.train.threads.SPIN_COUNT`). It prints steps/s and each slowdown against the same
setting alone, all measured in this one run. Run it on otherwise idle cores.

    python benchmarks/contention.py [--steps 30] [--write docs/performance.md]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import docs_block
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
COMPETITORS = ("alone", "beside a busy loop", "beside a second copy")
BUSY_LOOP = "while True: pass"


def step_rate(steps: int | None) -> float:
    """Teacher pretraining steps per second in this process (the child's side; imports torch).
    `steps` None: a competitor that says `ready` once warmed up, then steps until it is killed."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    spec = config["teacher"]["pretrain"]
    torch.set_num_threads(spec.get("threads", 2))
    torch.manual_seed(0)
    model_config = Qwen3Config(
        vocab_size=config["tokenizer"]["vocab_size"], hidden_size=spec["hidden_size"],
        num_hidden_layers=spec["num_hidden_layers"], num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"], head_dim=spec["head_dim"],
        intermediate_size=spec["intermediate_size"], max_position_embeddings=spec["max_position_embeddings"],
        tie_word_embeddings=False)
    model_config._attn_implementation = "sdpa"
    model = Qwen3ForCausalLM(model_config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec["lr"], betas=(0.9, 0.95))
    tokens = torch.randint(0, model_config.vocab_size, (spec["batch_size"], config["data"]["max_length"]))

    def step():
        model(input_ids=tokens, labels=tokens, use_cache=False).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    if steps is None:
        print("ready", flush=True)
        while True:
            step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - start)


def child_environment(spin: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    return env if spin is None else {**env, "GOMP_SPINCOUNT": spin}


def measure(spin: str | None, competitor: str, steps: int) -> float:
    """Steps/s of one child process under `spin`, with `competitor` running beside it."""
    env = child_environment(spin)
    me = [sys.executable, __file__, "--child", "--steps", str(steps)]
    beside = {"alone": None, "beside a busy loop": [sys.executable, "-c", BUSY_LOOP],
              "beside a second copy": [sys.executable, __file__, "--child"]}[competitor]
    other = subprocess.Popen(beside, env=env, stdout=subprocess.PIPE, text=True) if beside else None
    try:
        if competitor == "beside a second copy":
            assert other.stdout.readline().strip() == "ready"  # warmed up before the measurement starts
        out = subprocess.run(me, env=env, capture_output=True, text=True, check=True)
    finally:
        if other:
            other.kill()
            other.wait()
    return float(out.stdout.strip().splitlines()[-1])


def table(rates: dict, settings: dict) -> list[str]:
    lines = ["| OpenMP spin | " + " | ".join(COMPETITORS) + " |", "|---|" + "---|" * len(COMPETITORS)]
    for name in settings:
        alone = rates[(name, "alone")]
        cells = [f"{alone:.2f} steps/s"] + [f"{rates[(name, c)]:.2f} steps/s ({alone / rates[(name, c)]:.2f}× slower)"
                                            for c in COMPETITORS[1:]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    first, second = list(settings)
    lines += ["", f"On idle cores normgrow's spin runs at {rates[(second, 'alone')] / rates[(first, 'alone')]:.2f}× "
                  "the default's speed; beside a busy loop at "
                  f"{rates[(second, COMPETITORS[1])] / rates[(first, COMPETITORS[1])]:.2f}×, beside a second copy at "
                  f"{rates[(second, COMPETITORS[2])] / rates[(first, COMPETITORS[2])]:.2f}×."]
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per measurement (after 3 warm-up steps)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    docs_block.add_write_option(parser)
    args = parser.parse_args(argv)
    if args.child:
        print(step_rate(args.steps if "--steps" in argv else None))
        return
    command = docs_block.checked_command(parser, args, __file__, argv)

    from normgrow.train.threads import SPIN_COUNT

    settings = {"libgomp's default (GOMP_SPINCOUNT unset)": None, f"normgrow's (GOMP_SPINCOUNT={SPIN_COUNT})":
                str(SPIN_COUNT)}
    started, load = time.time(), os.getloadavg()[0]
    rates = {}
    for competitor in COMPETITORS:
        for name, spin in settings.items():
            rates[(name, competitor)] = measure(spin, competitor, args.steps)
            print(f"{name}, {competitor}: {rates[(name, competitor)]:.2f} steps/s", flush=True)
    lines = table(rates, settings)
    print("\n".join(lines))
    if args.write:
        header = (f"`{command}` ({docs_block.conditions(libraries=('torch',))}; load average {load:.2f} at the "
                  f"start; {time.time() - started:.0f} s): the teacher pretraining step of config.yaml, "
                  f"{args.steps} steps per measurement.")
        changed = docs_block.write(args.write, command, "\n".join([header, "", *lines]))
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


if __name__ == "__main__":
    main(sys.argv[1:])
