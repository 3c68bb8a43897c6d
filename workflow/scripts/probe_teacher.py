"""The teacher's massive activations on the fixed diagnostic batch (normgrow.train.probe), loaded as training
loads it but with eager attention (the probe reads attention weights)."""

import json
from pathlib import Path

import torch

from normgrow.design.logs import job_log
from normgrow.train.data import TokenStore, fixed_batches
from normgrow.train.distributed import default_device
from normgrow.train.outputs import write_json
from normgrow.train.probe import massive_activations
from normgrow.train.teacher import load_teacher

with job_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    tokens = Path(snakemake.input.tokens)
    meta = json.loads((tokens / "meta.json").read_text())
    store = TokenStore(tokens / "diag")
    (batch,) = fixed_batches(store, len(store), meta["boundary_id"])
    source = snakemake.params.teacher
    teacher = load_teacher(source["name"], snakemake.params.dtype, attn_implementation="eager",
                           revision=source["revision"])
    layers = massive_activations(teacher.to(default_device()), batch.to(default_device()), meta["special_ids"])
    probe = {"documents": len(store), "real_tokens": batch.tokens, "layers": layers}
    print(json.dumps(probe, indent=2))
    write_json(Path(snakemake.output[0]), probe)
