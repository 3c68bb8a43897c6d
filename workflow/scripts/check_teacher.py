"""Load the teacher exactly as training does (AutoModelForCausalLM) and report on it."""

import json
from pathlib import Path

import torch
from transformers import AutoTokenizer

from normgrow.design.config import rank_batch_size
from normgrow.design.logs import job_log
from normgrow.train.data import TokenStore
from normgrow.train.distributed import default_device
from normgrow.train.outputs import write_json
from normgrow.train.teacher import check_teacher, load_teacher

with job_log(snakemake.log[0]):
    torch.set_num_threads(snakemake.threads)
    tokens = Path(snakemake.input.tokens)
    pad_id = json.loads((tokens / "meta.json").read_text())["boundary_id"]
    source = snakemake.params.teacher
    teacher = load_teacher(source["name"], snakemake.params.dtype, revision=source["revision"]).to(default_device())
    report = check_teacher(teacher, AutoTokenizer.from_pretrained(snakemake.input.tokenizer),
                           TokenStore(tokens / "train"), TokenStore(tokens / "valid"), pad_id,
                           rank_batch_size(snakemake.config), snakemake.params.min_margin_nats,
                           snakemake.config["train"]["loss_chunk"])  # execution settings: not params
    print(json.dumps(report, indent=2))
    if report["problems"]:
        raise SystemExit(f"teacher check failed for {source['name']}: " + "; ".join(report["problems"]))
    write_json(Path(snakemake.output[0]), report)
