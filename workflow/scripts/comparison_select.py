"""The comparison's selection (normgrow.paper.comparison.select) from the tuning runs, or from a kept tuning's
per-seed final CE (comparison.tuning): each cell's own LR and the shared LR, with the tuning grid's table."""

from pathlib import Path

import pandas as pd

from normgrow.design.logs import job_log
from normgrow.paper.comparison import final_ce, select, tuning_markdown

with job_log(snakemake.log[0]):
    if snakemake.input.kept:  # comparison.tuning: a kept tuning's per-seed final CE
        tuning = pd.read_csv(snakemake.input.kept)
    else:
        tuning = pd.concat([final_ce(pd.read_csv(path), snakemake.params.roles, lr)
                            for lr, path in zip(snakemake.params.lrs, snakemake.input.phases, strict=True)],
                           ignore_index=True)
    tuning.to_csv(snakemake.output.per_seed, index=False)
    selection = select(tuning)
    Path(snakemake.output.selection).write_text(selection.to_json())
    Path(snakemake.output.table).write_text(tuning_markdown(tuning, selection))
    print(Path(snakemake.output.table).read_text())
