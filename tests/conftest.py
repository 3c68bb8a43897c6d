"""Shared fixtures: a tiny random Qwen3 teacher and the repository's paths."""

from __future__ import annotations

import normgrow.train.threads  # noqa: F401  (first: libgomp reads its spin when torch is loaded)

# isort: split
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from transformers import AutoConfig, AutoModelForCausalLM, Qwen3ForCausalLM

from normgrow.design.config import SCHEMA, validate_config
from normgrow.model.family import attention_kernel
from normgrow.model.student import at_positions
from normgrow.train.data import save_tokens, split_corpus

REPO = Path(__file__).resolve().parents[1]
# The suite tests the CPU path (bit-identical resumes, gloo ranks, fp32 tolerances) on any machine;
# tests/test_gpu.py gives the devices back to its own subprocesses.
VISIBLE_GPUS = os.environ.get("CUDA_VISIBLE_DEVICES")
os.environ["CUDA_VISIBLE_DEVICES"] = ""
# torchrun's grace for the ranks after a SIGTERM (normgrow.cluster.launch.torchrun_command): the config's default
SHUTDOWN_TIMEOUT = yaml.safe_load(SCHEMA.read_text())["$defs"]["train_job"]["properties"]["shutdown_timeout"]["default"]


# What a tiny config of a family must set beside its dimensions: Gemma 2's final logit cap is refused
# (normgrow.model.family), Phi-3's default padding id (32000) lies outside a 64-token vocabulary.
FAMILY_OPTIONS = {"gemma2": {"final_logit_softcapping": None}, "phi3": {"pad_token_id": None}}


def tiny_config(model_type: str, layers: int = 2, **options):
    """A config of the family with the tests' tiny dimensions (2 layers of width 32, 64 tokens), `options` changed."""
    fields = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8, max_position_embeddings=64, tie_word_embeddings=False)
    return AutoConfig.for_model(model_type, **{**fields, **FAMILY_OPTIONS.get(model_type, {}), **options})


def tiny_teacher(model_type: str, layers: int = 2, **options):
    """A randomly initialised model of the family (`tiny_config`), every norm's weight in [0.5, 1.5)."""
    config = tiny_config(model_type, layers, **options)
    config._attn_implementation = attention_kernel(config, "sdpa")
    torch.manual_seed(0)
    teacher = AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, param in teacher.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    return teacher


def make_teacher(vocab_size: int = 64, hidden_size: int = 32, seed: int = 0, head_dim: int = 8) -> Qwen3ForCausalLM:
    """A small randomly initialised Qwen3ForCausalLM (`tiny_config`, MLPs of width 48) with a non-trivial
    final norm."""
    torch.manual_seed(seed)
    config = tiny_config("qwen3", vocab_size=vocab_size, hidden_size=hidden_size, head_dim=head_dim,
                         intermediate_size=48)
    config._attn_implementation = "sdpa"
    teacher = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        teacher.model.norm.weight.uniform_(0.5, 1.5)
    return teacher


def student_logits(student, batch, positions: torch.Tensor) -> torch.Tensor:
    """(N, V) full logits of the block-stack student at the N loss positions (the unfused path)."""
    return student.lm_head(at_positions(student(batch.input_ids, batch.attention_mask), positions))


@pytest.fixture
def default() -> dict:
    """config.yaml validated (its defaults filled), a fresh copy for each test."""
    return validate_config(yaml.safe_load((REPO / "config.yaml").read_text()), SCHEMA)


@pytest.fixture
def teacher() -> Qwen3ForCausalLM:
    return make_teacher()


SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")  # this environment's


def snakemake_command(workdir: Path, *args: str, config: Path | None = REPO / "configs" / "ci.yaml") -> list[str]:
    """A Snakemake command line on the repository's workflow, run in `workdir`."""
    command = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir)]
    if config is not None:
        command += ["--configfile", str(config)]
    return command + list(args)


