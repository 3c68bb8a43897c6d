"""Pretrain the small Qwen3 teacher of the embedded default and save it with `save_pretrained`."""

import json
from pathlib import Path

import torch
from transformers import AutoTokenizer

from normgrow.spec.execution import Tracking
from normgrow.spec.logs import job_log
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
    try:
        model = pretrain_teacher(snakemake.params.pretrain, tokenizer, TokenStore(tokens / "train"), pad_id,
                                 snakemake.params.seed, log, tracker)
    finally:
        tracker.finish()
    save_teacher(model, tokenizer, Path(snakemake.output[0]))
