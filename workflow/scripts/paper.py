"""Build every table, figure and the report from the collected metrics into results/paper/."""

import json
from pathlib import Path

from normgrow.design.logs import job_log
from normgrow.paper.report import build_paper

with job_log(snakemake.log[0]):
    i = snakemake.input
    metrics = {name: Path(i[name]) for name in snakemake.params.metrics}
    build_paper(Path(snakemake.output[0]), metrics, [Path(p) for p in i.diagnostics],
                json.loads(Path(i.teacher_check).read_text()), json.loads(Path(i.teacher_probe).read_text()),
                json.loads((Path(i.tokens) / "meta.json").read_text()), snakemake.params.config,
                Path(i.versions), snakemake.params.code)