def heavy_imports(*modules: str) -> list[str]:
    """Which of torch and transformers importing `modules` pulls in, in a fresh interpreter."""
    code = (f"import sys, {', '.join(modules)}; "
            "print(' '.join(m for m in ('torch', 'transformers') if m in sys.modules))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def headless_dom(chromium: str, page: Path, profile: Path, budget_ms: int, timeout: int) -> str:
    """The DOM of `page` after headless Chromium ran its scripts for `budget_ms` of virtual time, offline."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}"]
    return subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                          timeout=timeout).stdout


@pytest.fixture
def chromium() -> str:
    """Headless Chromium for the report tests: skipped where it is not installed, a failure where
    NORMGROW_REQUIRE_CHROMIUM is set (CI)."""
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("NORMGROW_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is required (apt-get install chromium)")
        pytest.skip("chromium is not installed")
    return path


@pytest.fixture
def pdflatex() -> str:
    """pdflatex with booktabs and graphicx for the LaTeX table tests: skipped where one is not
    installed, a failure where NORMGROW_REQUIRE_PDFLATEX is set (CI)."""
    path = shutil.which("pdflatex")
    kpsewhich = shutil.which("kpsewhich")
    packages = kpsewhich and subprocess.run([kpsewhich, "booktabs.sty", "graphicx.sty"], capture_output=True,
                                            text=True).stdout.split()
    if path is None or not packages or len(packages) < 2:
        if os.environ.get("NORMGROW_REQUIRE_PDFLATEX"):
            pytest.fail("pdflatex, booktabs and graphicx are required "
                        "(apt-get install texlive-latex-base texlive-latex-recommended)")
        pytest.skip("pdflatex, booktabs or graphicx is not installed")
    return path


@pytest.fixture
def cffconvert_python() -> str:
    """The Python interpreter of cffconvert, for the citation tests (cffconvert lives in its own
    environment: it requires jsonschema < 4, normgrow >= 4.20): the one its `cffconvert` script names.
    Skipped where cffconvert is not installed, a failure where NORMGROW_REQUIRE_CFFCONVERT is set (CI)."""
    path = shutil.which("cffconvert")
    if path is None:
        if os.environ.get("NORMGROW_REQUIRE_CFFCONVERT"):
            pytest.fail("cffconvert is required (python3 -m venv .venv-cffconvert && "
                        ".venv-cffconvert/bin/pip install cffconvert==2.0.0, then put its bin/ on PATH)")
        pytest.skip("cffconvert is not installed")
    return Path(path).read_text().splitlines()[0].removeprefix("#!").strip()


TABLE_PACKAGES = ("booktabs", "graphicx")  # those a `.tex` table names in its first line (Table.latex)
OVERFULL_TOLERANCE_PT = 1.0  # an Overfull \hbox wider than this is a table that runs past the text width
OVERFULL = re.compile(r"^Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\)", re.M)


def compile_tables(pdflatex: str, tables: list[Path], workdir: Path, name: str,
                   preamble: str = "") -> tuple[bool, str]:
    """Compile the `.tex` tables (copied into `workdir`) in one one-column `article` with the packages
    they name (and `preamble`), each after a line `table: NAME` in the log and on its own page: whether
    pdflatex finished, and its log. A glyph missing from the font is an error."""
    workdir.mkdir(parents=True, exist_ok=True)
    for path in tables:
        shutil.copyfile(path, workdir / path.name)
    body = "\n".join(f"\\typeout{{table: {path.stem}}}\\input{{{path.stem}}}\\clearpage" for path in tables)
    packages = "".join(f"\\usepackage{{{package}}}\n" for package in TABLE_PACKAGES)
    (workdir / f"{name}.tex").write_text(f"\\documentclass{{article}}\n{packages}{preamble}"
                                         "\\tracinglostchars=3\n"  # a glyph missing from the font: an error
                                         f"\\begin{{document}}\n{body}\n\\end{{document}}\n")
    result = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                             f"{name}.tex"], cwd=workdir, capture_output=True, text=True, timeout=120)
    return result.returncode == 0, (workdir / f"{name}.log").read_text(errors="replace")


def overfull_by_table(log: str) -> dict[str, list[float]]:
    """The Overfull \\hbox warnings of a `compile_tables` log beyond OVERFULL_TOLERANCE_PT, in pt, by
    table (every table named, an empty list for one that fits)."""
    overfull = {}
    for part in log.split("\ntable: ")[1:]:
        name, _, rest = part.partition("\n")
        overfull[name] = [w for w in map(float, OVERFULL.findall(rest)) if w > OVERFULL_TOLERANCE_PT]
    return overfull


def latex_errors(pdflatex: str, tables: list[Path], workdir: Path) -> dict[str, str]:
    """Compile the `.tex` tables with pdflatex and the packages they name, all in one one-column
    `article` first and, if that fails, each in its own: the pdflatex error of every table that does
    not compile, by file name (an empty dict when all compile). A missing glyph counts as an error, and
    so does an Overfull \\hbox beyond OVERFULL_TOLERANCE_PT: a table wider than the text."""

    def compile_document(name: str, inputs: list[Path]) -> str | None:
        finished, log = compile_tables(pdflatex, inputs, workdir, name)
        errors = [line for line in log.splitlines() if line.startswith("!") or "Missing character" in line]
        if not finished:
            return "\n".join(errors) or "pdflatex failed"
        errors += [f"Overfull \\hbox ({width}pt too wide) in table {table}"
                   for table, widths in overfull_by_table(log).items() for width in widths]
        return "\n".join(errors) or None

    if compile_document("all_tables", tables) is None:
        return {}
    errors = {path.name: compile_document(f"only_{path.stem}", [path]) for path in tables}
    return {name: error for name, error in errors.items() if error is not None} or {"(all together)": "failed"}


@pytest.fixture(scope="session")
def ci_workdir(tmp_path_factory, worker_id) -> Path:
    """A working directory in which the CI config has been run end to end (results/paper built), once
    per test session: under pytest-xdist (`pytest -m slow -n 2`) the first worker to ask runs it in the
    session's shared temporary directory while the others wait on a file lock, then read it too (the
    tests copy it before changing anything). A failed run fails every test that asks, with its output."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    workdir, outcome = shared / "ci-run", shared / "ci-run.outcome"
    with FileLock(shared / "ci-run.lock"):
        if not outcome.exists():
            workdir.mkdir()
            result = subprocess.run(snakemake_command(workdir, "--cores", "2", "--", "results/paper"),
                                    capture_output=True, text=True, timeout=1800)
            outcome.write_text("" if result.returncode == 0 else result.stdout[-3000:] + result.stderr[-3000:])
    assert outcome.read_text() == "", outcome.read_text()
    return workdir


