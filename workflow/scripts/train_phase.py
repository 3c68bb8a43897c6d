"""Train one phase of one run (normgrow.trainer.run_phase); exit 143 after a SIGTERM-saved state."""

import sys
from pathlib import Path

from normgrow.logs import job_log
from normgrow.trainer import Preempted, run_phase

with job_log(snakemake.log[0]) as log:
    previous = snakemake.params.previous
    try:
        run_phase(snakemake.params.spec, snakemake.params.teacher, Path(snakemake.input.tokens),
                  Path(previous) if previous else None, Path(snakemake.output.state).parent, log)
    except Preempted as stop:
        print(stop, file=log)
        sys.exit(Preempted.exit_code)
