"""A run's view of its phases: results/runs/{run}/seed{seed}/phases.json, each phase's key, directory
(results/phases/{key}) and curriculum entry."""

import json
from pathlib import Path

from normgrow.design.logs import job_log
from normgrow.train.outputs import write_json

with job_log(snakemake.log[0]):
    index = Path(snakemake.output[0])
    w = snakemake.wildcards
    entries = snakemake.params.phases
    write_json(index, {"run": w.run, "seed": int(w.seed), "phases": entries})
    print(json.dumps(entries, indent=1))
