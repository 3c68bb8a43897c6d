"""Export a trained phase's student as a `transformers` model directory (docs/workflow.md §Exporting a student).

A phase directory (results/phases/{key}) holds the student's weights under its own parameter names
(student.safetensors) and its state (state.json: placement, active blocks and layers). The export
rebuilds the student's first `active_blocks` blocks from the teacher's config and writes a directory
that `AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` load:

- a student of the family's own placement (normgrow.model.family: pre-norm for most, sandwich for
  Gemma 2 and 3, none for OLMo 2) *is* its teacher family's decoder (embedding, S = active blocks × L
  layers of the family's own decoder layer, final norm, untied head; a pre-norm or sandwich
  `DecoderLayer` is the family's own decoder layer under other norm names), so it is written as the family's own class
  (Qwen3ForCausalLM, Gemma2ForCausalLM, ...), which loads without remote code;
- every other placement is written as `NormgrowForCausalLM` (normgrow.model.modeling_normgrow: the
  training code's BlockStackStudent and its head), whose code is copied into the directory with the
  modules of normgrow.model it imports (student, layout, family) and loads with
  `trust_remote_code=True` where normgrow is not installed.

The weights record neither K nor L: they are read from their parameter names (`blocks.b.i.*`) and
checked against state.json's active layers.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import torch
from safetensors import safe_open

from normgrow.design.execution import PHASE_FILES
from normgrow.design.phase_record import PhaseRecord
from normgrow.model.family import family
from normgrow.model.layout import layer_kinds
from normgrow.model.student import BlockStackStudent, student_config

BLOCK = re.compile(r"blocks\.(\d+)\.(\d+)\.")
# The remote code of a non-pre-norm export: these package modules and the package modules they import,
# copied as they are but for their imports of normgrow, which become relative (transformers loads the
# directory as one package).
REMOTE_ROOTS = ("configuration_normgrow", "modeling_normgrow")
RELATIVE_IMPORT = re.compile(r"^from normgrow\.model\.(\w+) import", flags=re.MULTILINE)


def read_phase(phase_dir: Path) -> dict:
    """The phase's placement, K, L and active blocks, from state.json and the weights' names;
    a FileNotFoundError or ValueError naming the file for a directory that is not a phase's output."""
    phase_dir = Path(phase_dir)
    record_path, weights = phase_dir / PHASE_FILES["state"], phase_dir / PHASE_FILES["student"]
    record = PhaseRecord.read(record_path)
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: missing; a phase directory (results/phases/{{key}}) holds "
                                "student.safetensors and state.json")
    try:
        layer_kinds(record.placement, 1)
    except ValueError as error:
        raise ValueError(f"{record_path}: {error}") from None
    try:
        with safe_open(str(weights), "pt") as tensors:
            shapes = {name: tuple(tensors.get_slice(name).get_shape()) for name in tensors.keys()}
    except Exception as error:  # safetensors raises its own error types for a truncated header
        raise ValueError(f"{weights}: unreadable weights ({error})") from None
    indices = [tuple(map(int, m.groups())) for m in map(BLOCK.match, shapes) if m]
    if not indices:
        raise ValueError(f"{weights}: holds no block-stack student (no blocks.b.i.* parameters)")
    blocks, layers = max(b for b, _ in indices) + 1, max(i for _, i in indices) + 1
    active = record.active_blocks
    if not 1 <= active <= blocks or record.active_layers != active * layers:
        raise ValueError(f"{record_path}: active_blocks {active} / active_layers {record.active_layers} "
                         f"do not fit the weights' {blocks} blocks of {layers} layers ({weights})")
    return {"placement": record.placement, "blocks": blocks, "layers_per_block": layers, "active_blocks": active,
            "weights": weights, "shapes": shapes}


def load_teacher_config(teacher, revision: str | None = None):
    """The teacher's `transformers` config: given as one, or read from a hub id (at `revision`) /
    directory's config.json."""
    if isinstance(teacher, (str, Path)):
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(str(teacher), revision=revision)
    return teacher


