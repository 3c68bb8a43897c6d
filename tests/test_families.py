"""Any decoder-only teacher family (normgrow.model.family): the student is built from the teacher's own
sub-layers, refuses an unsupported family (or a setting it cannot keep) by name, starts its boundary
norm from the teacher's final norm or at the identity, and trains and is diagnosed through the
trainer's path, for tiny randomly initialised teachers of every supported family."""

from __future__ import annotations

import io
import json

import pytest
import torch
from conftest import REPO, SEED, tiny_config, tiny_run_config, tiny_teacher, train_alone
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

from normgrow.design.curriculum import phase_spec
from normgrow.design.execution import Execution
from normgrow.model.family import PREFIXES, family
from normgrow.model.student import BlockStackStudent
from normgrow.train.data import TokenStore, collate
from normgrow.train.diagnostics import diagnose
from normgrow.train.outputs import student_from_weights
from normgrow.train.probe import massive_activations
from normgrow.train.teacher import check_teacher, load_teacher


class FakeTokenizer:
    """A tokenizer of `size` tokens: all the teacher check asks of one is its length."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


# The student's norms under the family decoder layer's names, by the placement whose layer that is; OLMo 2's
# layer is a sandwich layer without the input norms (no placement: the test removes them).
OLMO2_NORM_NAMES = {"attn_out_layernorm": "post_attention_layernorm", "mlp_out_layernorm": "post_feedforward_layernorm"}


@pytest.mark.parametrize("model_type", list(PREFIXES))
def test_the_familys_own_placement_is_the_teachers_own_decoder(model_type):
    """A one-layer student of the family's own placement (pre-norm; sandwich for Gemma 2 and 3) given a
    one-layer teacher's weights computes the teacher's final hidden states: the family's attention
    (Gemma 2's capped logits, Gemma 3's and OLMo 2's q/k norms, Phi-3's fused projections), MLP, norm
    and rotary classes, Gemma's √H embedding scale and (1 + w) norms included. The teacher's layer is a
    global-attention layer (layer_types), as every student layer is. OLMo 2's layer is a sandwich layer
    without its input norms: the sandwich student matches it once those are removed."""
    teacher = tiny_teacher(model_type, layers=1, **({"layer_types": ["full_attention"]}
                                                   if model_type in ("gemma2", "gemma3_text") else {}))
    f = family(teacher.config)
    placement = f.own_placement or "sandwich"
    student = BlockStackStudent.from_teacher(teacher, placement, 1, 1, seed=0).eval()
    layer = student.blocks[0][0]
    assert type(layer.self_attn) is f.attention and type(layer.mlp) is f.mlp and type(student.boundary_norm) is f.norm
    names = f.own_norm_names if f.own_placement else OLMO2_NORM_NAMES
    if not f.own_placement:
        layer.attn_layernorm, layer.mlp_layernorm = torch.nn.Identity(), torch.nn.Identity()
    to_student = {theirs: ours for ours, theirs in names.items()}
    state = {next((to_student[k] + rest for k in to_student if name.startswith(k + ".") for rest in [name[len(k):]]),
                  name): value for name, value in teacher.model.layers[0].state_dict().items()}
    layer.load_state_dict(state)
    ids = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        expected = teacher.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        torch.testing.assert_close(student(ids, mask), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", list(PREFIXES))
@pytest.mark.parametrize("init", ["teacher", "identity"])
def test_the_boundary_norm_starts_from_the_teachers_final_norm_or_at_the_identity(model_type, init):
    """`student.boundary_norm_init`: `teacher` (the paper's) copies the teacher's final norm, `identity`
    sets the family's norm identity (1; 0 for Gemma's (1 + w) norms), where the boundary norm computes
    plain x̂, for pre-norm's N_final and post-norm's N_entry alike; the blocks draw the same weights."""
    teacher = tiny_teacher(model_type)
    x = torch.randn(3, 32)
    for placement in ("pre", "post"):
        student = BlockStackStudent.from_teacher(teacher, placement, 2, 1, seed=0, boundary_norm_init=init)
        with torch.no_grad():
            if init == "teacher":
                assert torch.equal(student.boundary_norm.weight, teacher.model.norm.weight)
                assert not torch.allclose(student.boundary_norm(x), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)))
            else:
                rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + student.config.rms_norm_eps)
                torch.testing.assert_close(student.boundary_norm(x), rms, rtol=1e-6, atol=1e-6)
        paper = BlockStackStudent.from_teacher(teacher, placement, 2, 1, seed=0)
        pairs = zip(student.blocks.parameters(), paper.blocks.parameters(), strict=True)
        assert all(torch.equal(a, b) for a, b in pairs)
    with pytest.raises(ValueError, match="boundary_norm_init must be one of teacher, identity, not 'ones'"):
        BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0, boundary_norm_init="ones")


@pytest.mark.parametrize("model_type", ["gemma", "llama"])
def test_fresh_norms_are_the_identity(model_type):
    student = BlockStackStudent.from_teacher(tiny_teacher(model_type), "sandwich", 2, 1, seed=0)
    x = torch.randn(3, 32)
    for name, module in student.blocks.named_modules():
        if name.endswith("layernorm"):
            rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + student.config.rms_norm_eps)
            torch.testing.assert_close(module(x), rms, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", list(PREFIXES))
def test_deepnorm_scales_the_value_output_and_mlp_projections_of_every_family(model_type):
    """DeepNorm's β on the same draw as pre-norm's: the value, output and MLP projections ×β, every other
    weight as drawn; Phi-3's value rows of the fused qkv_proj (not its q/k rows) and its whole gate_up_proj."""
    teacher = tiny_teacher(model_type)
    pre = dict(BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0).blocks.named_parameters())
    deep = BlockStackStudent.from_teacher(teacher, "deepnorm", 2, 1, seed=0)
    beta = deep.blocks[0][0].beta
    values = teacher.config.num_key_value_heads * 8  # head_dim 8
    for name, weight in deep.blocks.named_parameters():
        expected = pre[name].clone()
        if name.endswith("qkv_proj.weight"):
            expected[-values:] *= beta
        elif any(part in name for part in ("v_proj", "o_proj", "mlp.")):
            expected *= beta
        torch.testing.assert_close(weight.detach(), expected, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("init", ["teacher", "identity"])
def test_the_trainer_starts_the_boundary_norm_as_the_config_says(init):
    """The phase's student (normgrow.train.trainer.build_student) takes `student.boundary_norm_init` from
    the phase spec: a Gemma teacher's final norm, far from the identity, or the identity (0)."""
    from normgrow.train.distributed import Ranks
    from normgrow.train.trainer import build_student

    teacher = tiny_teacher("gemma")
    config = tiny_run_config()
    config["student"]["boundary_norm_init"] = init
    student, _ = build_student(phase_spec(config, "post-freeze", SEED, 0), Execution.from_config(config), teacher,
                               None, Ranks(0, 1, torch.device("cpu")))
    expected = teacher.model.norm.weight if init == "teacher" else torch.zeros(32)
    assert torch.equal(student.boundary_norm.weight.detach(), expected)


@pytest.mark.parametrize("model_type", list(PREFIXES))
def test_hybridnorm_normalises_every_heads_queries_keys_and_values(model_type):
    """HybridNorm's QKV normalisation in every family (Qwen3's own q/k norms, a per-head norm added
    elsewhere): scaling a query, key or value projection changes nothing; without the norm it would."""
    student = BlockStackStudent.from_teacher(tiny_teacher(model_type), "hybridnorm", 2, 1, seed=0).eval()
    ids = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    names = ("qkv_proj",) if model_type == "phi3" else ("q_proj", "k_proj", "v_proj")  # Phi-3's fused one
    weights = [getattr(projection, "linear", projection).weight for block in student.blocks
               for projection in (getattr(block[0].self_attn, name) for name in names)]
    with torch.no_grad():
        for weight in weights:
            weight.mul_(1000.0)  # projections far above the norms' ε, so that only the norm sets the scale
        before = student(ids, mask)
        for weight in weights:
            weight.mul_(3.0)
        torch.testing.assert_close(student(ids, mask), before, rtol=1e-4, atol=1e-4)
        block = student.blocks[0][0].self_attn
        block.o_proj.weight.mul_(3.0)  # a projection no norm follows does change the output
        assert not torch.allclose(student(ids, mask), before, atol=1e-3)


def test_unsupported_family_is_refused_by_name():
    config = AutoConfig.for_model("gpt2", n_layer=1, n_embd=32, n_head=4, vocab_size=64)
    with pytest.raises(ValueError, match="'gpt2' is not supported; supported decoder families: qwen3, qwen2, llama"):
        family(config)


def test_what_a_family_cannot_keep_is_refused_by_name():
    """Gemma 2's final logit cap (its released configs' default; the loss forms uncapped logits) and a
    bidirectional Gemma 3 (no decoder) are refused, each naming the setting."""
    with pytest.raises(ValueError, match="gemma2: final_logit_softcapping=30.0 is not supported"):
        family(tiny_config("gemma2", final_logit_softcapping=30.0))
    with pytest.raises(ValueError, match="gemma3_text: use_bidirectional_attention is set"):
        family(tiny_config("gemma3_text", use_bidirectional_attention=True))


def test_gemma2s_capped_attention_runs_eager_and_keeps_its_cap():
    """SDPA has no softcap: a Gemma 2 student asked for SDPA runs eager (as its teacher must), and its
    attention logits are capped (a different cap changes the output)."""
    teacher = tiny_teacher("gemma2")
    student = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0, attn_implementation="sdpa").eval()
    assert student.config._attn_implementation == "eager" and teacher.config._attn_implementation == "eager"
    with torch.no_grad():
        for name, param in student.blocks.named_parameters():
            if "q_proj" in name or "k_proj" in name:
                param.mul_(50.0)  # attention logits far past the cap
        ids = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))
        capped = student(ids, torch.ones_like(ids))
        for block in student.blocks:
            block[0].self_attn.attn_logit_softcapping = 1.0
        assert not torch.allclose(student(ids, torch.ones_like(ids)), capped, atol=1e-4)


