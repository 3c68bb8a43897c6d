# A study of the 2 × 2 (pre/post × joint/grow) along one axis: each of its scales is the whole workflow
# (../Snakefile) on the embedded default with the study's overrides, in its own directory
# results/{study.name}/{scale}/ (its own report, regime table included); the last rule sets the
# placement effects of every scale side by side. Two studies ship:
#   snakemake -s workflow/study.smk --cores 2                                  # configs/study.yaml: seeds × width
#   snakemake -s workflow/study.smk --cores 2 --configfile configs/ladder.yaml # training per parameter
# (and others under configs/: calibration, formation — study.analysis says what the last rule reads).
# On a cluster: snakemake -s workflow/study.smk --profile slurm ... (docs/cluster.md, Studies on the cluster).
import copy
import os
import sys

import yaml

sys.path.insert(0, os.path.join(workflow.basedir, "..", "src"))
from normgrow.spec.config import merge  # noqa: E402
from normgrow.paper.roles import run_roles  # noqa: E402
from normgrow.paper.study import AXES  # noqa: E402
from normgrow.spec.schedule import warmup_steps  # noqa: E402

if "study" not in config:  # the seeds × width study, unless --configfile names another
    with open(os.path.join(workflow.basedir, "..", "configs", "study.yaml")) as f:
        config.update(yaml.safe_load(f))

STUDY = config["study"]
OUT = f"results/{STUDY['name']}"
SCALES = list(STUDY["scales"])
AXIS = STUDY.get("axis", "student_parameters")
if AXIS not in AXES:
    raise ValueError(f"study.axis {AXIS!r} is not one of {', '.join(AXES)}")
# A shared teacher is pretrained once (in OUT/teacher/) and read by every scale as a local teacher
# with its own tokenizer, so the scales may not change what the teacher is built from.
SHARED_TEACHER = STUDY.get("shared_teacher", False)
if SHARED_TEACHER:
    for scale, overrides in STUDY["scales"].items():
        clash = sorted({"teacher", "data", "tokenizer"} & set(overrides))
        if clash:
            raise ValueError(f"study.scales.{scale} sets {', '.join(clash)}, but study.shared_teacher: true pretrains "
                             "one teacher for every scale: set them in study.common")
TEACHER = f"{OUT}/teacher.model"
ANALYSIS = STUDY.get("analysis", "effects")
# What a scale's nested workflow builds and what the study copies out of it (named by output):
# the 2 × 2's report for effects and calibration; for formation (normgrow.paper.formation) the teacher's
# probes along pretraining and the diagnosed checkpoints, results/formation.json.
if ANALYSIS == "formation":
    NESTED_TARGET = "results/formation.json"
    SCALE_OUTPUTS = {"formation": ("formation.json", "results/formation.json")}
else:
    NESTED_TARGET = "results/paper"
    SCALE_OUTPUTS = {"phases": ("phases.csv", "results/metrics/phases.csv"),
                     "check": ("check.json", "results/teacher/check.json")}
WORKFLOW = os.path.join(workflow.basedir, "..", "Snakefile")


include: "rules/nested.smk"


with open(os.path.join(workflow.basedir, "..", "config.yaml")) as f:
    DEFAULT = yaml.safe_load(f)


def teacher_overrides():
    """The common settings; under a shared teacher, that teacher and its tokenizer."""
    common = copy.deepcopy(STUDY.get("common", {}))
    if SHARED_TEACHER:
        merge(common, {"teacher": {"name": os.path.abspath(TEACHER)}, "tokenizer": {"train": False}})
    return common


def scale_overrides(scale):
    """What the scale changes in the embedded default: seeds, runs, no diagnostics (unless the scale asks for
    them), its sizes."""
    return merge({"seeds": STUDY["seeds"], "build": STUDY["build"], "diagnostics": {"runs": []},
                  **teacher_overrides()}, copy.deepcopy(STUDY["scales"][scale]))


def merged_config(scale):
    return merge(copy.deepcopy(DEFAULT), scale_overrides(scale))


# The scales and the shared teacher run nested workflows: they stay on the submitting host, which the
# nested workflows submit their own jobs from (under a cluster profile).
localrules:
    study,
    scale_config,
    teacher_config,
    scale,
    shared_teacher,