# Seconds the longest test files take, by tier (setup and calls summed; `pytest -n auto --durations=0` and
# `pytest -m slow -n 2 --durations=0` on 2 cores, 2026-12-06; test_resume's slow share without its wait for
# the CI run, which test_workflow builds). Only the order they give matters: a stale number costs time, not a
# result.
FAST_SECONDS = {"test_docs_commands.py": 63, "test_study.py": 41, "test_trace.py": 39, "test_tracking.py": 34,
                "test_distributed.py": 33, "test_workflow.py": 32, "test_groups.py": 31, "test_export.py": 18,
                "test_resume.py": 17, "test_bad_inputs.py": 12, "test_formation.py": 11}
SLOW_SECONDS = {"test_slurm.py": 604, "test_workflow.py": 432, "test_resume.py": 240, "test_distributed.py": 173,
                "test_envs.py": 86, "test_offline.py": 77, "test_families.py": 74, "test_benchmark.py": 51,
                "test_user_ci.py": 45, "test_report.py": 44, "test_bad_inputs.py": 35, "test_trace.py": 32}


def pytest_collection_modifyitems(items: list) -> None:
    """The longest files first: pytest-xdist hands whole files to its workers in this order
    (`--no-loadscope-reorder` in addopts), so that a long file does not start last and run alone while
    the other worker idles; the SLURM tests, which mostly wait on the scheduler, overlap the rest."""
    def seconds(item) -> int:
        return (SLOW_SECONDS if item.get_closest_marker("slow") else FAST_SECONDS).get(item.path.name, 0)

    items.sort(key=lambda item: -seconds(item))


# ---------------------------------------------------------------- a tiny phase-trainer setup
SEED = 5
BATCH = 2
STEPS = 3
LAYERS_PER_BLOCK = 2


