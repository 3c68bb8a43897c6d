"""Gather all phases' evaluations and states into results/metrics/{evals,phases}.csv."""

from normgrow.logs import job_log
from normgrow.results import collect

with job_log(snakemake.log[0]):
    evals, phases = collect(snakemake.input.states)
    evals.to_csv(snakemake.output.evals, index=False)
    phases.to_csv(snakemake.output.phases, index=False)
    print(f"{len(phases)} phases, {len(evals)} evaluations")
