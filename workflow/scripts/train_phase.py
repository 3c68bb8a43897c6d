"""Train one distinct phase (normgrow.launch.launch_phase: in this process or under torchrun);
exit 143 after a SIGTERM-saved state. Execution settings come from the config, not from params, so
that changing them reruns nothing."""

import sys
from pathlib import Path

from normgrow.config import launch_ranks
from normgrow.curriculum import Execution, PhaseTable
from normgrow.launch import launch_phase
from normgrow.logs import job_log
from normgrow.tracking import run_name

with job_log(snakemake.log[0]) as log:
    spec, previous = snakemake.params.spec, snakemake.params.previous
    sharing = PhaseTable.from_config(snakemake.config).sharing(spec.key)
    print(f"phase {spec.key}: " + ", ".join(sharing), file=log)
    execution = Execution.from_config(snakemake.config, snakemake.params.snapshots, tracked_as=run_name(sharing[0]))
    status = launch_phase(spec, execution, snakemake.params.teacher, Path(snakemake.input.tokens),
                          Path(previous) if previous else None, Path(snakemake.output.state).parent, log,
                          **launch_ranks(snakemake.config))
sys.exit(status)
