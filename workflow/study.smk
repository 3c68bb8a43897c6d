# The seeds × scale ladder (configs/study.yaml): each scale is the whole workflow (../Snakefile) on the
# embedded default with the scale's overrides, in its own directory; the last rule sets the placement
# effects of every scale side by side.  snakemake -s workflow/study.smk --cores 2
import copy
import os
import sys

import yaml

sys.path.insert(0, os.path.join(workflow.basedir, "..", "src"))
from normgrow.config import merge  # noqa: E402
from normgrow.paper.roles import run_roles  # noqa: E402


configfile: os.path.join(workflow.basedir, "..", "configs", "study.yaml")


STUDY = config["study"]
SCALES = list(STUDY["scales"])
WORKFLOW = os.path.join(workflow.basedir, "..", "Snakefile")
with open(os.path.join(workflow.basedir, "..", "config.yaml")) as f:
    DEFAULT = yaml.safe_load(f)


def scale_overrides(scale):
    """What the scale changes in the embedded default: seeds, runs, no diagnostics, its sizes."""
    return {"seeds": STUDY["seeds"], "build": STUDY["build"], "diagnostics": {"runs": []},
            **STUDY["scales"][scale]}


def merged_config(scale):
    return merge(copy.deepcopy(DEFAULT), scale_overrides(scale))


localrules:
    study,
    scale_config,


rule study:
    input:
        checks=expand("results/study/{scale}.check.json", scale=SCALES),
        phases=expand("results/study/{scale}.phases.csv", scale=SCALES),
    output:
        table="results/study/effects.md",
        csv="results/study/effects.csv",
        figure="results/study/effects.png",
    params:
        scales=SCALES,
        students=[merged_config(scale)["student"] for scale in SCALES],
        roles=[run_roles(merged_config(scale)) for scale in SCALES],
    log:
        "logs/study/effects.log",
    script:
        "scripts/study_effects.py"


rule scale_config:
    output:
        "results/study/{scale}/config.yaml",
    params:
        overrides=lambda wildcards: scale_overrides(wildcards.scale),
    run:
        with open(output[0], "w") as f:
            yaml.safe_dump(params.overrides, f, sort_keys=False)


# One scale: the whole workflow in results/study/{scale}/ (its own metadata, locks and resume states,
# so a rerun resumes there); the outputs are copies, so that Snakemake never deletes the scale's own.
rule scale:
    input:
        "results/study/{scale}/config.yaml",
    output:
        phases="results/study/{scale}.phases.csv",
        check="results/study/{scale}.check.json",
    threads: workflow.cores
    log:
        "logs/study/{scale}.log",
    shell:
        "snakemake -s {WORKFLOW} --directory results/study/{wildcards.scale} --cores {threads} "
        "--configfile $PWD/{input} -- results/paper > {log} 2>&1 && "
        "cp results/study/{wildcards.scale}/results/metrics/phases.csv {output.phases} && "
        "cp results/study/{wildcards.scale}/results/teacher/check.json {output.check}"
