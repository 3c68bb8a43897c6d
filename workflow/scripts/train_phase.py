"""Train one phase of one run (normgrow.launch.launch_phase: in this process or under torchrun);
exit 143 after a SIGTERM-saved state."""

import sys
from pathlib import Path

from normgrow.launch import launch_phase
from normgrow.logs import job_log

with job_log(snakemake.log[0]) as log:
    previous = snakemake.params.previous
    status = launch_phase(snakemake.params.spec, snakemake.params.teacher, Path(snakemake.input.tokens),
                          Path(previous) if previous else None, Path(snakemake.output.state).parent, log,
                          **snakemake.params.ranks)
sys.exit(status)
