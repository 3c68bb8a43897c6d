"""Δ_joint of every setting and seed of a calibration study, summarised per setting with 95% seed
intervals, the selections by the rules of normgrow.paper.calibration, and the grid's figure."""

import json
from pathlib import Path

import pandas as pd

from normgrow.design.logs import job_log
from normgrow.paper.calibration import draw, markdown, seed_rows, summarise

with job_log(snakemake.log[0]):
    p = snakemake.params
    per_seed = pd.concat([seed_rows(pd.read_csv(phases), roles, scale, lr, warmup,
                                    json.loads(Path(check).read_text())["validation_ce"])
                          for scale, lr, warmup, roles, check, phases in zip(
                              p.scales, p.lrs, p.warmups, p.roles, snakemake.input.checks, snakemake.input.phases,
                              strict=True)], ignore_index=True)
    summary = summarise(per_seed, p.margin)
    per_seed.to_csv(snakemake.output.csv, index=False)
    Path(snakemake.output.table).write_text(markdown(per_seed, summary))
    draw(summary, Path(snakemake.output.figure))
    print(Path(snakemake.output.table).read_text())
