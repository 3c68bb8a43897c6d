"""Train one phase of one run (normgrow.trainer.run_phase)."""

from pathlib import Path

from normgrow.logs import job_log
from normgrow.trainer import run_phase

with job_log(snakemake.log[0]) as log:
    previous = snakemake.params.previous
    run_phase(snakemake.params.spec, snakemake.params.teacher, Path(snakemake.input.tokens),
              Path(previous) if previous else None, Path(snakemake.output.state).parent, log)
