"""Pretrain the small Qwen3 teacher of the embedded default and save it with `save_pretrained`; with
teacher.pretrain.snapshots, also its snapshots along training (snapshots/step{N}, the model alone)."""

import json
from pathlib import Path

import torch
from transformers import AutoTokenizer

from normgrow.design.execution import Tracking
from normgrow.design.logs import job_log
from normgrow.train.data import TokenStore
from normgrow.train.distributed import default_device
from normgrow.train.teacher import pretrain_teacher, save_teacher
from normgrow.train.tracking import Tracker

with job_log(snakemake.log[0]) as log:
    torch.set_num_threads(snakemake.threads)
    tokens = Path(snakemake.input.tokens)
    pad_id = json.loads((tokens / "meta.json").read_text())["boundary_id"]
    tokenizer = AutoTokenizer.from_pretrained(snakemake.input.tokenizer)
    tracker = Tracker(Tracking.from_config(snakemake.config, "teacher/pretrain"),
                      {"pretrain": snakemake.params.pretrain, "seed": snakemake.params.seed}, True, default_device())
    snapshots = Path(snakemake.output.snapshots) if "snapshots" in snakemake.output.keys() else None

    def save_snapshot(step, model):
        model.save_pretrained(snapshots / f"step{step}")

    try:
        model = pretrain_teacher(snakemake.params.pretrain, tokenizer, TokenStore(tokens / "train"), pad_id,
                                 snakemake.params.seed, log, tracker, save_snapshot if snapshots else None)
    finally:
        tracker.finish()
    save_teacher(model, tokenizer, Path(snakemake.output.model))
