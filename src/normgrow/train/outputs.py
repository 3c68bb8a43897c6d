"""A job's files: the student's unsharded weights (safetensors), JSON (a phase's state.json, the
diagnostics, the resume and attempt records) and CSV (a phase's train.csv and eval.csv), each written by
the one atomic writer here, and the student loaded back from its weights. Imports torch only to save or
load weights: the attempt records (normgrow.train.attempts) are written without it."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it onto `path`: readers never see a
    partial file. The temporary file is this process's own, so that ranks may write side by side."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def write_json(path: Path, data: dict, indent: int | None = 2) -> None:
    """`data` as JSON at `path`, atomically: indented with a final newline, or on one line (`indent` None)."""
    text = json.dumps(data, indent=indent) + ("\n" if indent is not None else "")
    atomic_write(path, lambda tmp: tmp.write_text(text))


def write_csv(path: Path, rows: list[dict]) -> None:
    """`rows` as CSV at `path`, atomically, the first row's keys its header."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(path, write)


def save_student(student: torch.nn.Module, path: Path) -> None:
    """The student's full, unsharded weights as one safetensors file that loads in a single process.

    For a sharded (FSDP2) student this is a collective: every rank calls it, rank 0 writes."""
    from safetensors.torch import save_file

    from normgrow.train.distributed import full_state_dict, is_main_process

    tensors = {k: v.contiguous() for k, v in full_state_dict(student).items()}
    def write(tmp):
        save_file(tensors, str(tmp), metadata={"format": "pt"})
        os.chmod(tmp, 0o666 & ~current_umask())  # safetensors creates 0600 files: make them readable like any other

    if is_main_process():
        atomic_write(path, write)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class WeightsError(RuntimeError):
    """A phase's saved weights (its student.safetensors or a snapshot) missing, unreadable, or not fitting
    the student."""


def load_student(student: torch.nn.Module, path: Path) -> None:
    """Load a phase's saved weights into `student`, with one clear error for every way it can fail."""
    from safetensors.torch import load_file

    path = Path(path)
    hint = "rerun the phase that writes it (snakemake --forcerun <that phase's state.json>)"
    if not path.is_file():
        raise WeightsError(f"{path}: weights missing; {hint}")
    try:
        tensors = load_file(str(path))
    except Exception as error:  # safetensors raises its own error types for truncated headers and data
        raise WeightsError(f"{path}: unreadable or truncated weights ({error}); {hint}") from None
    try:
        student.load_state_dict(tensors, strict=True)
    except RuntimeError as error:
        raise WeightsError(f"{path}: does not fit this student (placement, blocks, layers or teacher "
                           f"dimensions differ): {str(error).splitlines()[0]}") from None


def student_from_weights(path: Path, teacher_config, placement: str, student: dict, active_blocks: int):
    """A student rebuilt from the teacher's config (no teacher weights) and a phase's saved weights."""
    from normgrow.model.student import BlockStackStudent, student_config

    layers = student["blocks"] * student["layers_per_block"]
    model = BlockStackStudent(student_config(teacher_config, layers, student["attn_implementation"]),
                              placement, student["blocks"], student["layers_per_block"], active_blocks=active_blocks)
    load_student(model, path)
    return model.eval()