def tiny_run_config(**train) -> dict:
    """A two-phase freeze run of a 2-block student, small enough to train in a second; `train` changes its
    training settings."""
    config = {
        "threads": 1,
        "teacher": {"dtype": "float32"},
        "student": {"blocks": 2, "layers_per_block": LAYERS_PER_BLOCK, "attn_implementation": "sdpa"},
        "objective": {"alpha": 0.7, "gamma": 0.3, "temperature": 1.0},
        "train": {"phase_steps": STEPS, "batch_size": BATCH, "lr": 1e-2, "min_lr": 1e-4,
                  "warmup_fraction": 0.015, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.0,
                  "grad_clip": 0.5, "eval_every": 2, "resume_every": 2, "loss_chunk": 5,
                  "precision": "float32", "activation_checkpointing": False, "compile": False,
                  "padding_free": False},
        "curricula": {"freeze": [{"active_blocks": 1, "trainable": "newest"},
                                 {"active_blocks": 2, "trainable": "newest"}]},
        "runs": {"post-freeze": {"placement": "post", "curriculum": "freeze"}},
    }
    config["train"].update(train)
    return config


def phase_job(config: dict, run: str, seed: int, phase: int, root: Path, previous: Path | None = None) -> dict:
    """What `normgrow.cli train-phase --job FILE` reads (normgrow.train.trainer.TrainingJob as JSON): phase
    `phase` of `run` with the execution settings the workflow's job gives it, the teacher and tokens that
    `write_phase_inputs` put under `root`, its output directory set by `with_out`."""
    from normgrow.design.curriculum import phase_spec, snapshots_per_phase
    from normgrow.design.execution import Execution
    from normgrow.train.trainer import PhaseTask, TrainingJob

    task = PhaseTask(phase_spec(config, run, seed, phase),
                     Execution.from_config(config, snapshots_per_phase(config, run)), previous, root / "out")
    return TrainingJob((task,), str(root / "teacher"), root / "tokens").to_json()


def train_job(job: dict, path: Path, fault: str | None = None, ranks: int = 1,
              **env: str) -> subprocess.CompletedProcess:
    """`job` (normgrow.train.trainer.TrainingJob as JSON) written to `path` and trained as the workflow's job
    trains it: `normgrow.cli train-phase --job PATH` in one process, or torchrun's command for it on `ranks`
    ranks (normgrow.cluster.launch); NORMGROW_FAULT is `fault`, unset without one, and `env` is added to
    the environment. Both output streams in `.stdout`."""
    from normgrow.cluster.launch import torchrun_command

    path.write_text(json.dumps(job))
    args = ["--job", str(path)]
    command = (torchrun_command(ranks, 1, args, SHUTDOWN_TIMEOUT) if ranks > 1
               else [sys.executable, "-m", "normgrow.cli", "train-phase", *args])
    env = ({k: v for k, v in os.environ.items() if k != "NORMGROW_FAULT"} | ({"NORMGROW_FAULT": fault} if fault else {})
           | env)
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, env=env)


def with_out(job: dict, out: Path, previous: Path | None = None) -> dict:
    """`job` (JSON, one phase) writing to `out`, from `previous` (at phase 0: None)."""
    task = {**job["tasks"][0], "out": str(out), "previous": None if previous is None else str(previous)}
    return {**job, "tasks": [task]}


def train_named(root: Path, job: dict, name: str, previous: Path | None = None, fault: str | None = None,
                ranks: int = 1, **env: str) -> subprocess.CompletedProcess:
    """`job` (JSON, one phase) trained by `train_job` into root/NAME from `previous` (at phase 0: None), its
    job file root/NAME.job.json."""
    return train_job(with_out(job, root / name, previous), root / f"{name}.job.json", fault, ranks, **env)


def train_alone(spec, execution, teacher, tokens: Path, previous: Path | None, out: Path, log=sys.stderr):
    """One phase trained by itself in this process: a job of one (normgrow.train.trainer.train_phases); its
    record."""
    from normgrow.train.trainer import PhaseTask, TrainingJob, train_phases

    job = TrainingJob((PhaseTask(spec, execution, previous, Path(out)),), str(teacher), Path(tokens))
    return train_phases(job, log)[0]


def phase_outputs(directory: Path) -> dict:
    """Every declared output's content; state.json without its wall time."""
    files = {name: (directory / name).read_bytes() for name in ("student.safetensors", "train.csv", "eval.csv")}
    state = json.loads((directory / "state.json").read_text())
    state.pop("wall_seconds")
    files["state.json"] = state
    files["snapshots"] = {p.name: p.read_bytes() for p in sorted((directory / "snapshots").iterdir())}
    return files


