"""Command line.

- `python -m normgrow.cli train-phase --job FILE` trains a job (normgrow.train.trainer.TrainingJob as JSON): what
  every rank runs under torchrun (normgrow.cluster.launch), and a phase outside Snakemake, e.g. for the
  fault-injection tests;
- `python -m normgrow.cli plan config.yaml configs/paper.yaml --gpus 8 --gpu-gb 80` prints the
  resource plan of a configuration (normgrow.cluster.plan) and its budget: GPU-hours, wall time on
  `--nodes`, the critical path and disk (normgrow.cluster.budget);
- `python -m normgrow.cli phases config.yaml [more.yaml ...]` prints where every phase of every run
  is trained (results/phases/{key}), its training job (the rule) and which runs share it, from the config
  alone; `--run`, `--seed` and `--phase` select run phases (`--run post-grow --seed 42 --phase 2`: which job
  that is), `--jobs` prints only their jobs, e.g. to `--forcerun` them; with `--other-code`, only the
  state.json of each finished phase trained by code other than this checkout's
  (normgrow.design.science_code), to `--forcerun` them after a code fix;
- `python -m normgrow.cli preflight config.yaml configs/paper.yaml` compares the jobs' resources
  with the nodes `sinfo` reports, before anything is submitted (normgrow.cluster.preflight);
- `python -m normgrow.cli trace config.yaml configs/paper.yaml --gpus 8 --gpu-gb 80` runs the
  training step (of `--students` phases on one teacher forward, default resources.train.group_size),
  the teacher check and the diagnostics on fake tensors at the config's real shapes over a fake
  world of GPUs, and prints the measured peak memory beside the plan (normgrow.cluster.trace); it exits 1
  when the peak does not fit;
- `python -m normgrow.cli export results/phases/KEY OUT [--teacher T] [--tokenizer TOK]` writes a phase's
  student as a directory that `transformers.AutoModelForCausalLM.from_pretrained(OUT)` loads
  (normgrow.model.export; docs/workflow.md, Exporting a student); it exits 1, with one line, on a bad phase
  directory, teacher or tokenizer, or an existing OUT."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from normgrow.cluster.budget import H100_BF16_TFLOPS, PAPER_TOKENS_PER_DOCUMENT
from normgrow.design.execution import PHASE_FILES
from normgrow.train import threads  # noqa: F401  (before torch: OpenMP's spin, normgrow.train.threads)
from normgrow.train.trainer import Preempted, TrainingJob, train_phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="normgrow")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train-phase", help="train one phase of one run, or a group that reads one batch "
                                                    "stream on one teacher forward per batch")
    train.add_argument("--job", type=Path, required=True,
                       help="the job as JSON (normgrow.train.trainer.TrainingJob: its phases, teacher, tokens)")
    plan = commands.add_parser("plan", help="parameters, per-GPU memory, tokens per phase and the budget (GPU-hours, "
                                            "wall time, critical path, disk) of a config")
    plan.add_argument("configs", nargs="+", type=Path, help="config files, merged in order (like --configfile)")
    plan.add_argument("--gpus", type=int, default=8)
    plan.add_argument("--gpu-gb", type=float, default=80.0)
    plan.add_argument("--no-activation-checkpointing", action="store_true",
                      help="plan without it whatever train.activation_checkpointing says")
    plan.add_argument("--teacher-config", help="a directory or hub id whose config.json describes the teacher "
                                               "(default: teacher.name)")
    plan.add_argument("--students", type=int, help="students of one job on one teacher forward per batch "
                                                   "(default: resources.train.group_size)")
    plan.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8],
                      help="numbers of nodes to give the training's wall time for (normgrow.cluster.budget)")
    plan.add_argument("--mfu", type=float, default=0.4, help="model FLOPs utilisation assumed for time and GPU-hours")
    plan.add_argument("--peak-tflops", type=float, default=H100_BF16_TFLOPS,
                      help="a GPU's dense bf16 peak in TFLOP/s (default: an H100's, an H200's too)")
    plan.add_argument("--sigma", type=float, default=1.0, help="spread of log document length (assumed)")
    plan.add_argument("--mean-doc-tokens", type=float, default=PAPER_TOKENS_PER_DOCUMENT,
                      help="mean tokens per document (default: the paper's, Table A2)")
    phases = commands.add_parser("phases", help="every run's phases, their directories and the runs sharing them")
    phases.add_argument("configs", nargs="+", type=Path, help="config files, merged in order (like --configfile)")
    phases.add_argument("--other-code", action="store_true",
                        help="print only the state.json of each finished phase (under the working directory's "
                             "results/phases) trained by code other than this checkout's "
                             "(normgrow.design.science_code)")
    phases.add_argument("--run", help="only this run's phases")
    phases.add_argument("--seed", type=int, help="only this seed's")
    phases.add_argument("--phase", type=int, help="only this phase index of each run (0: the first)")
    phases.add_argument("--jobs", action="store_true",
                        help="print only the training jobs (their rules) of the phases selected, once each")
    preflight = commands.add_parser("preflight", help="do the jobs' resources fit the cluster's nodes (sinfo)?")
    preflight.add_argument("configs", nargs="+", type=Path, help="config files, merged in order (like --configfile)")
    trace = commands.add_parser("trace", help="peak GPU memory of the training step and the one-GPU jobs, traced "
                                              "on fake tensors over a fake world of GPUs")
    trace.add_argument("configs", nargs="+", type=Path, help="config files, merged in order (like --configfile)")
    trace.add_argument("--gpus", type=int, help="ranks (default: the config's training ranks)")
    trace.add_argument("--gpu-gb", type=float, default=80.0)
    trace.add_argument("--rows", type=int, help="documents per rank (default: train.batch_size / gpus)")
    trace.add_argument("--no-search", action="store_true", help="skip the search for the largest batch that fits")
    trace.add_argument("--students", type=int, help="students of one job on one teacher forward per batch "
                                                    "(default: resources.train.group_size)")
    trace.add_argument("--largest-group", action="store_true",
                       help="also search the largest group of students that fits at --rows")
    trace.add_argument("--teacher-config", help="a directory or hub id whose config.json describes the teacher "
                                                "(default: teacher.name)")
    trace.add_argument("--json", type=Path, help="also write the measurements to this file")
    export = commands.add_parser("export", help="a phase's student as a transformers model directory")
    export.add_argument("phase_dir", type=Path, help="a phase's output directory (results/phases/KEY)")
    export.add_argument("out", type=Path, help="the directory to write (must not exist)")
    export.add_argument("--teacher", help="the teacher's hub id or directory (default: results/teacher/model beside "
                                          "the phase directory, where the workflow builds it)")
    export.add_argument("--tokenizer", help="hub id or directory (default: results/data/tokenizer beside the phase "
                                            "directory, else the teacher's)")
    export.add_argument("--teacher-revision", help="a hub teacher's revision (the run's teacher.revision), also of "
                                                   "its tokenizer when that is the teacher's")
    args = parser.parse_args(argv)
    if args.command == "export":
        return print_export(args)
    if args.command == "trace":
        return print_trace(args)
    if args.command == "preflight":
        return print_preflight(args)
    if args.command == "plan":
        return print_plan(args)
    if args.command == "phases":
        return print_phases(args)
    try:
        train_phases(TrainingJob.from_json(json.loads(args.job.read_text())))
    except Preempted as stop:
        print(stop, file=sys.stderr)
        return Preempted.exit_code
    return 0


# The workflow's embedded default (the Snakefile's `configfile:`), in the checkout this package runs from.
EMBEDDED_DEFAULT = Path(__file__).resolve().parents[2] / "config.yaml"


def read_configs(paths: list[Path]) -> dict:
    """Config files merged in order over the embedded default and validated, as the workflow sees them
    (`snakemake --configfile A B`: config.yaml, then A, then B; naming config.yaml first changes nothing)."""
    import yaml

    from normgrow.design.config import merge, validate_config

    config: dict = {}
    for path in ([EMBEDDED_DEFAULT] if EMBEDDED_DEFAULT.is_file() else []) + list(paths):
        merge(config, yaml.safe_load(path.read_text()))
    return validate_config(config)


def print_phases(args) -> int:
    from normgrow.design.curriculum import PhaseTable
    from normgrow.design.job_names import job_names

    config = read_configs(args.configs)
    table = PhaseTable.from_config(config)
    if args.other_code:
        from normgrow.design.phase_record import PhaseRecord
        from normgrow.design.science_code import digest, trained_by_other_code

        current = digest()
        for key in table.specs:
            state = Path("results/phases") / key / PHASE_FILES["state"]
            if state.is_file() and trained_by_other_code(PhaseRecord.read(state).code, current):
                print(state)
        return 0
    jobs = job_names(table, config["resources"]["train"]["group_size"])
    chosen = [(run, seed, p, key) for (run, seed), keys in table.runs.items() for p, key in enumerate(keys)
              if args.run in (None, run) and args.seed in (None, seed) and args.phase in (None, p)]
    if not chosen:
        runs, seeds = sorted({run for run, _ in table.runs}), sorted({seed for _, seed in table.runs})
        asked = " ".join(f"{name} {'any' if value is None else value}"
                         for name, value in (("run", args.run), ("seed", args.seed), ("phase", args.phase)))
        print(f"no run phase of these config files is {asked}: runs {', '.join(runs)}; seeds "
              f"{', '.join(map(str, seeds))}", file=sys.stderr)
        return 1
    if args.jobs:
        print("\n".join(dict.fromkeys(jobs[key] for *_, key in chosen)))
        return 0
    print(f"{len(table.specs)} distinct phases of {sum(map(len, table.runs.values()))} run phases")
    for run, seed, p, key in chosen:
        others = [label for label in table.sharing(key) if label != f"{run} seed {seed} phase {p}"]
        print(f"{run} seed {seed} phase {p}: results/phases/{key}, job {jobs[key]}"
              + (f"  (shared with {', '.join(others)})" if others else ""))
    return 0


def print_preflight(args) -> int:
    from normgrow.cluster.preflight import (
        check_accounts,
        check_resources,
        default_partition,
        parse_associations,
        parse_sinfo,
        run_sacctmgr,
        run_sinfo,
    )

    config, text, associations = read_configs(args.configs), run_sinfo(), run_sacctmgr()
    problems = check_resources(config, parse_sinfo(text), default_partition(text)) + check_accounts(
        config, None if associations is None else parse_associations(associations))
    for problem in problems:
        print(problem)
    if associations is None:
        print("accounts and QoS not checked: sacctmgr lists no associations here (no accounting database)")
    if not problems:
        print("every job class fits a node of its partition, within its time limit")
    return 1 if problems else 0


def teacher_config(config: dict, override: str | None):
    """The teacher's transformers config as the plan and the trace read it: `--teacher-config` (a directory or hub
    id), or teacher.name at teacher.revision, from the hub cache first, else from the hub. A one-line SystemExit
    where it cannot be read (offline, or the hub unreachable: said at once, not after huggingface_hub's retries)
    or where its family is one the workflow refuses (normgrow.design.config.check_teacher_family)."""
    from huggingface_hub import constants
    from transformers import AutoConfig
    from transformers.utils import cached_file

    from normgrow.design.config import check_teacher_family
    from normgrow.model.family import PREFIXES, check_supported

    teacher = override or config["teacher"]["name"]
    if teacher is None:
        raise SystemExit("teacher.name is null (a teacher built by the workflow): pass --teacher-config DIR")
    revision = None if override else config["teacher"].get("revision")
    try:
        try:
            path = cached_file(teacher, "config.json", revision=revision, local_files_only=True)
        except OSError:
            if constants.HF_HUB_OFFLINE:
                raise OSError("offline (HF_HUB_OFFLINE)") from None
            hub_reachable()
            path = cached_file(teacher, "config.json", revision=revision)
        check_teacher_family(teacher, json.loads(Path(path).read_text()).get("model_type"), PREFIXES)
        loaded = AutoConfig.from_pretrained(Path(path).parent)
        check_supported(loaded)
    except OSError as error:
        raise SystemExit(f"normgrow: cannot read the config.json of teacher {teacher!r} at revision "
                         f"{revision or 'main'}: {' '.join(str(error).split())[:200]}; it is not in the hub cache "
                         f"({constants.HF_HUB_CACHE}): pass --teacher-config DIR (a directory with its config.json; "
                         "configs/teachers/ holds the paper's) or download it there") from None
    except ValueError as error:  # a family the workflow refuses: as the dry run says it
        raise SystemExit(f"normgrow: {error}") from None
    return loaded


def hub_reachable(timeout_s: float = 5.0) -> None:
    """An OSError at once where the hub's host cannot be reached (huggingface_hub would retry for ~23 s)."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s).close()
    except OSError as error:
        raise OSError(f"the hub ({constants.ENDPOINT}) is unreachable ({error})") from None


def print_plan(args) -> int:
    from normgrow.cluster.budget import budget, format_budget
    from normgrow.cluster.plan import format_plan, plan, what_fits

    config = read_configs(args.configs)
    teacher = teacher_config(config, args.teacher_config)
    result = plan(config, teacher, args.gpus, args.gpu_gb, False if args.no_activation_checkpointing else None,
                  args.students)
    print(format_plan(result))
    if not result["fits"]:
        print(what_fits(config, teacher, args.gpus, args.gpu_gb, False if args.no_activation_checkpointing else None,
                        args.students))
    print(format_budget(budget(config, teacher, result["resume_state_gb"], args.nodes, args.mfu, args.peak_tflops,
                               args.sigma, mean_tokens=args.mean_doc_tokens)))
    return 0


def print_export(args) -> int:
    from normgrow.model.export import export_phase, workflow_sources

    built_teacher, built_tokenizer = workflow_sources(args.phase_dir)
    teacher = args.teacher or built_teacher
    if teacher is None:
        print(f"normgrow export: no teacher beside {args.phase_dir}: pass --teacher (the run's teacher.name)",
              file=sys.stderr)
        return 1
    try:
        summary = export_phase(args.phase_dir, args.out, teacher, args.tokenizer or built_tokenizer or teacher,
                               args.teacher_revision)
    except (OSError, ValueError) as error:  # a bad phase directory, teacher or tokenizer: one line
        print(f"normgrow export: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    remote = ", trust_remote_code=True" if summary["trust_remote_code"] else ""
    print(f"{args.out}: {summary['class']}, {summary['placement']}, {summary['layers']} layers, "
          f"{summary['parameters']:,} parameters; load with AutoModelForCausalLM.from_pretrained({str(args.out)!r}"
          f"{remote})")
    return 0


def print_trace(args) -> int:
    from normgrow.cluster.trace import Untraceable, format_trace, trace
    from normgrow.design.config import training_ranks

    config = read_configs(args.configs)
    try:
        result = trace(config, teacher_config(config, args.teacher_config), args.gpus or training_ranks(config),
                       args.gpu_gb, args.rows, search=not args.no_search, students=args.students,
                       search_students=args.largest_group)
    except Untraceable as error:  # a config the trace cannot run: one line
        print(f"normgrow trace: {error}", file=sys.stderr)
        return 1
    print(format_trace(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if not result["fits"]:
        print(f"the traced peak exceeds 90% of --gpu-gb {args.gpu_gb:g}: lower train.batch_size or "
              "data.max_length, or use more GPUs", file=sys.stderr)
    return 0 if result["fits"] else 1


if __name__ == "__main__":
    sys.exit(main())
