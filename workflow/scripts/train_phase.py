"""Train one distinct phase, or a group of phases that read one batch stream on one teacher forward
per batch: the job (normgrow.train.trainer.TrainingJob), built here once, launched in this process or under
torchrun (normgrow.cluster.launch.launch_phases); exit 143 after a
SIGTERM-saved state. Execution settings come from the config, not from params, so that changing
them reruns nothing. The attempt (resources.attempt: 1, or a retry's > 1) decides what a retry does
(normgrow.train.attempts: restore a finished phase, fail at once after an exception, or resume). Its errors
name the job (its rule: normgrow.design.job_names.job_name) and every run phase it trains
(launch_phases' `name`)."""

import sys
from pathlib import Path

from normgrow.cluster.launch import launch_phases
from normgrow.design.config import launch_ranks
from normgrow.design.curriculum import PhaseTable
from normgrow.design.execution import Execution
from normgrow.design.logs import job_log
from normgrow.train.tracking import run_name
from normgrow.train.trainer import PhaseTask, TrainingJob

with job_log(snakemake.log[0]) as log:
    table = PhaseTable.from_config(snakemake.config)
    tasks, trains = [], []
    for key in snakemake.params.phases:
        spec, sharing = table.specs[key], table.sharing(key)
        print(f"phase {key}: " + ", ".join(sharing), file=log)
        trains.append(f"{', '.join(sharing)} (results/phases/{key})")
        execution = Execution.from_config(snakemake.config, table.snapshots[key], tracked_as=run_name(sharing[0]))
        previous = None if spec.previous is None else Path(snakemake.params.phase_dir.format(key=spec.previous.key))
        tasks.append(PhaseTask(spec, execution, previous, Path(snakemake.params.phase_dir.format(key=key))))
    teacher = snakemake.params.teacher
    job = TrainingJob(tuple(tasks), teacher["name"], Path(snakemake.input.tokens), teacher["revision"])
    status = launch_phases(job, log, attempt=int(snakemake.resources.attempt), **launch_ranks(snakemake.config),
                           name=f"training job {snakemake.rule}: {'; '.join(trains)}")
sys.exit(status)