def phase_record(**changes):
    """A finished phase's record (normgrow.design.phase_record) of a 2-block post-norm phase, with `changes`."""
    from normgrow.design.curriculum import DataPosition
    from normgrow.design.phase_record import PhaseRecord

    counters = {"tokens": 64, "unique_tokens": 64, "active_layer_tokens": 256, "steps": 2}
    fields = {"key": "0" * 16, "seed": 1, "phase": 0, "placement": "post", "active_blocks": 2, "active_layers": 4,
              "trainable_blocks": [0, 1], "data_policy": "continue", "global_step": 2,
              "data": DataPosition(position=8, high_water=8), "phase_counters": counters, "run_counters": counters,
              "final_eval": {"step": 2, "global_step": 2, "ce": 4.0, "kd": 1.0, "kd_soft": 1.0, "ppl": 54.6},
              "wall_seconds": 1.0, "ranks": 1, "code": []}
    return PhaseRecord(**{**fields, **changes})


def only_the_finished_record_remains(directory: Path) -> bool:
    """Whether a finished phase in `directory` kept its finished record (normgrow.train.attempts) and nothing
    else of its resume directory: no resume state, snapshot or error record."""
    resume = directory / "resume"
    return sorted(p.name for p in resume.iterdir()) == ["finished", "finished.json"]


def split_in_memory(corpus, **settings) -> tuple[dict[str, list[str]], dict]:
    """`split_corpus` collecting each split's texts in a list: (splits, counts)."""
    splits = {"valid": [], "diag": [], "train": []}
    counts = split_corpus(corpus, write=lambda split, text: splits[split].append(text), **settings)
    return splits, counts


def write_phase_inputs(root: Path, seed: int, documents: int, longest: int, valid: int, head_dim: int = 8) -> None:
    """What a phase reads, under `root`: `documents` random documents of 3..`longest` tokens ending
    in the boundary token 0 (tokens/train; the first `valid` also tokens/valid) and a tiny teacher
    (`make_teacher` with `head_dim`)."""
    rng = np.random.default_rng(seed)
    docs = [[*rng.integers(1, 64, size=int(n)).tolist(), 0] for n in rng.integers(3, longest, size=documents)]
    save_tokens(docs, root / "tokens" / "train")
    save_tokens(docs[:valid], root / "tokens" / "valid")
    (root / "tokens" / "meta.json").write_text(json.dumps({"boundary_id": 0}))
    make_teacher(head_dim=head_dim).save_pretrained(root / "teacher")


RESUMABLE_STEPS, RESUMABLE_EVERY = 12, 3  # the resumable phase's updates and its resume-state interval


@pytest.fixture(scope="module")
def resumable(tmp_path_factory) -> dict:
    """Phase 0 of a post-norm freeze run (seed 5) of RESUMABLE_STEPS updates, a resume state every
    RESUMABLE_EVERY and 3 snapshots, as the workflow's job hands it to `normgrow.cli train-phase --job`:
    {"root": its inputs (and the tests' outputs), "job": the job as JSON, writing to root/out}."""
    root = tmp_path_factory.mktemp("resumable")
    write_phase_inputs(root, seed=1, documents=30, longest=12, valid=4)
    config = tiny_run_config(phase_steps=RESUMABLE_STEPS, resume_every=RESUMABLE_EVERY, eval_every=4)
    config["diagnostics"] = {"runs": ["post-freeze"], "snapshots_per_phase": 3}
    return {"root": root, "job": phase_job(config, "post-freeze", 5, 0, root)}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict:
    """Tokens (train, valid) and a saved tiny teacher for `tiny_run_config`."""
    root = tmp_path_factory.mktemp("trainer")
    rng = np.random.default_rng(0)
    lengths = [5, 9, 3, 7, 12, 4, 6, 8, 10, 2]
    train = [[*rng.integers(1, 64, size=n - 1).tolist(), 0] for n in lengths]
    valid = [[*rng.integers(1, 64, size=n - 1).tolist(), 0] for n in (6, 11, 4)]
    tokens = root / "tokens"
    save_tokens(train, tokens / "train")
    save_tokens(valid, tokens / "valid")
    (tokens / "meta.json").write_text(json.dumps({"boundary_id": 0}))
    teacher = make_teacher()
    teacher.save_pretrained(root / "teacher")
    return {"root": root, "tokens": tokens, "teacher": str(root / "teacher"), "train": train,
            "teacher_model": teacher}
