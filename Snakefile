# normgrow: "Rethinking Normalization Placement for LLMs: Post-Norm under Curriculum Depth Growing",
# reproduced end to end. `snakemake --cores 2 results/paper` on the embedded default (config.yaml).
import os
import re
import sys

from snakemake.utils import min_version

min_version("9.0")


# Jobs import normgrow from this checkout, whether or not their environment installs it (the conda
# env of --software-deployment-method conda holds only the dependencies).
SOURCE = os.path.join(workflow.basedir, "src")
sys.path.insert(0, SOURCE)
os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [SOURCE, os.environ.get("PYTHONPATH")])))
import normgrow.train.threads  # noqa: E402, F401  (jobs inherit a short OpenMP spin: they share the cores fairly)


configfile: os.path.join(workflow.basedir, "config.yaml")


# `snakemake --report report.zip` after a run: this description, then results/paper (rule paper) and
# results/provenance (rule provenance) with the captions of workflow/report/.
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"


wildcard_constraints:
    run="|".join(re.escape(run) for run in RUNS),
    seed=r"\d+",
    phase=r"\d+",
    key=KEY_PATTERN,


# Cheap rules run on the submitting host, also under a cluster executor (profile slurm/).
localrules:
    all,
    check_teacher_files,
    collect_metrics,
    paper,
    provenance,
    run_index,
    trace,



include: "workflow/rules/data.smk"
include: "workflow/rules/teacher.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/diagnose.smk"
include: "workflow/rules/paper.smk"
include: "workflow/rules/trace.smk"


rule all:
    input:
        "results/paper",
        rules.provenance.output,  # also made by results/paper; listed for runs finished before it existed
    default_target: True
