# Helpers shared by all rule files (config validation, the distinct phases, input functions).
# Settings, one house convention: science (the schema's keys of kind `science`, normgrow.design.kinds)
# reaches a job through its params or inputs, so that changing it reruns the job; execution settings
# (kind `execution`: threads, resources, train.resume_every, train.loss_chunk, ...) are read by the job
# from `snakemake.config`, so that changing them reruns nothing.
from snakemake.common.configfile import load_configfile
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake_interface_executor_plugins.settings import DeploymentMethod

from normgrow.model.family import PREFIXES as FAMILIES  # torch-free: the supported decoder families
from normgrow.paper.items import ITEMS, report_items
from normgrow.design import science_code
from normgrow.design.config import (
    built_runs,
    check_pinned_revisions,
    check_teacher_files,
    command_line_config,
    job_resources,
    launch_ranks,
    merge,
    offline_gaps,
    pretrain_recipe,
    pretrain_seed,
    science_config,
    train_docs_required,
    validate_config,
)
from normgrow.design.curriculum import (
    DOCUMENT_ORDER,
    KEY_LENGTH,
    TRAIN_SCIENCE,
    PhaseTable,
    run_snapshots,
    run_phases,
    snapshot_steps,
)
from normgrow.design.execution import PHASE_FILES, SNAPSHOTS_DIR
from normgrow.design.job_names import job_name

# --config as a YAML file reads it: Snakemake hands on its nested values, null and true as strings ('null', '7').
COMMAND_LINE = command_line_config(workflow.config_settings.config, workflow.config_settings.config_args)
merge(config, COMMAND_LINE)
validate_config(config)  # the schema is package data: normgrow/design/config.schema.yaml
# A teacher whose files are readable now (a local directory, the hub cache): its family and, with its own
# tokenizer, the boundary token checked before any job runs (otherwise every phase job fails on them).
check_teacher_files(config, supported=FAMILIES)
# A revision kept from a config file under a teacher.name (data.source.path) given after it, by a later
# --configfile or --config: a commit of the other repository.
# Layers in Snakemake's order: the workflow's `configfile:` (config.yaml; a module's: its including workflow's),
# each --configfile, --config.
COMMAND_LINE_FILES = [str(path) for path in workflow.config_settings.configfiles]
check_pinned_revisions(
    [(str(path), load_configfile(path)) for path in workflow.configfiles if str(path) not in COMMAND_LINE_FILES]
    + [(path, load_configfile(path)) for path in COMMAND_LINE_FILES]
    + [("--config", COMMAND_LINE)]
)


def check_container():
    """Under --sdm apptainer, what would make its jobs fail, refused before any runs: GPU jobs without apptainer's
    --nv (they would see no GPU), or the image the Snakefile's `container:` names not built."""
    if DeploymentMethod.APPTAINER not in workflow.deployment_settings.deployment_method:
        return
    train = config["resources"]["train"]
    if train["gpus"] and not train["stand_in_gpus"] and "--nv" not in workflow.deployment_settings.apptainer_args.split():
        raise WorkflowError(f"resources.train.gpus: {train['gpus']} under --sdm apptainer needs --apptainer-args=--nv "
                            "(the NVIDIA driver inside the image): otherwise the jobs see no GPU")
    image = workflow.modifier.global_container_img
    if not os.path.exists(image):
        raise WorkflowError(f"--sdm apptainer runs every job in {image}, which is not built: `apptainer build {image} "
                            f"{os.path.join(os.path.dirname(image), 'normgrow.def')}` (docs/cluster.md, Installing on a "
                            "cluster)")


check_container()
# Offline (HF_HUB_OFFLINE=1), what the jobs would read from the hub cache and it lacks: said now, not by a job.
for gap in offline_gaps(config):
    logger.warning(f"offline (HF_HUB_OFFLINE): {gap}")

RUNS = built_runs(config)
SEEDS = [str(s) for s in config["seeds"]]
# Every distinct phase, trained once under results/phases/{key}/ (normgrow.design.curriculum).
PHASES = PhaseTable.from_config(config)
PHASE_DIR = "results/phases/{key}"
KEY_PATTERN = f"[0-9a-f]{{{KEY_LENGTH}}}"  # a phase key (normgrow.design.curriculum.PhaseSpec.key)
RUN_INDEX = "results/runs/{run}/seed{seed}/phases.json"
# The digest of the checkout's phase code (normgrow.design.science_code): the training jobs' and the report's
# rerun decision on code.
PHASE_CODE = science_code.digest()


def corpus_train_docs():
    """Training documents to take: as configured; a streamed corpus takes what the runs need."""
    if config["data"]["train_docs"] is not None:
        return config["data"]["train_docs"]
    return train_docs_required(config) if config["data"]["source"].get("streaming") else None


def teacher_input():
    """The teacher as a rule input when the workflow builds it (nothing for a hub id)."""
    return [] if config["teacher"]["name"] else ["results/teacher/model"]