def export_config(teacher_config, layers: int):
    """The family config of `layers` exported layers: the student's (normgrow.model.student.student_config),
    with an untied head (the student trains its own), no sliding window (the student's causal mask
    spans the whole sequence, whatever the teacher's config says; a class that declares `layer_types`
    keeps its window, which its global layers never apply: Gemma 2 and 3 build a sliding mask whatever
    their layers), and none of the settings student_config adds that the family's config class does
    not declare (transformers loads a Mistral config with `layer_types` as Ministral)."""
    config = student_config(teacher_config, layers)
    config.tie_word_embeddings = False
    declared = {field.name for field in dataclasses.fields(config)}
    if "sliding_window" in declared and "layer_types" not in declared:
        config.sliding_window = None
    for name in ("layer_types", "use_sliding_window"):
        if name not in declared:
            delattr(config, name)
    return config


def exported_tensors(phase: dict) -> dict[str, torch.Tensor]:
    """The weights' tensors, the inactive blocks' left out."""
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(phase["weights"]))
    except Exception as error:  # safetensors' own error types, e.g. for truncated data
        raise ValueError(f"{phase['weights']}: unreadable weights ({error})") from None
    return {name: tensor for name, tensor in tensors.items()
            if not (m := BLOCK.match(name)) or int(m.group(1)) < phase["active_blocks"]}


def own_name(name: str, layers_per_block: int, norm_names: dict) -> str:
    """The parameter name of a student of its family's own placement under the family's CausalLM
    (blocks.b.i → model.layers.b·L+i, the layer's norms under the family's names `norm_names`)."""
    if m := BLOCK.match(name):
        rest = name[m.end():]
        head, _, tail = rest.partition(".")
        rest = f"{norm_names.get(head, head)}.{tail}"
        return f"model.layers.{int(m.group(1)) * layers_per_block + int(m.group(2))}.{rest}"
    if name == "boundary_norm.weight":
        return "model.norm.weight"
    return name if name == "lm_head.weight" else f"model.{name}"


def check_fit(phase: dict, teacher_config) -> None:
    """The weights' parameter names and shapes against those of a weightless (meta) student of the
    teacher's dimensions: a ValueError naming the file when the placement, K, L or teacher differ."""
    K, L = phase["blocks"], phase["layers_per_block"]
    with torch.device("meta"):
        student = BlockStackStudent(student_config(teacher_config, K * L), phase["placement"], K, L)
    expected = {name: tuple(t.shape) for name, t in student.state_dict().items()}
    found = phase["shapes"]
    differences = [f"{name}: {found.get(name, 'missing')} in the weights, {expected.get(name, 'none')} expected"
                   for name in sorted(expected.keys() | found.keys()) if found.get(name) != expected.get(name)]
    if differences:
        raise ValueError(f"{phase['weights']}: does not fit a {phase['placement']} student of {K} blocks × {L} "
                         f"layers of this teacher's dimensions ({len(differences)} parameters differ; "
                         f"first {differences[0]})")


def build_export(phase: dict, teacher_config):
    """The exported model holding the phase's weights (not yet saved): the family's CausalLM for a
    student of the family's own placement, NormgrowForCausalLM otherwise."""
    from transformers import AutoModelForCausalLM

    from normgrow.model.configuration_normgrow import NormgrowConfig
    from normgrow.model.modeling_normgrow import NormgrowForCausalLM

    L, active = phase["layers_per_block"], phase["active_blocks"]
    family_config = export_config(teacher_config, active * L)
    tensors = exported_tensors(phase)
    own = family(teacher_config)
    if phase["placement"] == own.own_placement:
        tensors = {own_name(name, L, own.own_norm_names): tensor for name, tensor in tensors.items()}
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(family_config)
    else:
        layers_config = {key: value for key, value in family_config.to_dict().items()
                         if key not in ("architectures", "transformers_version", "dtype")}
        config = NormgrowConfig(
            layers_config=layers_config, placement=phase["placement"], blocks=phase["blocks"], layers_per_block=L,
            active_blocks=active, vocab_size=family_config.vocab_size, hidden_size=family_config.hidden_size,
            num_hidden_layers=active * L, pad_token_id=family_config.pad_token_id,
            bos_token_id=family_config.bos_token_id, eos_token_id=family_config.eos_token_id,
            auto_map={"AutoConfig": "configuration_normgrow.NormgrowConfig",
                      "AutoModelForCausalLM": "modeling_normgrow.NormgrowForCausalLM"})
        tensors = {f"{NormgrowForCausalLM.base_model_prefix}.{name}": tensor for name, tensor in tensors.items()}
        with torch.device("meta"):
            model = NormgrowForCausalLM(config)
    model.load_state_dict(tensors, strict=True, assign=True)
    return model