@pytest.mark.parametrize("model_type", list(PREFIXES))
def test_every_workflow_step_takes_any_family(workspace, tmp_path, model_type):
    """What the workflow's jobs do with a saved teacher of the family, each through the function its
    script calls: loaded and checked (`load_teacher`, `check_teacher`), probed with eager attention
    (`massive_activations`, as probe_teacher.py loads it), phase 0 trained through `train_phases`, phase 1
    grown from phase 0's weights (a new block from the family's layers), then diagnosed from its
    checkpoint. The workflow around these steps is the same for every family (one family end to end:
    test_workflow_end_to_end_with_a_local_teacher)."""
    teacher = tiny_teacher(model_type)
    teacher.save_pretrained(tmp_path / "teacher")
    loaded = load_teacher(str(tmp_path / "teacher"), "float32")
    store = TokenStore(workspace["tokens"] / "train")
    check = check_teacher(loaded, FakeTokenizer(teacher.config.vocab_size), store, store, 0, 2, -100.0)
    assert check["model_type"] == model_type and check["vocab_matches_tokenizer"] and not check["problems"], check
    batch = collate([torch.tensor(d).numpy() for d in workspace["train"][:2]], 0)
    eager = load_teacher(str(tmp_path / "teacher"), "float32", attn_implementation="eager")
    layers = massive_activations(eager, batch, [0])
    assert [row["layer"] for row in layers] == [1, 2]
    assert all(0 < row["attention_on_structural"] <= 1 and row["max_over_median"] >= 1 for row in layers), layers
    config, teacher_dir = tiny_run_config(), str(tmp_path / "teacher")
    phases = [tmp_path / "phase0", tmp_path / "phase1"]
    for phase, out in enumerate(phases):
        spec = phase_spec(config, "post-freeze", SEED, phase)
        train_alone(spec, Execution.from_config(config), teacher_dir, workspace["tokens"], phases[0] if phase else None,
                    out, log=io.StringIO())
        state = json.loads((out / "state.json").read_text())
        assert state["final_eval"]["ce"] < 10 and state["phase_counters"]["steps"] == config["train"]["phase_steps"]
    grown, first = (load_file(out / "student.safetensors") for out in reversed(phases))
    assert all(torch.equal(grown[name], first[name]) for name in first if name.startswith("blocks.0.")), \
        "phase 1 keeps phase 0's block (frozen: the curriculum trains the newest)"
    student = student_from_weights(phases[1] / "student.safetensors", teacher.config, "post",
                                      config["student"], active_blocks=2)
    assert all(type(block[0].self_attn) is family(teacher.config).attention for block in student.blocks)
    report = diagnose(student, batch, [0])
    assert len(report["boundaries"]) == 3 and report["blocks"][1]["delta_ce"] == report["blocks"][1]["delta_ce"]


