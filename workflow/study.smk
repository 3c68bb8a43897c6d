# A study of the 2 × 2 (pre/post × joint/grow) along one axis: each of its scales is the whole workflow
# (../Snakefile) on the embedded default with the study's overrides, in its own directory
# results/{study.name}/{scale}/ (its own report, regime table included); the last rule sets the
# placement effects of every scale side by side. Two studies ship:
#   snakemake -s workflow/study.smk --cores 2                                  # configs/study.yaml: seeds × width
#   snakemake -s workflow/study.smk --cores 2 --configfile configs/ladder.yaml # training per parameter
# (and others under configs/: calibration, formation — study.analysis says what the last rule reads).
# On a cluster: snakemake -s workflow/study.smk --profile slurm ... (docs/cluster.md, Studies on the cluster).
import os
import sys

import yaml

sys.path.insert(0, os.path.join(workflow.basedir, "..", "src"))
from normgrow.paper.roles import run_roles  # noqa: E402
from normgrow.paper.study_plan import StudyPlan  # noqa: E402
from normgrow.design.config import command_line_config, merge  # noqa: E402
from normgrow.design.schedule import warmup_steps  # noqa: E402

# --config as a YAML file reads it (Snakemake hands on its nested values as strings: normgrow.design.config)
merge(config, command_line_config(workflow.config_settings.config, workflow.config_settings.config_args))
if "study" not in config:  # the seeds × width study, unless --configfile names another
    with open(os.path.join(workflow.basedir, "..", "configs", "study.yaml")) as f:
        config.update(yaml.safe_load(f))

PLAN = StudyPlan.from_config(config["study"])  # what each scale runs and what the study copies out of it
OUT = PLAN.out
SCALES = list(PLAN.scales)
with open(os.path.join(workflow.basedir, "..", "config.yaml")) as f:
    DEFAULT = yaml.safe_load(f)
MERGED = {scale: PLAN.merged_config(scale, DEFAULT) for scale in SCALES}  # each scale's whole config


include: "rules/nested.smk"


# The scales and the shared teacher run nested workflows: they stay on the submitting host, which the
# nested workflows submit their own jobs from (under a cluster profile).
localrules:
    study,
    overrides,
    scale,
    shared_teacher,


if PLAN.analysis == "effects":

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
            axis=PLAN.axis,
            students=[MERGED[scale]["student"] for scale in SCALES],
            roles=[run_roles(MERGED[scale]) for scale in SCALES],
            margin=DEFAULT["report"]["equivalence_margin"],
        log:
            f"logs/{PLAN.name}/effects.log",
        script:
            "scripts/study_effects.py"

elif PLAN.analysis == "formation":  # structural-token scale along training (normgrow.paper.formation)

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
            f"logs/{PLAN.name}/formation.log",
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
            lrs=[MERGED[scale]["train"]["lr"] for scale in SCALES],
            warmups=[warmup_steps(MERGED[scale]["train"]["phase_steps"],
                                  MERGED[scale]["train"]["warmup_fraction"]) for scale in SCALES],
            roles=[run_roles(MERGED[scale]) for scale in SCALES],
            margin=DEFAULT["report"]["equivalence_margin"],
        log:
            f"logs/{PLAN.name}/calibration.log",
        script:
            "scripts/study_calibration.py"


# The overrides of the embedded default a nested workflow runs with: a scale's, or the shared teacher's
# (the common settings), in {OUT}/{name}/config.yaml.
rule overrides:
    output:
        f"{OUT}/{{name}}/config.yaml",
    params:
        overrides=lambda wildcards: (PLAN.common if wildcards.name == "teacher"
                                     else PLAN.scale_overrides(wildcards.name)),
    run:
        write_overrides(output[0], params.overrides)


# One scale: the whole workflow in OUT/{scale}/, its outputs copied out (rules/nested.smk).
rule scale:
    input:
        config=f"{OUT}/{{scale}}/config.yaml",
        teacher=[PLAN.teacher] if PLAN.shared_teacher else [],
    output:
        **{name: f"{OUT}/{{scale}}.{suffix}" for name, (suffix, _) in PLAN.scale_outputs.items()},
    threads: nested_threads
    priority: lambda wildcards: len(SCALES) - SCALES.index(wildcards.scale)  # in the order listed, the first first
    log:
        f"logs/{PLAN.name}/{{scale}}.log",
    shell:
        nested_run(f"{OUT}/{{wildcards.scale}}", [PLAN.nested_target],
                   {name: source for name, (_, source) in PLAN.scale_outputs.items()})


# The shared teacher: the workflow's own pretraining in OUT/teacher/, copied out like a scale's outputs.
rule shared_teacher:
    input:
        config=f"{OUT}/teacher/config.yaml",
    output:
        model=directory(PLAN.teacher),
    threads: nested_threads
    log:
        f"logs/{PLAN.name}/teacher.log",
    shell:
        nested_teacher(f"{OUT}/teacher")
