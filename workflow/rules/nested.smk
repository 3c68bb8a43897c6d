# Nested workflows (a study's scales, the comparison's runs, a shared teacher): each is the whole workflow
# (../../Snakefile) run by `snakemake` inside one job of the outer workflow, under the outer call's profile.
# The outer workflows (../study.smk, ../comparison.smk) hold the rules; how a nested workflow runs is here, once.
import functools
import os
import sys

import yaml

from snakemake.cli import get_argument_parser
from snakemake.exceptions import WorkflowError
from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

NESTED_SNAKEFILE = os.path.join(workflow.basedir, "..", "Snakefile")


@functools.cache
def outer_call():
    """The outer call's options, read from its command line (and SNAKEMAKE_PROFILE) by Snakemake's own parser.
    The workflow object does not hold them: the profile only sets the call's defaults (snakemake.cli.parse_args)
    and is not kept, and under a dry run (-n) or --touch the executor Snakemake hands the workflow
    (workflow.executor_plugin) is its own local stand-in, not the one the run would use."""
    args, _ = get_argument_parser().parse_known_args(sys.argv[1:])
    return args


def outer_profiles():
    """The profiles this workflow was started with (`--profile P`, repeatable, or SNAKEMAKE_PROFILE); none for
    `--profile none`, and none in a job of this workflow (remote or subprocess mode: not the outer call)."""
    return [p for p in outer_call().profile or [] if p != "none"] if workflow.is_main_process else []


def refuse_cluster_without_profile():
    """A cluster executor without a profile is refused when the workflow is parsed, before anything runs
    and under a dry run alike: the nested workflows receive only the profile (nested_run), so they
    would train on this host. Jobs of this workflow (remote or subprocess mode) are not the outer call."""
    if not workflow.is_main_process or outer_profiles():
        return
    executor = outer_call().executor and ExecutorPluginRegistry().get_plugin(outer_call().executor)
    if executor and not executor.common_settings.local_exec:
        raise WorkflowError(f"this workflow runs under the {executor.cli_prefix} executor without a profile: its "
                            "nested workflows (a study's scales, the comparison's runs) would train on this host. "
                            "Start it with --profile (e.g. --profile slurm), which the nested workflows then use too")


def write_overrides(path, overrides):
    """The overrides of the embedded default a nested workflow runs with, as the YAML file it reads
    (--configfile, nested_run), in the order given."""
    with open(path, "w") as f:
        yaml.safe_dump(overrides, f, sort_keys=False)


def nested_threads(wildcards):
    """A nested workflow's cores: the outer call's (--cores); under a cluster profile 1, on the submitting host."""
    return workflow.resource_settings.cores or 1


def nested_run(where, targets, copies):
    """The shell command of a rule that runs the whole workflow in the directory `where` (its own metadata,
    locks and resume states, so that a rerun resumes there) on its `input.config` overrides, up to `targets`,
    then copies each of `copies` (output name → a path under `where`) to that output of the rule, so that
    Snakemake never deletes the nested workflow's own files. The nested workflow runs under the outer call's
    profile, so that `snakemake -s workflow/study.smk --profile slurm` trains every scale through the SLURM
    executor (the nested workflow submits its jobs; this job only orchestrates it, on the submitting host:
    a local rule). Other options of the outer call do not reach the nested workflows: put them in the profile.
    `where` may hold wildcards ({wildcards.NAME}); the job's threads are `nested_threads`, and it has a log."""
    profiles = "".join(f"--profile {p} " for p in outer_profiles())
    run = (f"snakemake -s {NESTED_SNAKEFILE} --directory {where} --cores {{threads}} {profiles}"
           f"--configfile $PWD/{{input.config}} -- {' '.join(targets)} > {{log}} 2>&1")
    return " && ".join([run, *(f"cp -r {where}/{source} {{output.{name}}}" for name, source in copies.items())])


def nested_teacher(where):
    """The shell command of a rule that pretrains a teacher by the workflow's own pretraining (with its
    tokenizer) in `where` and copies the model to the rule's output `model` (nested_run)."""
    return nested_run(where, ["results/teacher/model"], {"model": "results/teacher/model"})


refuse_cluster_without_profile()
