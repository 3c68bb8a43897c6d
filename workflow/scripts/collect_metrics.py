"""Gather every phase's evaluations, states and training losses, and every snapshot's
diagnostics, into tidy tables under results/metrics/."""

from normgrow.design.execution import PHASE_FILES
from normgrow.design.logs import job_log
from normgrow.paper.results import collect_diagnostics, collect_phases, collect_transitions, phase_entries

with job_log(snakemake.log[0]):
    out = snakemake.output
    entries = phase_entries(snakemake.input.indexes)
    evals, phases = collect_phases(entries)
    train_logs = {(e.run, e.seed, e.phase): e.folder / PHASE_FILES["train"] for e in entries}
    transitions = collect_transitions(phases, train_logs)
    rms, removal = collect_diagnostics(snakemake.input.diagnostics)
    frames = {"evals": evals, "phases": phases, "transitions": transitions, "boundary_rms": rms,
              "block_removal": removal}
    for name, path in out.items():
        frames[name].to_csv(path, index=False)
    print(f"{len(phases)} phases, {len(evals)} evaluations, {len(transitions)} transitions, "
          f"{len(removal)} block-removal rows")
