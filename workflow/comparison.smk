# The pre-registered comparison (normgrow.paper.comparison, configs/comparison.yaml): tuning of every cell of
# the 2 × 2 over one LR grid on tuning seeds under the first teacher, the selection (a checkpoint: what the
# confirmation trains follows from it), then the confirmation on fresh seeds under every teacher.
#   snakemake -s workflow/comparison.smk --cores 2
# The confirmation alone, its selection made from the kept tuning (docs/results/comparison) by the same rule:
#   snakemake -s workflow/comparison.smk --cores 2 --config 'comparison={"tuning": "docs/results/comparison/tuning.csv"}'
# Each set of runs is the whole workflow (../Snakefile) on the embedded default in its own directory,
# results/{name}/tuning/lr{LR}/ or results/{name}/confirm/{teacher}/lr{LR}/, nested like a study's scales.
import os
import sys

import yaml

sys.path.insert(0, os.path.join(workflow.basedir, "..", "src"))
from normgrow.paper import control  # noqa: E402
from normgrow.paper.comparison import CELLS, Plan, Selection  # noqa: E402
from normgrow.paper.roles import run_roles  # noqa: E402
from normgrow.design.config import command_line_config, merge  # noqa: E402

# configs/comparison.yaml, under what --configfile or --config set (merged, as the workflow's config.yaml;
# --config as a YAML file reads it)
merge(config, command_line_config(workflow.config_settings.config, workflow.config_settings.config_args))
with open(os.path.join(workflow.basedir, "..", "configs", "comparison.yaml")) as f:
    config.update(merge(yaml.safe_load(f), dict(config)))

PLAN = Plan(config["comparison"])  # where each set of runs lives and what it runs with
C, OUT, TEACHERS, LRS = PLAN.config, PLAN.out, PLAN.teachers, PLAN.lrs
# A kept tuning (comparison.tuning: its per-seed final CE, e.g. docs/results/comparison/tuning.csv): the
# selection is made from it by the same rule instead of training the tuning again, so that the
# confirmation can be rerun alone (more seeds, a lost run, another machine). A relative path is the repository's.
KEPT_TUNING = C.get("tuning") and os.path.normpath(os.path.join(workflow.basedir, "..", C["tuning"]))
with open(os.path.join(workflow.basedir, "..", "config.yaml")) as f:
    ROLES = run_roles(yaml.safe_load(f))  # the runs' names are the embedded default's


include: "rules/nested.smk"


wildcard_constraints:
    teacher="|".join(TEACHERS),
    lr="|".join(LRS),
    where=r"tuning/lr[^/]+|confirm/[^/]+/lr[^/]+|control/[^/]+/lr[^/]+",


localrules:
    comparison,
    select,
    teacher_config,
    teacher,
    tuning_config,
    confirm_config,
    control_config,
    control,
    runs,


rule comparison:
    input:
        selection=f"{OUT}/selection.json",
        phases=lambda wildcards: PLAN.runs("confirm", Selection.made_by(checkpoints.select).plan()),
    output:
        table=f"{OUT}/comparison.md",
        per_seed=f"{OUT}/per_seed.csv",
    params:
        teachers=TEACHERS,
        lrs=LRS,
        margin=C["margin"],
        roles=ROLES,
    log:
        f"logs/{C['name']}/comparison.log",
    script:
        "scripts/comparison.py"


checkpoint select:
    input:
        phases=[] if KEPT_TUNING else expand(f"{OUT}/tuning/lr{{lr}}.phases.csv", lr=LRS),
        kept=KEPT_TUNING or [],
    output:
        selection=f"{OUT}/selection.json",
        table=f"{OUT}/tuning.md",
        per_seed=f"{OUT}/tuning.csv",
    params:
        lrs=list(LRS.values()),
        roles=ROLES,
    log:
        f"logs/{C['name']}/select.log",
    script:
        "scripts/comparison_select.py"


rule teacher_config:
    output:
        f"{OUT}/teachers/{{teacher}}/config.yaml",
    params:
        overrides=lambda wildcards: PLAN.teacher_overrides(wildcards.teacher),
    run:
        write_overrides(output[0], params.overrides)


# A teacher: the workflow's own pretraining (with its tokenizer) in OUT/teachers/{teacher}/, copied out
# (rules/nested.smk).
rule teacher:
    input:
        config=f"{OUT}/teachers/{{teacher}}/config.yaml",
    output:
        model=directory(f"{OUT}/teachers/{{teacher}}.model"),
    threads: nested_threads
    log:
        f"logs/{C['name']}/teacher-{{teacher}}.log",
    shell:
        nested_teacher(f"{OUT}/teachers/{{wildcards.teacher}}")


rule tuning_config:
    output:
        f"{OUT}/tuning/lr{{lr}}/config.yaml",
    params:
        overrides=lambda wildcards: PLAN.run_overrides(TEACHERS[0], wildcards.lr, C["tuning_seeds"], CELLS),
    run:
        write_overrides(output[0], params.overrides)


rule confirm_config:
    input:
        selection=f"{OUT}/selection.json",
    output:
        f"{OUT}/confirm/{{teacher}}/lr{{lr}}/config.yaml",
    params:
        seeds=C["fresh_seeds"],
    run:
        plan = {f"{lr:g}": cells for lr, cells in Selection.read(input.selection).plan().items()}
        write_overrides(output[0], PLAN.run_overrides(wildcards.teacher, wildcards.lr, params.seeds, plan[wildcards.lr]))


# The update-matched control (normgrow.paper.control): the 2 × 2 and the controls on the fresh seeds, per teacher
# and LR, each set with the control's curricula and runs added.
rule control_config:
    input:
        selection=f"{OUT}/selection.json",
    output:
        f"{OUT}/control/{{teacher}}/lr{{lr}}/config.yaml",
    params:
        seeds=C["fresh_seeds"],
    run:
        cells = control.plan(Selection.read(input.selection))[LRS[wildcards.lr]]
        write_overrides(output[0], PLAN.control_overrides(wildcards.teacher, wildcards.lr, params.seeds, cells))


rule control:
    input:
        selection=f"{OUT}/selection.json",
        phases=lambda wildcards: PLAN.runs("control", control.plan(Selection.made_by(checkpoints.select))),
        checks=lambda wildcards: PLAN.runs("control", control.plan(Selection.made_by(checkpoints.select)), ".check.json"),
    output:
        table=f"{OUT}/control.md",
        per_seed=f"{OUT}/control/per_seed.csv",
        teachers=f"{OUT}/control/teachers.csv",
    params:
        teachers=TEACHERS,
        lrs=LRS,
        margin=C["margin"],
    log:
        f"logs/{C['name']}/control.log",
    script:
        "scripts/control.py"


# One set of runs: the whole workflow in OUT/{where}/, its outputs copied out (rules/nested.smk).
rule runs:
    input:
        config=f"{OUT}/{{where}}/config.yaml",
        teacher=lambda wildcards: PLAN.run_teacher(wildcards.where),
    output:
        phases=f"{OUT}/{{where}}.phases.csv",
        check=f"{OUT}/{{where}}.check.json",
    threads: nested_threads
    log:
        f"logs/{C['name']}/{{where}}.log",
    shell:
        nested_run(f"{OUT}/{{wildcards.where}}", ["results/metrics/phases.csv", "results/teacher/check.json"],
                   {"phases": "results/metrics/phases.csv", "check": "results/teacher/check.json"})
