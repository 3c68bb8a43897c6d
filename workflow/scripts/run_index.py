"""A run's view of its phases: results/runs/{run}/seed{seed}/phases.json (each phase's key,
directory and curriculum entry) and a link phase{p} -> results/phases/{key} beside it, to browse."""

import json
import os
from pathlib import Path

from normgrow.logs import job_log

with job_log(snakemake.log[0]):
    index = Path(snakemake.output[0])
    w = snakemake.wildcards
    entries = snakemake.params.phases
    index.write_text(json.dumps({"run": w.run, "seed": int(w.seed), "phases": entries}, indent=2) + "\n")
    for entry in entries:
        link = index.parent / f"phase{entry['phase']}"
        if link.is_symlink():
            link.unlink()
        elif link.exists():
            print(f"{link} is not a link (a results tree from before content-keyed phases): left as it is")
            continue
        link.symlink_to(os.path.relpath(entry["dir"], index.parent), target_is_directory=True)
        print(f"{link} -> {entry['dir']}")
    print(json.dumps(entries, indent=1))
