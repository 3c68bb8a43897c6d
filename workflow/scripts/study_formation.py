"""The formation study's table, rows and figure: every scale's teacher snapshots and pre-norm students'
diagnostics, structural-token scale against training length (normgrow.paper.formation)."""

import json
from pathlib import Path

import pandas as pd

from normgrow.design.logs import job_log
from normgrow.paper.formation import draw, formation_rows, markdown, summary

with job_log(snakemake.log[0]):
    rows = pd.concat([formation_rows(scale, json.loads(Path(path).read_text()))
                      for scale, path in zip(snakemake.params.scales, snakemake.input, strict=True)],
                     ignore_index=True)
    table = summary(rows)
    rows.to_csv(snakemake.output.csv, index=False)
    Path(snakemake.output.table).write_text(markdown(rows, table))
    draw(rows, Path(snakemake.output.figure))
    print(Path(snakemake.output.table).read_text())