def copy_remote_code(out: Path) -> None:
    """The remote code into `out`: NormgrowConfig's and NormgrowForCausalLM's modules and every package
    module they import, followed import by import (so that the copy tracks the package's own modules),
    each import of normgrow made relative. Any other use of normgrow is an error here: the copy would
    load only where normgrow is installed."""
    package = Path(__file__).parent
    pending, written = list(REMOTE_ROOTS), set()
    while pending:
        name = pending.pop()
        if name in written:
            continue
        text = (package / f"{name}.py").read_text()
        pending += RELATIVE_IMPORT.findall(text)
        text = RELATIVE_IMPORT.sub(r"from .\1 import", text)
        if re.search(r"^\s*(from|import)\s+normgrow\b", text, flags=re.MULTILINE):
            raise RuntimeError(f"{package / name}.py imports normgrow in a form the export cannot make relative")
        (out / f"{name}.py").write_text(text)
        written.add(name)


def export_phase(phase_dir: Path, out: Path, teacher, tokenizer, teacher_revision: str | None = None) -> dict:
    """Write phase `phase_dir`'s student to the new directory `out` as a `transformers` model with the
    tokenizer: `teacher` is the teacher's hub id, directory or config (its dimensions rebuild the
    student; no teacher weights are read), `tokenizer` a hub id or directory (the workflow's
    results/data/tokenizer); `teacher_revision`: a hub teacher's revision (teacher.revision), also the
    tokenizer's when it is the teacher's. An existing `out` is refused, not replaced; the directory
    is written beside it and renamed into place, so that it is never seen half-written. Returns what
    was written: class, remote code or not, placement, layers, parameters."""
    from transformers import AutoTokenizer

    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out}: exists; remove it or export elsewhere")
    phase = read_phase(phase_dir)
    teacher_config = load_teacher_config(teacher, teacher_revision)
    check_fit(phase, teacher_config)
    model = build_export(phase, teacher_config)
    remote = phase["placement"] != family(teacher_config).own_placement
    tokenizer_revision = teacher_revision if str(tokenizer) == str(teacher) else None  # the teacher's own
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer), revision=tokenizer_revision)
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)  # left by an export that was killed
    partial.mkdir(parents=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    if remote:
        copy_remote_code(partial)
    partial.rename(out)
    return {"class": type(model).__name__, "trust_remote_code": remote, "placement": phase["placement"],
            "layers": phase["active_blocks"] * phase["layers_per_block"],
            "parameters": sum(p.numel() for p in model.parameters())}


def workflow_sources(phase_dir: Path) -> tuple[Path | None, Path | None]:
    """The teacher and tokenizer a workflow phase directory (…/results/phases/{key}) was trained with,
    where the workflow built them: results/teacher/model and results/data/tokenizer (None if absent;
    a hub teacher must be named)."""
    results = Path(phase_dir).resolve().parent.parent
    teacher, tokenizer = results / "teacher" / "model", results / "data" / "tokenizer"
    return (teacher if teacher.is_dir() else None), (tokenizer if tokenizer.is_dir() else None)


__all__ = ["export_phase", "read_phase", "workflow_sources"]
