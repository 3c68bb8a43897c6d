"""Export a run's final student (the last phase of its curriculum) as a transformers model directory
with the workflow's tokenizer (normgrow.model.export)."""

import json
from pathlib import Path

from normgrow.design.logs import job_log
from normgrow.model.export import export_phase

with job_log(snakemake.log[0]):
    teacher = snakemake.params.teacher
    summary = export_phase(Path(snakemake.input.state).parent, Path(snakemake.output[0]), teacher["name"],
                           snakemake.input.tokenizer, teacher["revision"])
    print(json.dumps(summary, indent=1))
