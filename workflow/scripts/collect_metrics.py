"""Gather every phase's evaluations, states and training losses, and every checkpoint's
diagnostics, into tidy tables under results/metrics/."""

import json
from pathlib import Path

from normgrow.logs import job_log
from normgrow.results import collect, collect_diagnostics, collect_transitions

with job_log(snakemake.log[0]):
    out = snakemake.output
    evals, phases = collect(snakemake.input.states)
    train_logs = {}
    for path in map(Path, snakemake.input.states):
        state = json.loads(path.read_text())
        train_logs[(state["run"], state["seed"], state["phase"])] = path.parent / "train.csv"
    transitions = collect_transitions(phases, train_logs)
    rms, removal = collect_diagnostics(snakemake.input.diagnostics)
    for frame, path in ((evals, out.evals), (phases, out.phases), (transitions, out.transitions),
                        (rms, out.boundary_rms), (removal, out.block_removal)):
        frame.to_csv(path, index=False)
    print(f"{len(phases)} phases, {len(evals)} evaluations, {len(transitions)} transitions, "
          f"{len(removal)} block-removal rows")
