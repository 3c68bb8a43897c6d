# Nested workflows (a study's scales, the comparison's runs, a shared teacher): each is the whole workflow
# (../../Snakefile) run by `snakemake` inside one job of the outer workflow, under the outer call's profile.
import os
import sys

from snakemake.cli import get_argument_parser
from snakemake.exceptions import WorkflowError
from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry


def outer_profile():
    """The profile this workflow was started with (`--profile P`, or SNAKEMAKE_PROFILE), or None."""
    for i, arg in enumerate(sys.argv):
        if arg == "--profile" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--profile="):
            return arg.split("=", 1)[1]
    return os.environ.get("SNAKEMAKE_PROFILE")


def outer_executor():
    """The executor plugin this workflow was started with (`--executor E`, `-e E`), or None: read from the
    command line as Snakemake reads it, since under a dry run (-n) or --touch the executor Snakemake hands
    the workflow (workflow.executor_plugin) is its own local stand-in, not the one the run would use."""
    args, _ = get_argument_parser().parse_known_args(sys.argv[1:])
    return None if args.executor is None else ExecutorPluginRegistry().get_plugin(args.executor)


def refuse_cluster_without_profile():
    """A cluster executor without a profile is refused when the workflow is parsed, before anything runs
    and under a dry run alike: the nested workflows receive only the profile (nested_options), so they
    would train on this host. Jobs of this workflow (remote or subprocess mode) are not the outer call."""
    if not workflow.is_main_process or outer_profile() is not None:
        return
    executor = outer_executor()
    if executor is not None and not executor.common_settings.local_exec:
        raise WorkflowError(f"this workflow runs under the {executor.cli_prefix} executor without a profile: its "
                            "nested workflows (a study's scales, the comparison's runs) would train on this host. "
                            "Start it with --profile (e.g. --profile slurm), which the nested workflows then use too")


def nested_options():
    """How a nested workflow (a scale, a comparison run, a shared teacher) runs: under the outer profile, so
    that `snakemake -s workflow/study.smk --profile slurm` trains every scale through the SLURM
    executor (the nested workflow submits its jobs; this job only orchestrates it, on the submitting
    host). Other options of the outer call do not reach the nested workflows: put them in the profile."""
    profile = outer_profile()
    return f"--profile {profile}" if profile else ""


refuse_cluster_without_profile()