if ANALYSIS == "effects":

    rule study:
        input:
            checks=expand(f"{OUT}/{{scale}}.check.json", scale=SCALES),
            phases=expand(f"{OUT}/{{scale}}.phases.csv", scale=SCALES),
        output:
            table=f"{OUT}/effects.md",
            csv=f"{OUT}/effects.csv",
            figure=f"{OUT}/effects.png",
        params:
            scales=SCALES,
            axis=AXIS,
            students=[merged_config(scale)["student"] for scale in SCALES],
            roles=[run_roles(merged_config(scale)) for scale in SCALES],
            margin=DEFAULT["report"]["equivalence_margin"],
        log:
            f"logs/{STUDY['name']}/effects.log",
        script:
            "scripts/study_effects.py"

elif ANALYSIS == "formation":  # structural-token scale along training (normgrow.paper.formation)

    rule study:
        input:
            expand(f"{OUT}/{{scale}}.formation.json", scale=SCALES),
        output:
            table=f"{OUT}/formation.md",
            csv=f"{OUT}/formation.csv",
            figure=f"{OUT}/formation.png",
        params:
            scales=SCALES,
        log:
            f"logs/{STUDY['name']}/formation.log",
        script:
            "scripts/study_formation.py"

else:  # analysis: calibration — joint runs only, over a grid of settings (normgrow.paper.calibration)

    rule study:
        input:
            checks=expand(f"{OUT}/{{scale}}.check.json", scale=SCALES),
            phases=expand(f"{OUT}/{{scale}}.phases.csv", scale=SCALES),
        output:
            table=f"{OUT}/calibration.md",
            csv=f"{OUT}/calibration.csv",
            figure=f"{OUT}/calibration.png",
        params:
            scales=SCALES,
            lrs=[merged_config(scale)["train"]["lr"] for scale in SCALES],
            warmups=[warmup_steps(merged_config(scale)["train"]["phase_steps"],
                                  merged_config(scale)["train"]["warmup_fraction"]) for scale in SCALES],
            roles=[run_roles(merged_config(scale)) for scale in SCALES],
            margin=DEFAULT["report"]["equivalence_margin"],
        log:
            f"logs/{STUDY['name']}/calibration.log",
        script:
            "scripts/study_calibration.py"


rule scale_config:
    output:
        f"{OUT}/{{scale}}/config.yaml",
    params:
        overrides=lambda wildcards: scale_overrides(wildcards.scale),
    run:
        with open(output[0], "w") as f:
            yaml.safe_dump(params.overrides, f, sort_keys=False)


# One scale: the whole workflow in OUT/{scale}/ (its own metadata, locks and resume states, so a rerun
# resumes there); the outputs are copies, so that Snakemake never deletes the scale's own.
rule scale:
    input:
        config=f"{OUT}/{{scale}}/config.yaml",
        teacher=[TEACHER] if SHARED_TEACHER else [],
    output:
        **{name: f"{OUT}/{{scale}}.{suffix}" for name, (suffix, _) in SCALE_OUTPUTS.items()},
    params:
        nested=lambda wildcards: nested_options(),
    threads: lambda wildcards: workflow.resource_settings.cores or 1  # under a cluster profile: 1 local core
    priority: lambda wildcards: len(SCALES) - SCALES.index(wildcards.scale)  # in the order listed, the first first
    log:
        f"logs/{STUDY['name']}/{{scale}}.log",
    shell:
        "snakemake -s {WORKFLOW} --directory {OUT}/{wildcards.scale} --cores {threads} {params.nested} "
        "--configfile $PWD/{input.config} -- {NESTED_TARGET} > {log} 2>&1"
        + "".join(f" && cp {OUT}/{{wildcards.scale}}/{source} {{output.{name}}}"
                  for name, (_, source) in SCALE_OUTPUTS.items())


rule teacher_config:
    output:
        f"{OUT}/teacher/config.yaml",
    params:
        overrides=STUDY.get("common", {}),
    run:
        with open(output[0], "w") as f:
            yaml.safe_dump(params.overrides, f, sort_keys=False)


# The shared teacher: the workflow's own pretraining in OUT/teacher/, copied out like a scale's outputs.
rule shared_teacher:
    input:
        f"{OUT}/teacher/config.yaml",
    output:
        directory(TEACHER),
    params:
        nested=lambda wildcards: nested_options(),
    threads: lambda wildcards: workflow.resource_settings.cores or 1  # under a cluster profile: 1 local core
    log:
        f"logs/{STUDY['name']}/teacher.log",
    shell:
        "snakemake -s {WORKFLOW} --directory {OUT}/teacher --cores {threads} {params.nested} "
        "--configfile $PWD/{input} -- results/teacher/model > {log} 2>&1 && "
        "cp -r {OUT}/teacher/results/teacher/model {output}"
