"""Which code trained a phase: a digest of the package's science code and the versions of torch and
transformers, recorded in every phase's state.json (normgrow.train.trainer) and compared by the report
(normgrow.paper.report, Provenance) with the checkout that builds it.

A phase's key (normgrow.design.curriculum.PhaseSpec.key) hashes its spec, not its code; the digest is the
training rule's rerun decision instead (a param of workflow/rules/train.smk, with Snakemake's `code`
trigger off in profiles/default): a change to the phase code retrains every phase in its own directory,
and an edit to a rule script or to a comment or docstring retrains none. The digest reads the code as
Python's parser does (comments, docstrings and layout out), so only code can change it (docs/workflow.md,
Which code trained a phase).

Imports neither torch nor transformers: the Snakefile and the report compute the digest too.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
from pathlib import Path

# The modules whose code runs when a phase trains and can change its numbers (weights, losses,
# evaluations, counters): the phase's code. Listed once, here; tests/test_science_code.py checks that
# every normgrow module a training job imports (workflow/scripts/train_phase.py, transitively) is here
# or in EXECUTION_ONLY.
PHASE_MODULES = (
    "train.trainer",        # the phase loop: updates, evaluation schedule, counters, outputs
    "train.objective",      # KD + CE
    "train.forward",        # loss positions and labels, the teacher's hidden states at them
    "train.evaluate",       # the validation metrics
    "design.schedule",        # warm-up + cosine
    "design.curriculum",      # phases: active and trainable blocks, data policies, growth operators, lr restarts
    "design.phase_record",    # a finished phase's record: where the next phase of its run starts
    "train.data",           # the document iterator, batches, the fixed validation batches
    "model.student",        # the block-stack student and its decoder layer, its initialisation, growth
    "model.layout",         # each placement's norms around the residual adds (the registry the layer follows)
    "model.family",         # the teacher's decoder classes the student is built from
    "train.teacher",        # loading the teacher (and pretraining the embedded one)
    "train.outputs",        # the weights a phase writes and the next one reads
    "train.resume",         # resume states: what a resumed phase continues from
    "train.distributed",    # FSDP2 sharding, the ranks' rows, reductions
)

# Modules a training job imports that cannot change a phase's numbers: how it runs, not what it computes.
EXECUTION_ONLY = {
    "train.tracking": "live curves sent to accelerate's trackers",
    "train.faults": "the tests' fault-injection hooks (inactive unless an environment variable sets them)",
    "train.attempts": "what a retry does (restore a finished phase's outputs, refuse after an exception)",
    "design.kinds": "which config keys are science or execution: decides the keys, not the numbers",
    "design.config": "validation and defaults: what it fills in is in the phase's spec, hence in its key",
    "cluster.launch": "starting the ranks (torchrun, srun)",
    "cli": "the ranks' entry point under torchrun: argument parsing",
    "design.logs": "job logs",
    "train.threads": "OpenMP's spin, set before torch is imported",
    "train.compiled": "Dynamo's recompile limit made an error and the graphs counted: what fails, not what is computed",
    "design.execution": "the execution settings as typed values (threads, state saves, tracking, ...)",
}

# The software beside the code whose versions a phase records.
PACKAGES = ("torch", "transformers")
DIGEST_LENGTH = 16  # hex digits of SHA-256, as a phase key
# What a phase (or a resume state) written before phases recorded their code holds in its place.
UNRECORDED = {"digest": "unrecorded", **dict.fromkeys(PACKAGES, "unrecorded")}


def digest(root: Path | None = None, modules: tuple[str, ...] = PHASE_MODULES) -> str:
    """SHA-256 (first DIGEST_LENGTH hex digits) of the code of `modules` (names under the package,
    `train.trainer`) under `root` (default: the normgrow package's directory), each with its name: any
    change to the code of one of them changes it; comments, docstrings and layout do not (`code_only`)."""
    root = Path(__file__).resolve().parents[1] if root is None else Path(root)
    sha = hashlib.sha256()
    for name in sorted(modules):
        source = (root / f"{name.replace('.', '/')}.py").read_text()
        sha.update(name.encode() + b"\0" + code_only(source).encode() + b"\0")
    return sha.hexdigest()[:DIGEST_LENGTH]


DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)  # the nodes a docstring opens


def code_only(source: str) -> str:
    """`source` parsed and written back without its docstrings (`ast.unparse`): no comments, no layout."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, DOCUMENTED) and node.body and is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def trained_by_other_code(code: list[dict[str, str]], current: str) -> bool:
    """Whether a phase's record (normgrow.design.phase_record) names code other than the digest `current` (its
    `code`) in any job that trained it, or names none (trained before phases recorded their code)."""
    return {job.get("digest") for job in code or [{}]} != {current}


@functools.cache
def record() -> dict[str, str]:
    """This process's code: the digest of the phase modules (read once, when first asked: the trainer
    asks before it loads anything) and the versions of PACKAGES."""
    return {"digest": digest(), **{package: version(package) for package in PACKAGES}}
