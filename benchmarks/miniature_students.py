"""Students against a teacher, for choosing the embedded miniature (docs/miniature.md): train the
given runs of the embedded default with K=3 × L=1 blocks, phases of STEPS updates and a warm-up
fraction WARMUP, and print each phase's final validation CE, KL and KD soft.

    python benchmarks/miniature_students.py TEACHER_DIR results/data/tokens OUT 0.2 100 1e-3 pre-grow post-grow

With `--write DOC` it also writes the Markdown table of the phases into DOC's block marked with
this command (benchmarks/docs_block.py), under a line naming the command, the CPU cores, torch's
version and the date.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

import docs_block

REPO = Path(__file__).resolve().parents[1]
HEADER = ["| run | phase | final CE | KL | KD soft | wall |", "|---|---|---|---|---|---|"]


def table_row(r: dict) -> str:
    return f"| {r['run']} | {r['phase']} | {r['ce']:.3f} | {r['kl']:.3f} | {r['kd_soft']:.3f} | {r['wall_s']:.0f} s |"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("teacher", help="a saved teacher (benchmarks/miniature_teachers.py's OUT/teacher-…)")
    parser.add_argument("tokens", help="a finished run's results/data/tokens")
    parser.add_argument("out", help="where the phases are written")
    parser.add_argument("warmup", type=float, help="warm-up fraction of a phase")
    parser.add_argument("steps", type=int, help="updates per phase")
    parser.add_argument("lr", type=float, help="peak learning rate")
    parser.add_argument("runs", nargs="+", metavar="RUN")
    docs_block.add_write_option(parser, "table")
    args = parser.parse_args(argv)
    command = docs_block.checked_command(parser, args, __file__, argv)

    import yaml

    from normgrow.design.config import validate_config
    from normgrow.design.curriculum import phase_spec, run_phases
    from normgrow.design.execution import Execution
    from normgrow.train.trainer import PhaseTask, TrainingJob, train_phases

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["student"].update(blocks=3, layers_per_block=1)
    config["train"].update(warmup_fraction=args.warmup, phase_steps=args.steps, lr=args.lr, eval_every=args.steps)
    config = validate_config(config)
    results, load = [], os.getloadavg()[0]
    for run in args.runs:
        previous = None
        for p in range(len(run_phases(config, run))):
            start = time.time()
            folder = Path(args.out) / run / f"phase{p}"
            task = PhaseTask(phase_spec(config, run, 42, p), Execution(threads=1), previous, folder)
            record = train_phases(TrainingJob((task,), args.teacher, Path(args.tokens)), io.StringIO())[0]
            previous = folder
            final = record.final_eval
            results.append({"run": run, "phase": p, "ce": final["ce"], "kl": final["kd"], "kd_soft": final["kd_soft"],
                            "wall_s": round(time.time() - start, 1)})
            print(json.dumps(results[-1]), flush=True)
    if args.write:
        lead = f"`{command}` on {docs_block.conditions()} (1 thread; load average {load:.1f} at the start):"
        changed = docs_block.write(args.write, command, "\n".join([lead, "", *HEADER, *map(table_row, results)]))
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


if __name__ == "__main__":
    main(sys.argv[1:])
