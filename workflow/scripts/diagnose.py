"""Boundary RMS, token-type split and block removal of every snapshot a phase saved, on the
fixed diagnostic batch: one JSON per phase, holding every snapshot's report (under the key
`checkpoints`: a saved key, kept so that diagnostics written before the name "snapshot" still read)."""

import json
from pathlib import Path

import torch
from transformers import AutoConfig

from normgrow.design.logs import job_log
from normgrow.train.data import Batch, TokenStore, collate
from normgrow.train.diagnostics import diagnose
from normgrow.train.distributed import default_device
from normgrow.train.outputs import student_from_weights, write_json

with job_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    w, p = snakemake.wildcards, snakemake.params
    tokens = Path(snakemake.input.tokens)
    meta = json.loads((tokens / "meta.json").read_text())
    diag = TokenStore(tokens / "diag")
    device = default_device()
    batch = collate(diag.get(list(range(len(diag)))), meta["boundary_id"])
    batch = Batch(batch.input_ids.to(device), batch.attention_mask.to(device))
    teacher_config = AutoConfig.from_pretrained(p.teacher["name"], revision=p.teacher["revision"])
    reports = []
    for step in p.steps:
        student = student_from_weights(Path(snakemake.input.snapshots) / f"step{step}.safetensors",
                                          teacher_config, p.placement, p.student, p.active_blocks).to(device)
        reports.append({"run": w.run, "seed": int(w.seed), "phase": int(w.phase), "global_step": step,
                        "placement": p.placement, **diagnose(student, batch, meta["special_ids"],
                                                          chunk=snakemake.config["train"]["loss_chunk"])})
        print(f"{w.run} seed {w.seed} step {step}: diagnosed {len(reports[-1]['boundaries'])} boundaries")
    write_json(Path(snakemake.output[0]), {"checkpoints": reports})
