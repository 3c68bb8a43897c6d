"""The memory plan against the memory trace (docs/cluster.md): the traced peak per rank of the
training step (normgrow.trace) and the plan's total (normgrow.plan) at 1–16 documents per rank on
8 GPUs and 1–4 on one GPU, with and without activation checkpointing, and their ratio.

    python benchmarks/trace_vs_plan.py configs/paper.yaml configs/teachers/qwen3-8b-base
    python benchmarks/trace_vs_plan.py configs/mid.yaml configs/teachers/qwen3-0.6b-base
"""

import sys
from pathlib import Path

from transformers import AutoConfig

from normgrow.cli import read_configs
from normgrow.plan import plan
from normgrow.trace import GiB, Shape, trace_training

REPO = Path(__file__).resolve().parents[1]
SHAPES = [(8, 1), (8, 2), (8, 4), (8, 8), (8, 16), (1, 1), (1, 4)]

if __name__ == "__main__":
    config_file, teacher_dir = sys.argv[1:]
    base = read_configs([REPO / "config.yaml", Path(config_file)])
    teacher = AutoConfig.from_pretrained(teacher_dir)
    print("| checkpointing | GPUs | documents per rank | traced peak (GB) | plan (GB) | plan ÷ trace |")
    print("|---|---|---|---|---|---|")
    for checkpointing in (True, False):
        for gpus, rows in SHAPES:
            config = {**base, "train": {**base["train"], "activation_checkpointing": checkpointing,
                                        "batch_size": rows * gpus}}
            result = trace_training(config, teacher, Shape(gpus, rows, config["data"]["max_length"]))
            traced = (result["peak_gib"]["Total"] + result["teacher_gib"]) * GiB / 1e9
            planned = plan(config, teacher, gpus, 80)["total_gb"]
            print(f"| {'on' if checkpointing else 'off'} | {gpus} | {rows} | {traced:.1f} | {planned:.1f} | "
                  f"{planned / traced:.2f} |", flush=True)