@pytest.mark.slow
def test_workflow_end_to_end_with_a_local_teacher(tmp_path):
    """The CI-sized workflow with a teacher directory, as a user brings one: weights, config and its
    own tokenizer (`tokenizer.train: false`), the boundary token looked up in that tokenizer, the
    teacher check and probe, growth and diagnostics. A Gemma teacher: the family furthest from the
    default's Qwen3 (tied embeddings, its own norm and MLP); what each job does with every family's
    teacher is test_every_workflow_step_takes_any_family. The teacher is random, so the check's margin
    is waived."""
    import subprocess

    import yaml
    from conftest import snakemake_command

    from normgrow.train.data import train_tokenizer

    texts = ["the residual stream is normalised before or after each sub-layer."] * 20
    tokenizer = train_tokenizer(texts, vocab_size=300, boundary_token="<|endoftext|>")
    config = tiny_config("gemma", vocab_size=len(tokenizer), max_position_embeddings=128, tie_word_embeddings=True)
    teacher_dir = tmp_path / "teacher"
    AutoModelForCausalLM.from_config(config).save_pretrained(teacher_dir)
    tokenizer.save_pretrained(teacher_dir)
    overrides = tmp_path / "family.yaml"
    overrides.write_text(yaml.safe_dump({
        "teacher": {"name": str(teacher_dir), "dtype": "float32", "min_margin_nats": -100.0},
        "tokenizer": {"train": False}, "build": ["pre-grow", "post-grow"],
        "diagnostics": {"runs": ["post-grow"]},
        "resources": {"train": {"group_size": 2}}}))  # pre and post on one teacher forward: 3 jobs, not 6
    workdir = tmp_path / "run"
    workdir.mkdir()
    command = snakemake_command(workdir, "--cores", "2", "--configfile", str(REPO / "configs" / "ci.yaml"),
                                str(overrides), "--", "results/paper", config=None)
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    check = json.loads((workdir / "results" / "teacher" / "check.json").read_text())
    assert check["model_type"] == "gemma" and check["vocab_matches_tokenizer"]
    assert (workdir / "results" / "paper" / "tables" / "table2.csv").exists()
    diagnostics = list((workdir / "results" / "diagnostics" / "post-grow").rglob("*.json"))
    assert diagnostics and all(json.loads(p.read_text())["checkpoints"] for p in diagnostics)


@pytest.mark.parametrize("model_type,options", [(t, {}) for t in PREFIXES]
                         + [("llama", {"attention_bias": True, "mlp_bias": True}), ("gemma", {"attention_bias": True})])
def test_the_plan_counts_every_familys_parameters(model_type, options):
    """normgrow.cluster.plan's formulas count the family's layers and the whole teacher exactly (Qwen2's q/k/v
    biases, the q/k norms of Qwen3, Gemma 3 and OLMo 2, Gemma 2 and 3's four layer norms, `attention_bias`,
    `mlp_bias`), and a pre-norm student's decoder likewise."""
    from normgrow.cluster.plan import layer_parameters, student_parameters, teacher_parameters

    config = tiny_config(model_type, **options)
    teacher = AutoModelForCausalLM.from_config(config)
    assert layer_parameters(config) == sum(p.numel() for p in teacher.model.layers[0].parameters())
    assert teacher_parameters(config) == teacher.num_parameters()
    student = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0)
    decoder = sum(p.numel() for block in student.blocks for p in block.parameters())
    assert student_parameters(config, 2, 1)["decoder"] == decoder
