# normgrow: "Rethinking Normalization Placement for LLMs: Post-Norm under Curriculum Depth Growing",
# reproduced end to end. `snakemake --cores 2 results/paper` on the embedded default (config.yaml).
import os
import re
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# Jobs import normgrow from this checkout, whether or not their environment installs it (the conda
# env of --software-deployment-method conda holds only the dependencies). Used as a Snakemake `module` from
# a remote source, or from a copy without src/, the workflow and its jobs import the installed normgrow.
SOURCE = os.path.join(str(workflow.current_basedir), "src")  # this file's directory (a module's own, too)
if os.path.isdir(os.path.join(SOURCE, "normgrow")):
    sys.path.insert(0, SOURCE)
    os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [SOURCE, os.environ.get("PYTHONPATH")])))
try:
    import normgrow.train.threads  # noqa: F401  (jobs inherit a short OpenMP spin: they share the cores fairly)
except ImportError as error:
    raise WorkflowError(f"normgrow cannot be imported ({error}): without its src/ beside this Snakefile (a module "
                        "from a remote source), install it, `pip install normgrow@git+<its repository>`, in the "
                        "environment that runs Snakemake") from None


configfile: os.path.join(workflow.basedir, "config.yaml")


# The image every job runs in under --software-deployment-method apptainer, built from containers/normgrow.def
# (docs/cluster.md, "Installing on a cluster"); without that flag the jobs run in this environment.
container: os.path.join(str(workflow.current_basedir), "containers", "normgrow.sif")


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
