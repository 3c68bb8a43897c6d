"""The memory trace of the configuration's GPU jobs (normgrow.cluster.trace); the job fails if they do not fit."""

from pathlib import Path

from transformers import AutoConfig

from normgrow.cluster.trace import format_trace, trace
from normgrow.design.config import training_ranks
from normgrow.design.logs import job_log
from normgrow.train.outputs import write_json

with job_log(snakemake.log[0]):
    # science from the rule's params (normgrow.design.kinds), execution settings from the config
    config, science = snakemake.config, snakemake.params
    config = {**config, "student": science.student, "objective": science.objective,
              "teacher": {**config["teacher"], "dtype": science.dtype}, "data": {**config["data"], **science.data},
              "train": {**config["train"], **science.train}}
    teacher = science.teacher
    result = trace(config, AutoConfig.from_pretrained(teacher["name"], revision=teacher["revision"]),
                   max(1, training_ranks(config)), config["resources"]["train"]["gpu_gb"])
    print(format_trace(result))
    if not result["fits"]:
        raise SystemExit(f"the traced peak exceeds 90% of resources.train.gpu_gb ({result['gpu_gb']:g} GB): "
                         "lower train.batch_size or data.max_length, or use more GPUs")
    write_json(Path(snakemake.output[0]), result)
