"""Students against a teacher, for choosing the embedded miniature (docs/miniature.md): train the
given runs of the embedded default with K=3 × L=1 blocks, phases of STEPS updates and a warm-up
fraction WARMUP, and print each phase's final validation CE, KL and KD soft.

    python benchmarks/miniature_students.py TEACHER_DIR results/data/tokens OUT 0.2 100 1e-3 pre-grow post-grow
"""

import io
import json
import sys
import time
from pathlib import Path

import yaml

from normgrow.config import validate_config
from normgrow.curriculum import Execution, phase_spec, run_phases
from normgrow.trainer import run_phase

REPO = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    teacher, tokens, out, warmup, steps, lr, *runs = sys.argv[1:]
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["student"].update(blocks=3, layers_per_block=1)
    config["train"].update(warmup_fraction=float(warmup), phase_steps=int(steps), lr=float(lr), eval_every=int(steps))
    config = validate_config(config)
    for run in runs:
        previous = None
        for p in range(len(run_phases(config, run))):
            start = time.time()
            folder = Path(out) / run / f"phase{p}"
            state = run_phase(phase_spec(config, run, 42, p), Execution(threads=1), teacher, Path(tokens), previous,
                              folder, log=io.StringIO())
            previous = folder
            final = state["final_eval"]
            print(json.dumps({"run": run, "phase": p, "ce": final["ce"], "kl": final["kd"], "kd_soft": final["kd_soft"],
                              "wall_s": round(time.time() - start, 1)}), flush=True)
