"""The update-matched control (normgrow.paper.control): every cell's final CE per fresh seed, with the commit and
code digest that trained it and its teacher's validation CE (per_seed.csv, teachers.csv, written together), and
the effects per teacher and pooled conditional on the teachers, each reading's verdict (control.md)."""

import json
import re
from pathlib import Path

import pandas as pd

from normgrow.design.logs import job_log
from normgrow.paper import control
from normgrow.paper.comparison import Selection
from normgrow.paper.provenance import git_commit

with job_log(snakemake.log[0]):
    p = snakemake.params
    commit = git_commit(Path(snakemake.scriptdir))
    frames, teacher_ce = [], {}
    for path, check in zip(snakemake.input.phases, snakemake.input.checks, strict=True):
        teacher, lr = re.search(r"control/([^/]+)/lr([^/]+)\.phases\.csv$", path).groups()
        teacher_ce.setdefault(teacher, json.loads(Path(check).read_text())["validation_ce"])
        frames.append(control.final_ce(pd.read_csv(path), p.lrs[lr]).assign(teacher=teacher))
    per_seed = pd.concat(frames, ignore_index=True).assign(commit=commit)
    per_seed["teacher_ce"] = per_seed["teacher"].map(teacher_ce)
    per_seed = per_seed[["teacher", "lr", "seed", "cell", "ce", "teacher_ce", "code_digest", "commit"]]
    per_seed.to_csv(snakemake.output.per_seed, index=False)
    pd.DataFrame({"teacher": list(teacher_ce), "validation_ce": list(teacher_ce.values()), "commit": commit}).to_csv(
        snakemake.output.teachers, index=False)
    selection = Selection.read(snakemake.input.selection)
    table = control.estimates(per_seed, selection, p.teachers)
    Path(snakemake.output.table).write_text(control.markdown(table, selection))
    print(Path(snakemake.output.table).read_text())