def teacher_files_checked():
    """For a named teacher, its files' check (rule check_teacher_files) as an input of the corpus job, so that a
    teacher every phase would refuse is refused first; ancient: a new check reruns no corpus."""
    return {"teacher_files": ancient("results/teacher/files.json")} if config["teacher"]["name"] else {}


def teacher_source(wildcards, input):
    """What a job loads, `name` at `revision`: the configured hub id / path at teacher.revision, or the
    built teacher directory. (A param that reads `input` is no rerun trigger: see hub_teacher_params.)"""
    if config["teacher"]["name"]:
        return {"name": config["teacher"]["name"], "revision": config["teacher"].get("revision")}
    return {"name": input.teacher[0], "revision": None}


def hub_teacher_params():
    """A rerun trigger for the jobs that read a teacher named by teacher.name and are not named by a
    phase key (its check and probe, the tokenizer taken from it, the trace): its name and revision, so
    that another teacher or snapshot reruns them. Nothing for a teacher built here (its directory is
    an input), so that configs without a hub teacher see no new param."""
    if config["teacher"]["name"] is None:
        return {}
    return {"hub_teacher": {"name": config["teacher"]["name"], "revision": config["teacher"].get("revision")}}


# The training jobs (train.smk): a phase alone, or phases that read one batch stream side by side when
# resources.train.group_size > 1.
GROUPS = PHASES.groups(config["resources"]["train"]["group_size"])


def phase_outputs(key):
    """A phase's declared outputs, by name: normgrow.design.execution's PHASE_FILES and its snapshots directory
    (its resume states and the ranks' arguments are the job's own state, not outputs: RESUME_DIR, JOB_FILE)."""
    folder = PHASE_DIR.format(key=key)
    return {**{name: f"{folder}/{file}" for name, file in PHASE_FILES.items()},
            "snapshots": directory(f"{folder}/{SNAPSHOTS_DIR}")}


def previous_files(key):
    """What a phase reads of the phase it starts from: its weights and state (none at phase 0)."""
    previous = PHASES.specs[key].previous
    return [] if previous is None else [phase_outputs(previous.key)[name] for name in ("student", "state")]


def run_phase_files(wildcards, name="state"):
    """The output `name` (of PHASE_FILES) of every phase of one run and seed, in phase order."""
    return [phase_outputs(key)[name] for key in PHASES.runs[(wildcards.run, int(wildcards.seed))]]


def run_index_entries(wildcards):
    """Each phase of a run as the run sees it: its key and directory, and its curriculum entry."""
    keys = PHASES.runs[(wildcards.run, int(wildcards.seed))]
    return [{"phase": phase.index, "key": key, "dir": PHASE_DIR.format(key=key), "active_blocks": phase.active_blocks,
             "trainable_blocks": list(phase.trainable_blocks), "data_policy": phase.data}
            for phase, key in zip(run_phases(config, wildcards.run), keys)]


def run_indexes():
    """The phase index of every run and seed (config order)."""
    return [RUN_INDEX.format(run=run, seed=seed) for run in RUNS for seed in SEEDS]


def all_phase_outputs(name="state"):
    """The output `name` (of PHASE_FILES) of every distinct phase."""
    return [phase_outputs(key)[name] for key in PHASES.specs]


def phase_snapshot_steps(wildcards):
    """Global steps of the snapshots that phase `wildcards.phase` of the run saved."""
    return [step for phase, step in run_snapshots(config, wildcards.run) if phase == int(wildcards.phase)]


def diagnosed_phase_dir(wildcards):
    return PHASE_DIR.format(key=PHASES.runs[(wildcards.run, int(wildcards.seed))][int(wildcards.phase)])


def all_diagnostics():
    """One diagnostics report per phase (all its snapshots) of every diagnosed run and seed."""
    return [
        f"results/diagnostics/{run}/seed{seed}/phase{p}.json"
        for run in config["diagnostics"]["runs"]
        if run in RUNS
        for seed in SEEDS
        for p in range(len(run_phases(config, run)))
    ]


# How `snakemake --report` names, groups and captions each table and figure of results/paper (rule
# paper's report patterns): normgrow.paper.items, by file name.
# (a figure's two types are a toggle in the report, the first in sort order shown first)
REPORT_TYPES = {"csv": "CSV", "md": "Markdown", "tex": "LaTeX", "png": "image (PNG)", "pdf": "vector (PDF)"}


def report_section(wildcards):
    """The report subcategory of a table or figure: where the paper has it."""
    item = ITEMS.get(wildcards.name)
    return item.section if item else "Other"


def report_labels(wildcards):
    """The report labels of a table or figure file (shown instead of its file name)."""
    item = ITEMS.get(wildcards.name)
    return {"item": item.label if item else wildcards.name, "shows": item.shows if item else "",
            "type": REPORT_TYPES[wildcards.format]}
