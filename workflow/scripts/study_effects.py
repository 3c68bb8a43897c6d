"""Δ_joint, Δ_grow and the interaction of every scale and seed, summarised per scale with 95% seed
intervals and verdicts, and drawn against the study's axis (normgrow.paper.study)."""

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from normgrow.cluster.plan import student_parameters
from normgrow.design.logs import job_log
from normgrow.paper.study import draw, markdown, scale_effects, seed_effects, tokens_per_parameter

with job_log(snakemake.log[0]):
    frames = []
    for scale, student, roles, check, phases in zip(snakemake.params.scales, snakemake.params.students,
                                                    snakemake.params.roles, snakemake.input.checks,
                                                    snakemake.input.phases, strict=True):
        teacher = json.loads(Path(check).read_text())
        parameters = student_parameters(SimpleNamespace(**teacher), student["blocks"],
                                        student["layers_per_block"])["total"]
        rows = pd.read_csv(phases)
        frames.append(seed_effects(rows, roles).assign(
            scale=scale, student_parameters=parameters, teacher_ce=teacher["validation_ce"],
            tokens_per_parameter=tokens_per_parameter(rows, roles, parameters)))
    per_seed = pd.concat(frames, ignore_index=True)
    summary = scale_effects(per_seed, snakemake.params.axis, snakemake.params.margin)
    per_seed.to_csv(snakemake.output.csv, index=False)
    Path(snakemake.output.table).write_text(markdown(per_seed, summary))
    draw(summary, Path(snakemake.output.figure), snakemake.params.axis)
    print(Path(snakemake.output.table).read_text())
