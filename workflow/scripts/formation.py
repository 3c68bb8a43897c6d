"""One scale of the formation study: the teacher's probes along pretraining and every diagnosed
student snapshot's report (without the per-token RMS lists), bundled for normgrow.paper.formation."""

import json
from pathlib import Path

from normgrow.design.logs import job_log
from normgrow.train.outputs import write_json

with job_log(snakemake.log[0]):
    snapshots = snakemake.input.teacher_snapshots
    reports = [
        {**report, "boundaries": [{k: v for k, v in b.items() if k != "per_token_rms"} for b in report["boundaries"]]}
        for path in snakemake.input.diagnostics for report in json.loads(Path(path).read_text())["checkpoints"]]
    bundle = {"teacher_snapshots": json.loads(Path(snapshots[0]).read_text()) if snapshots else None,
              "diagnostics": reports}
    write_json(Path(snakemake.output[0]), bundle)
    print(f"{len(reports)} diagnosed student snapshots, teacher snapshots: {bool(snapshots)}")
