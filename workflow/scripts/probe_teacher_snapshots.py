"""The massive-activation probe (normgrow.train.probe) on every snapshot of the teacher's pretraining, on the fixed
diagnostic batch, with each snapshot's validation CE: one JSON, a row per snapshot (its pretraining update)."""

import json
from pathlib import Path

import torch

from normgrow.design.logs import job_log
from normgrow.train.data import TokenStore, fixed_batches
from normgrow.train.distributed import default_device
from normgrow.train.evaluate import causal_lm_ce
from normgrow.train.outputs import write_json
from normgrow.train.probe import massive_activations
from normgrow.train.teacher import load_teacher

with job_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    tokens = Path(snakemake.input.tokens)
    meta = json.loads((tokens / "meta.json").read_text())
    diag = TokenStore(tokens / "diag")
    valid = TokenStore(tokens / "valid")
    device = default_device()
    (batch,) = fixed_batches(diag, len(diag), meta["boundary_id"])
    snapshots = []
    for step in snakemake.params.steps:
        teacher = load_teacher(str(Path(snakemake.input.snapshots) / f"step{step}"), snakemake.params.dtype,
                               attn_implementation="eager").to(device)
        ce = causal_lm_ce(teacher, fixed_batches(valid, snakemake.params.batch_size, meta["boundary_id"]),
                          snakemake.params.chunk)
        layers = massive_activations(teacher, batch.to(device), meta["special_ids"])
        snapshots.append({"step": step, "validation_ce": ce, "layers": layers})
        print(f"step {step}: validation CE {ce:.4f}, max/median RMS "
              f"{max(r['max_over_median'] for r in layers):.2f}")
    probe = {"documents": len(diag), "real_tokens": batch.tokens, "snapshots": snapshots}
    write_json(Path(snakemake.output[0]), probe)
