# Nested workflows (a study's scales, the comparison's runs, a shared teacher): each is the whole workflow
# (../../Snakefile) run by `snakemake` inside one job of the outer workflow, under the outer call's profile.
import os
import sys

from snakemake.exceptions import WorkflowError


def outer_profile():
    """The profile this workflow was started with (`--profile P`, or SNAKEMAKE_PROFILE), or None."""
    for i, arg in enumerate(sys.argv):
        if arg == "--profile" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--profile="):
            return arg.split("=", 1)[1]
    return os.environ.get("SNAKEMAKE_PROFILE")


def nested_options():
    """How a nested workflow (a scale, a comparison run, a shared teacher) runs: under the outer profile, so
    that `snakemake -s workflow/study.smk --profile slurm` trains every scale through the SLURM
    executor (the nested workflow submits its jobs; this job only orchestrates it, on the submitting
    host). Other options of the outer call do not reach the nested workflows: put them in the profile."""
    profile = outer_profile()
    executor = workflow.executor_plugin
    if profile is None and executor is not None and not workflow.local_exec:
        raise WorkflowError(f"the study runs under the {executor.cli_prefix} executor without a profile: its "
                            "scales would train on this host. Start it with --profile (e.g. --profile slurm), "
                            "which the nested workflows then use too")
    return f"--profile {profile}" if profile else ""
