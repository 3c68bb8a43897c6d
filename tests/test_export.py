"""Exporting a phase's student (normgrow.model.export, `normgrow.cli export`): for every placement and every
supported family, `AutoModelForCausalLM.from_pretrained` loads a model whose logits are the
student's; a student of its family's own placement (pre-norm; sandwich for Gemma 2 and 3; none for
OLMo 2) loads as its family's own class without remote code, any other placement through the remote
code shipped in the directory, which imports no normgrow; generate()
runs; only the active blocks are exported; a directory that is not a phase's output is refused by
name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import phase_record, tiny_teacher
from safetensors import safe_open
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast
from transformers.dynamic_module_utils import get_imports

from normgrow.cli import main
from normgrow.model.export import export_phase
from normgrow.model.family import OWN_PLACEMENT, PREFIXES
from normgrow.model.layout import PLACEMENTS
from normgrow.model.student import BlockStackStudent
from normgrow.train.outputs import save_student

BLOCKS, LAYERS = 3, 2
IDS = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))
MASK = torch.ones_like(IDS)
MASK[1, 6:] = 0  # right padding, as in training


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict:
    """A saved tiny teacher of every family and one tokenizer of the teachers' 64 tokens."""
    root = tmp_path_factory.mktemp("export-sources")
    teachers = {}
    for model_type in PREFIXES:
        teachers[model_type] = root / model_type
        tiny_teacher(model_type).save_pretrained(teachers[model_type])
    words = Tokenizer(models.WordLevel({f"t{i}": i for i in range(64)}, unk_token="t0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, eos_token="t0", pad_token="t0")
    tokenizer.save_pretrained(root / "tokenizer")
    return {"teachers": teachers, "tokenizer": root / "tokenizer"}


def trained_phase(root: Path, teacher_dir: Path, placement: str, active_blocks: int) -> BlockStackStudent:
    """A phase directory under `root` as the trainer leaves it, for a student of K = 3 blocks × L = 2
    layers as if trained: every norm moved off the identity (so a misplaced norm changes the logits)
    and the blocks' projections far from their small initial draw (so the context, not only the
    current token, decides the next)."""
    teacher = AutoModelForCausalLM.from_pretrained(teacher_dir)
    student = BlockStackStudent.from_teacher(teacher, placement, BLOCKS, LAYERS, seed=3).eval()
    generator = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for name, param in student.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(torch.rand(param.shape, generator=generator) - 0.5)
            elif name.startswith("blocks."):
                param.add_(0.3 * torch.randn(param.shape, generator=generator))
    student.active_blocks = active_blocks
    save_student(student, root / "student.safetensors")
    write_record(root, placement=placement, active_blocks=active_blocks, active_layers=active_blocks * LAYERS)
    return student


def write_record(phase: Path, **changes) -> None:
    (phase / "state.json").write_text(json.dumps(phase_record(**changes).to_json()))


def student_logits(student: BlockStackStudent) -> torch.Tensor:
    with torch.no_grad():
        return student.lm_head(student(IDS, MASK))


def load(out: Path, remote: bool):
    return AutoModelForCausalLM.from_pretrained(out, trust_remote_code=remote, dtype=torch.float32).eval()


@pytest.mark.parametrize("model_type", list(PREFIXES))
@pytest.mark.parametrize("placement", [*PLACEMENTS, "mix-ln@2"])
def test_exported_logits_are_the_students(tmp_path, sources, model_type, placement):
    """Two of three blocks active: DeepNorm's α must stay the trained depth's, Mix-LN's first block is
    post-norm and (mix-ln@1) its second pre-norm; Gemma's √H and (1 + w) norms included."""
    student = trained_phase(tmp_path / "phase", sources["teachers"][model_type], placement, active_blocks=2)
    summary = export_phase(tmp_path / "phase", tmp_path / "out", sources["teachers"][model_type],
                           sources["tokenizer"])
    remote = placement != OWN_PLACEMENT.get(model_type, "pre")
    assert summary["trust_remote_code"] is remote and summary["layers"] == 2 * LAYERS
    model = load(tmp_path / "out", remote=remote)
    with torch.no_grad():
        logits = model(input_ids=IDS, attention_mask=MASK).logits
    torch.testing.assert_close(logits, student_logits(student), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", [t for t in PREFIXES if OWN_PLACEMENT.get(t, "pre")])
def test_the_own_placement_exports_as_the_familys_own_class(tmp_path, sources, model_type):
    """No remote code: the family's CausalLM with S = active layers, an untied head, the tokenizer; for
    Gemma 2 and 3 the sandwich student, their layer's four norms."""
    placement = OWN_PLACEMENT.get(model_type, "pre")
    trained_phase(tmp_path / "phase", sources["teachers"][model_type], placement, active_blocks=BLOCKS)
    export_phase(tmp_path / "phase", tmp_path / "out", sources["teachers"][model_type], sources["tokenizer"])
    model = load(tmp_path / "out", remote=False)
    assert type(model).__name__ == f"{PREFIXES[model_type]}ForCausalLM"
    assert type(model).__module__.startswith("transformers.models.")
    assert model.config.num_hidden_layers == BLOCKS * LAYERS and not model.config.tie_word_embeddings
    assert not list((tmp_path / "out").glob("*.py")) and "auto_map" not in json.loads(
        (tmp_path / "out" / "config.json").read_text())
    # transformers builds its Qwen2Tokenizer for any qwen2 directory: the trained one loads by its class
    tokenizer = (PreTrainedTokenizerFast if model_type == "qwen2" else AutoTokenizer).from_pretrained(tmp_path / "out")
    assert tokenizer("t1 t2 t5").input_ids == [1, 2, 5]


def test_remote_code_imports_no_normgrow(tmp_path, sources):
    """The directory's modules import only installed libraries and each other, the loaded layers are
    the copies', and a Python without normgrow loads the model and computes the same logits."""
    student = trained_phase(tmp_path / "phase", sources["teachers"]["qwen3"], "hybridnorm", active_blocks=2)
    out = tmp_path / "out"
    export_phase(tmp_path / "phase", out, sources["teachers"]["qwen3"], sources["tokenizer"])
    for module in out.glob("*.py"):
        assert "normgrow" not in get_imports(module), module.name
    model = load(out, remote=True)
    # the export runs the training code's stack, copied: the student's class, not a restatement of it
    assert type(model.student).__name__ == "BlockStackStudent"
    assert type(model.student).__module__.startswith("transformers_modules.")
    assert type(model.student.blocks[0][0]).__module__.startswith("transformers_modules.")
    assert AutoTokenizer.from_pretrained(out, trust_remote_code=True)("t1 t2 t5").input_ids == [1, 2, 5]
    assert model.config.layers_config["model_type"] == "qwen3" and model.config.active_blocks == 2
    with torch.no_grad():
        output = model(input_ids=IDS, labels=IDS)  # the mean next-token CE with labels, as a CausalLM's
    expected = torch.nn.functional.cross_entropy(output.logits[:, :-1].flatten(0, 1), IDS[:, 1:].flatten())
    torch.testing.assert_close(output.loss, expected)
    torch.save({"ids": IDS, "mask": MASK}, tmp_path / "batch.pt")
    code = ("import sys; sys.modules['normgrow'] = None\n"
            "import torch; from transformers import AutoModelForCausalLM\n"
            f"model = AutoModelForCausalLM.from_pretrained({str(out)!r}, trust_remote_code=True).eval()\n"
            f"batch = torch.load({str(tmp_path / 'batch.pt')!r})\n"
            "with torch.no_grad():\n"
            "    logits = model(input_ids=batch['ids'], attention_mask=batch['mask']).logits\n"
            f"torch.save(logits, {str(tmp_path / 'logits.pt')!r})\n")
    environment = {**os.environ, "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    torch.testing.assert_close(torch.load(tmp_path / "logits.pt"), student_logits(student), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_generate_is_the_students_greedy_decoding(tmp_path, sources, placement):
    """generate() runs (with the family's KV cache for pre-norm, without a cache otherwise) and
    greedily picks the student's most likely next token at every step."""
    student = trained_phase(tmp_path / "phase", sources["teachers"]["llama"], placement, active_blocks=2)
    export_phase(tmp_path / "phase", tmp_path / "out", sources["teachers"]["llama"], sources["tokenizer"])
    model = load(tmp_path / "out", remote=placement != "pre")
    prompt = IDS[:1, :4]
    generated = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=6, do_sample=False,
                               min_new_tokens=6, use_cache=True)
    expected = prompt
    with torch.no_grad():
        for _ in range(6):
            hidden = student(expected, torch.ones_like(expected))
            expected = torch.cat([expected, student.lm_head(hidden[:, -1]).argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generated, expected)


def test_the_export_attends_beyond_the_teachers_sliding_window(tmp_path, sources):
    """The student's causal mask spans the whole sequence, whatever the teacher's config says: a
    Mistral teacher with a two-token sliding window exports a model that still computes the
    student's logits on nine tokens (the family's own class, which would apply the window)."""
    teacher = tiny_teacher("mistral")
    teacher.config.sliding_window = 2
    teacher.save_pretrained(tmp_path / "teacher")
    student = trained_phase(tmp_path / "phase", tmp_path / "teacher", "pre", active_blocks=1)
    export_phase(tmp_path / "phase", tmp_path / "out", tmp_path / "teacher", sources["tokenizer"])
    model = load(tmp_path / "out", remote=False)
    with torch.no_grad():
        logits = model(input_ids=IDS, attention_mask=MASK).logits
    torch.testing.assert_close(logits, student_logits(student), rtol=1e-5, atol=1e-5)
    assert model.config.sliding_window is None


@pytest.mark.parametrize("placement", ["pre", "deepnorm"])
def test_only_the_active_blocks_are_exported(tmp_path, sources, placement):
    """One of three blocks active: L layers exported, no weight of an inactive block in the file."""
    student = trained_phase(tmp_path / "phase", sources["teachers"]["qwen2"], placement, active_blocks=1)
    export_phase(tmp_path / "phase", tmp_path / "out", sources["teachers"]["qwen2"], sources["tokenizer"])
    model = load(tmp_path / "out", remote=placement != "pre")
    assert model.config.num_hidden_layers == LAYERS
    with safe_open(str(tmp_path / "out" / "model.safetensors"), "pt") as exported:
        names = list(exported.keys())
    layer_names = [n for n in names if n.startswith(("model.layers.", "student.blocks."))]
    assert layer_names and all(n.startswith(("model.layers.0.", "model.layers.1.", "student.blocks.0."))
                               for n in layer_names)
    with torch.no_grad():
        logits = model(input_ids=IDS, attention_mask=MASK).logits
    torch.testing.assert_close(logits, student_logits(student), rtol=1e-5, atol=1e-5)


def test_the_tokenizer_taken_from_the_teacher_is_read_at_the_teachers_revision(tmp_path, sources, monkeypatch):
    """tokenizer.train false: the tokenizer is the teacher's, read at teacher.revision like its config; a
    tokenizer of its own (the workflow's results/data/tokenizer) is read as it is, at no revision."""
    import transformers

    teacher = tmp_path / "teacher"  # a teacher directory holding its tokenizer, as a hub snapshot does
    shutil.copytree(sources["teachers"]["qwen3"], teacher)
    AutoTokenizer.from_pretrained(sources["tokenizer"]).save_pretrained(teacher)
    trained_phase(tmp_path / "phase", teacher, "pre", active_blocks=1)
    asked = []
    load = transformers.AutoTokenizer.from_pretrained
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *args, **kw: asked.append(kw.get("revision")) or load(*args, **kw))
    export_phase(tmp_path / "phase", tmp_path / "out", teacher, teacher, teacher_revision="0123abc")
    export_phase(tmp_path / "phase", tmp_path / "other", teacher, sources["tokenizer"], teacher_revision="0123abc")
    assert asked == ["0123abc", None]


def test_a_directory_that_is_not_a_phase_is_refused_by_name(tmp_path, sources):
    teacher, tokenizer = sources["teachers"]["qwen3"], sources["tokenizer"]
    phase = tmp_path / "phase"
    phase.mkdir()
    with pytest.raises(FileNotFoundError, match="state.json: missing"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    trained_phase(phase, teacher, "post", active_blocks=2)
    (phase / "student.safetensors").rename(tmp_path / "student.safetensors")
    with pytest.raises(FileNotFoundError, match="student.safetensors: missing"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    (tmp_path / "student.safetensors").rename(phase / "student.safetensors")
    (phase / "state.json").write_text(json.dumps({"run": "post-grow", "seed": 42, "phases": []}))  # a run index
    with pytest.raises(ValueError, match="state.json: not a phase record .* it lacks key, phase, placement"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    (phase / "state.json").write_text("{")
    with pytest.raises(ValueError, match="state.json: not JSON"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    write_record(phase, placement="post", active_blocks=4, active_layers=8)
    with pytest.raises(ValueError, match=r"state.json: active_blocks 4 .* 3 blocks of 2 layers"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    write_record(phase, placement="prenorm")
    with pytest.raises(ValueError, match="state.json: unknown placement 'prenorm'"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    write_record(phase, placement="hybridnorm")
    with pytest.raises(ValueError, match="student.safetensors: does not fit a hybridnorm student"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    write_record(phase, placement="post")
    with pytest.raises(ValueError, match="student.safetensors: does not fit a post student"):
        export_phase(phase, tmp_path / "out", sources["teachers"]["qwen2"], tokenizer)  # q/k/v biases
    (phase / "student.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{")
    with pytest.raises(ValueError, match="student.safetensors: unreadable"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)
    assert not list(tmp_path.glob("*out*"))
    (tmp_path / "out").mkdir()
    with pytest.raises(FileExistsError, match="out: exists"):
        export_phase(phase, tmp_path / "out", teacher, tokenizer)


def test_cli_export(tmp_path, sources, capsys):
    """`normgrow export` in the workflow's layout finds the built teacher and tokenizer beside the
    phase directory; a bad directory exits 1 with one line."""
    results = tmp_path / "results"
    teacher = AutoModelForCausalLM.from_pretrained(sources["teachers"]["qwen3"])
    teacher.save_pretrained(results / "teacher" / "model")
    AutoTokenizer.from_pretrained(sources["tokenizer"]).save_pretrained(results / "data" / "tokenizer")
    phase = results / "phases" / ("0" * 16)
    student = trained_phase(phase, results / "teacher" / "model", "sandwich", active_blocks=2)
    assert main(["export", str(phase), str(tmp_path / "out")]) == 0
    assert "trust_remote_code=True" in capsys.readouterr().out
    with torch.no_grad():
        logits = load(tmp_path / "out", remote=True)(input_ids=IDS, attention_mask=MASK).logits
    torch.testing.assert_close(logits, student_logits(student), rtol=1e-5, atol=1e-5)
    capsys.readouterr()  # the loading's progress bars
    assert main(["export", str(tmp_path), str(tmp_path / "other"), "--teacher", str(sources["teachers"]["qwen3"])]) == 1
    error = capsys.readouterr().err
    assert error.startswith("normgrow export: ") and "state.json: missing" in error and error.count("\n") == 1
    assert main(["export", str(tmp_path), str(tmp_path / "other")]) == 1
    assert "pass --teacher" in capsys.readouterr().err
    assert main(["export", str(phase), str(tmp_path / "out")]) == 1
    assert "out: exists; remove it or export elsewhere" in capsys.readouterr().err
