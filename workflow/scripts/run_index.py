"""A run's view of its phases: results/runs/{run}/seed{seed}/phases.json, each phase's key, directory
(results/phases/{key}) and curriculum entry."""

import json
from pathlib import Path

from normgrow.design.logs import job_log

with job_log(snakemake.log[0]):
    index = Path(snakemake.output[0])
    w = snakemake.wildcards
    entries = snakemake.params.phases
    index.write_text(json.dumps({"run": w.run, "seed": int(w.seed), "phases": entries}, indent=2) + "\n")
    print(json.dumps(entries, indent=1))
