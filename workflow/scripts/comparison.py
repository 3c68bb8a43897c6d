"""The comparison's confirmation (normgrow.paper.comparison): Δ_joint, Δ_grow and the interaction on the
fresh seeds, per teacher and pooled, for each reading, with verdicts by size and the seeds the interaction
needs; every fresh seed's final CE in per_seed.csv."""

import re
from pathlib import Path

import pandas as pd

from normgrow.design.logs import job_log
from normgrow.paper.comparison import Selection, comparison_markdown, confirmatory, final_ce

with job_log(snakemake.log[0]):
    p = snakemake.params
    frames = []
    for path in snakemake.input.phases:  # results/{name}/confirm/{teacher}/lr{LR}.phases.csv
        teacher, lr = re.search(r"confirm/([^/]+)/lr([^/]+)\.phases\.csv$", path).groups()
        frames.append(final_ce(pd.read_csv(path), p.roles, p.lrs[lr]).assign(teacher=teacher))
    confirm = pd.concat(frames, ignore_index=True)[["teacher", "lr", "seed", "cell", "ce"]]
    confirm.to_csv(snakemake.output.per_seed, index=False)
    selection = Selection.read(snakemake.input.selection)
    table = confirmatory(confirm, selection, p.teachers)
    Path(snakemake.output.table).write_text(comparison_markdown(table, selection, p.margin))
    print(Path(snakemake.output.table).read_text())
