"""Build the paper's tables and figures from the collected metrics into results/paper/."""

import json
from pathlib import Path

import pandas as pd

from normgrow.figures import validation_loss
from normgrow.logs import job_log
from normgrow.paper import write_index
from normgrow.tables import build_tables

with job_log(snakemake.log[0]):
    out = Path(snakemake.output[0])
    evals = pd.read_csv(snakemake.input.evals)
    phases = pd.read_csv(snakemake.input.phases)
    tables = build_tables(phases)
    for table in tables:
        table.write(out / "tables")
    figures = validation_loss(evals, phases, out / "figures")
    teacher = json.loads(Path(snakemake.input.teacher_check).read_text())
    data = json.loads((Path(snakemake.input.manifest) / "meta.json").read_text())
    write_index(out, tables, figures, teacher, data, snakemake.params.config)
    print(f"wrote {len(tables)} tables and {len(figures)} figure files to {out}")
