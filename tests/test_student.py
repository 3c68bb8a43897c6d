"""The block-stack student against docs/definitions.md §1: placement equations, parameter counts, causality,
frozen embedding, paired initialisation and trainability."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import make_teacher, student_logits

from normgrow.design.curriculum import Training
from normgrow.model.layout import LAYOUTS, PLACEMENTS, layer_kinds
from normgrow.model.student import BlockStackStudent
from normgrow.train.data import Batch, collate
from normgrow.train.diagnostics import block_states
from normgrow.train.forward import causal_lm_logits, positions_and_labels
from normgrow.train.objective import Objective
from normgrow.train.trainer import build_optimizer

PLACEMENT_NAMES = ["pre", "post", "sandwich", "deepnorm", "hybridnorm", "mix-ln", "mix-ln@2"]
TRAIN = Training(batch_size=2, lr=1e-2, min_lr=1e-4, warmup_fraction=0.0, betas=(0.9, 0.95), eps=1e-8,
                 weight_decay=0.0, grad_clip=0.5, eval_every=1, precision="float32")


# ---------------------------------------------------------------- an independent reference
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def reference_attention(attn, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, eps: float) -> torch.Tensor:
    """Causal GQA attention with q/k RMSNorm and RoPE, written out from the weights."""
    batch, length, _ = x.shape
    d = attn.head_dim
    q = attn.q_proj(x).view(batch, length, -1, d)
    k = attn.k_proj(x).view(batch, length, -1, d)
    if hasattr(attn.v_proj, "head_norm"):  # HybridNorm's value norm
        v = rms_norm(attn.v_proj.linear(x).view(batch, length, -1, d), attn.v_proj.head_norm.weight, eps)
    else:
        v = attn.v_proj(x).view(batch, length, -1, d)
    v = v.transpose(1, 2)
    q = rms_norm(q, attn.q_norm.weight, eps).transpose(1, 2)
    k = rms_norm(k, attn.k_norm.weight, eps).transpose(1, 2)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    groups = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    out = scores.softmax(-1) @ v
    return attn.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


def reference_mlp(mlp, x: torch.Tensor) -> torch.Tensor:
    return mlp.down_proj(F.silu(mlp.gate_proj(x)) * mlp.up_proj(x))


def reference_layer(placement: str, layer, h, cos, sin, eps: float, block: int, depth: int) -> torch.Tensor:
    """One layer of `placement`, its equations written out by hand (docs/placements.md)."""
    def attn(x):
        return reference_attention(layer.self_attn, x, cos, sin, eps)

    def norm(x, name):
        return rms_norm(x, getattr(layer, name).weight, eps)

    if placement.startswith("mix-ln"):  # post layers in the first B blocks (default 1), pre after
        post_blocks = int(placement.partition("@")[2] or 1)
        placement = "post" if block < post_blocks else "pre"
    if placement == "pre":
        h = h + attn(norm(h, "attn_layernorm"))
        return h + reference_mlp(layer.mlp, norm(h, "mlp_layernorm"))
    if placement == "post":
        h = norm(h + attn(h), "attn_layernorm")
        return norm(h + reference_mlp(layer.mlp, h), "mlp_layernorm")
    if placement == "sandwich":
        h = h + norm(attn(norm(h, "attn_layernorm")), "attn_out_layernorm")
        return h + norm(reference_mlp(layer.mlp, norm(h, "mlp_layernorm")), "mlp_out_layernorm")
    if placement == "deepnorm":
        alpha = (2 * depth) ** 0.25
        h = norm(alpha * h + attn(h), "attn_layernorm")
        return norm(alpha * h + reference_mlp(layer.mlp, h), "mlp_layernorm")
    assert placement == "hybridnorm"
    h = norm(h + attn(h), "mlp_layernorm")
    return h + reference_mlp(layer.mlp, h)


ENTRY = {"post", "deepnorm"}  # placements whose boundary norm follows the embedding; the rest: final


def reference_forward(student: BlockStackStudent, input_ids: torch.Tensor, active: int,
                      skip: int | None = None) -> torch.Tensor:
    """docs/definitions.md §1's equations (and the other placements') for an unpadded batch."""
    eps = student.config.rms_norm_eps
    position_ids = torch.arange(input_ids.shape[1]).unsqueeze(0)
    h = student.embed_tokens.weight[input_ids]
    cos, sin = student.rotary_emb(h, position_ids)
    depth = student.num_blocks * student.layers_per_block
    if student.placement in ENTRY:
        h = rms_norm(h, student.boundary_norm.weight, eps)  # N_entry
    for b in range(active):
        if b == skip:
            continue
        for layer in student.blocks[b]:
            h = reference_layer(student.placement, layer, h, cos, sin, eps, b, depth)
    if student.placement not in ENTRY:
        h = rms_norm(h, student.boundary_norm.weight, eps)  # N_final
    return h


def perturb_(student: BlockStackStudent, seed: int = 1) -> None:
    """Give every norm a non-trivial weight, so a swapped or missing norm shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in student.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(0.5 + torch.rand(param.shape, generator=generator))


def count_parameters(module: torch.nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def make_student(teacher, placement: str, blocks: int = 2, layers: int = 1, seed: int = 0):
    return BlockStackStudent.from_teacher(teacher, placement, blocks, layers, seed=seed).eval()


def random_ids(batch: int, length: int, seed: int = 0, vocab: int = 64) -> torch.Tensor:
    return torch.randint(1, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- equations
@pytest.mark.parametrize("placement", PLACEMENT_NAMES)
@pytest.mark.parametrize("active", [1, 2])
def test_forward_matches_reference_equations(teacher, placement, active):
    student = make_student(teacher, placement)
    perturb_(student)
    student.active_blocks = active
    ids = random_ids(2, 9)
    with torch.no_grad():
        got = student(ids, torch.ones_like(ids))
        want = reference_forward(student, ids, active)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("placement", [p for p in PLACEMENT_NAMES if p != "hybridnorm"])  # it has no N_a
def test_forward_is_not_the_other_placement(teacher, placement):
    """The reference check above is not vacuous: two placements give different outputs."""
    student = make_student(teacher, placement)
    perturb_(student)
    other = "post" if placement == "pre" else "pre"
    ids = random_ids(2, 9)
    with torch.no_grad():
        got = student(ids, torch.ones_like(ids))
        student.placement = other
        wrong = reference_forward(student, ids, 2)
    assert not torch.allclose(got, wrong, atol=1e-3)


def test_hybridnorm_value_norm_is_applied(teacher):
    student = make_student(teacher, "hybridnorm")
    perturb_(student)
    ids = random_ids(2, 9)
    with torch.no_grad():
        got = student(ids, torch.ones_like(ids))
        for block in student.blocks:
            block[0].self_attn.v_proj.head_norm.weight.fill_(1.0)
        assert not torch.allclose(got, student(ids, torch.ones_like(ids)), atol=1e-3)


def test_placements_are_paired_initialised(teacher):
    """One seed, identical weights wherever the parameters coincide (DeepNorm's prescribed ×β on the
    value, output and MLP projections), norms 1, and DeepNorm's α, β for N = K·L layers."""
    pre = dict(make_student(teacher, "pre", 3, 2).named_parameters())
    for placement in PLACEMENT_NAMES[1:]:
        student = make_student(teacher, placement, 3, 2)
        shared = 0
        for name, param in student.named_parameters():
            base = name.replace("v_proj.linear.", "v_proj.")
            if name.endswith("norm.weight"):
                assert torch.equal(param, torch.ones_like(param)) or name == "boundary_norm.weight", name
            elif base in pre:
                scale = 1.0
                if placement == "deepnorm" and any(k in name for k in ("v_proj", "o_proj", "mlp.")):
                    scale = (8 * 6) ** -0.25
                torch.testing.assert_close(param, pre[base] * scale, rtol=0, atol=0, msg=name)
                shared += 1
        assert shared == len([n for n in pre if not n.endswith("norm.weight")]), placement
    deep = make_student(teacher, "deepnorm", 3, 2).blocks[0][0]
    assert deep.alpha == 12 ** 0.25 and deep.beta == 48 ** -0.25


@pytest.mark.parametrize("placement", PLACEMENT_NAMES)
def test_two_layers_per_block_and_skip_block(teacher, placement):
    student = make_student(teacher, placement, blocks=3, layers=2)
    perturb_(student)
    ids = random_ids(2, 7, seed=3)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        torch.testing.assert_close(student(ids, mask), reference_forward(student, ids, 3),
                                   rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(student(ids, mask, skip_block=1),
                                   reference_forward(student, ids, 3, skip=1), rtol=1e-5, atol=1e-5)
        student.active_blocks = 2
        hidden, states = student(ids, mask), block_states(student, Batch(ids, mask))
    assert len(states) == 3  # entering block 0, leaving blocks 0 and 1
    torch.testing.assert_close(hidden, reference_forward(student, ids, 2), rtol=1e-5, atol=1e-5)
    for b in (1, 2):  # the stream leaving block b-1 is the b-block student's output before N_final
        out = states[b] if placement in ENTRY else rms_norm(states[b], student.boundary_norm.weight,
                                                             student.config.rms_norm_eps)
        torch.testing.assert_close(out, reference_forward(student, ids, b), rtol=1e-5, atol=1e-5)


def test_each_layer_holds_its_norms_in_the_order_of_the_five_classes_it_replaces():
    """DecoderLayer registers the family's sub-layers, then the sub-layer input and sum norms, then the
    output norms: the parameter order of the five classes it replaced (so that the gradient norm sums over
    the parameters in the same order and earlier runs stay bit-identical), each norm at the config's eps."""
    from transformers import Qwen3Config

    from normgrow.model.student import DecoderLayer

    config = Qwen3Config(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, num_hidden_layers=2, vocab_size=32, rms_norm_eps=1e-5)
    config._attn_implementation = "sdpa"
    norms = {kind: [name for name, _ in DecoderLayer(config, 0, 2, kind).named_children() if name.endswith("norm")]
             for kind in LAYOUTS}
    assert norms == {"pre": ["attn_layernorm", "mlp_layernorm"], "post": ["attn_layernorm", "mlp_layernorm"],
                     "sandwich": ["attn_layernorm", "mlp_layernorm", "attn_out_layernorm", "mlp_out_layernorm"],
                     "deepnorm": ["attn_layernorm", "mlp_layernorm"], "hybridnorm": ["mlp_layernorm"]}
    layer = DecoderLayer(config, 0, 2, "sandwich")
    assert [name for name, _ in layer.named_children()][:2] == ["self_attn", "mlp"]
    assert {getattr(layer, name).variance_epsilon for name in norms["sandwich"]} == {1e-5}
    assert DecoderLayer(config, 0, 2, "hybridnorm").self_attn.v_proj.head_norm.variance_epsilon == 1e-5


def test_the_stack_runs_its_active_blocks_given_at_construction_and_refuses_bad_sizes(teacher):
    """`active_blocks` is constructor state: the forward runs that many blocks; sizes out of range and a
    config that does not fit are refused by name."""
    ids = random_ids(2, 7, seed=4)
    one = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0, active_blocks=1).eval()
    full = make_student(teacher, "pre")
    assert one.active_blocks == 1 and full.active_blocks == 2
    with torch.no_grad():
        torch.testing.assert_close(one(ids, torch.ones_like(ids)), reference_forward(full, ids, 1))
    config = full.config
    with pytest.raises(ValueError, match=r"built_blocks must be in 1\.\.2, not 3"):
        BlockStackStudent(config, "pre", 2, 1, built_blocks=3)
    with pytest.raises(ValueError, match=r"active_blocks must be in 1\.\.2, not 0"):
        BlockStackStudent(config, "pre", 2, 1, active_blocks=0)
    with pytest.raises(ValueError, match="num_hidden_layers must equal the built blocks"):
        BlockStackStudent(config, "pre", 2, 2)
    unset = copy.deepcopy(config)
    unset._attn_implementation = None
    with pytest.raises(ValueError, match="set config._attn_implementation explicitly"):
        BlockStackStudent(unset, "pre", 2, 1)


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_activation_checkpointing_recomputes_the_same_loss_and_gradients(teacher, placement):
    """With `activation_checkpointing` the training forward recomputes each layer in backward: the loss
    and every gradient are those of the plain forward, on a padded batch."""
    ids = random_ids(2, 7, seed=5)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    results = []
    for checkpointing in (False, True):
        student = make_student(teacher, placement).train()
        student.activation_checkpointing = checkpointing
        loss = student(ids, mask).pow(2).mean()
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in student.named_parameters() if p.grad is not None}))
    (plain, plain_grads), (recomputed, recomputed_grads) = results
    assert torch.equal(plain, recomputed) and plain_grads.keys() == recomputed_grads.keys() and plain_grads
    for name, grad in plain_grads.items():
        torch.testing.assert_close(recomputed_grads[name], grad, rtol=0, atol=0, msg=name)


def test_layer_kinds_and_boundary(teacher):
    assert set(PLACEMENTS) == {"pre", "post", "sandwich", "deepnorm", "hybridnorm", "mix-ln"}
    assert layer_kinds("pre", 2) == ["pre"] * 2 and layer_kinds("post", 1) == ["post"]
    assert layer_kinds("mix-ln", 3) == ["post", "pre", "pre"]
    assert layer_kinds("mix-ln@2", 3) == ["post", "post", "pre"]
    student = make_student(teacher, "mix-ln@2", blocks=3)
    assert [block[0].layout for block in student.blocks] == [LAYOUTS["post"], LAYOUTS["post"], LAYOUTS["pre"]]
    for placement in PLACEMENT_NAMES:
        expected = "entry" if placement in ENTRY else "final"
        assert make_student(teacher, placement).boundary == expected, placement


def test_unknown_placement_raises(teacher):
    with pytest.raises(ValueError, match="registered placements") as info:
        BlockStackStudent.from_teacher(teacher, "peri-norm", 2, 1, seed=0)
    assert "peri-norm" in str(info.value)
    for name in PLACEMENTS:
        assert name in str(info.value)


# ---------------------------------------------------------------- parameter counts
def test_pre_and_post_have_identical_parameter_counts(teacher):
    pre, post = make_student(teacher, "pre", 3, 2), make_student(teacher, "post", 3, 2)
    assert count_parameters(pre) == count_parameters(post)
    config = pre.config
    h, v, i = config.hidden_size, config.vocab_size, config.intermediate_size
    d, nh, nkv = config.head_dim, config.num_attention_heads, config.num_key_value_heads
    per_layer = h * nh * d + 2 * h * nkv * d + nh * d * h + 2 * d + 3 * h * i + 2 * h
    assert count_parameters(pre) == 2 * v * h + h + 6 * per_layer
    # exactly one boundary norm and two norms per layer
    norms = [n for n, _ in pre.named_parameters() if n.endswith("layernorm.weight")]
    assert len(norms) == 2 * 6
    for blocks in ([0, 1, 2], [2], [1]):
        pre.set_trainable(blocks)
        post.set_trainable(blocks)
        assert count_parameters(pre, trainable_only=True) == count_parameters(post, trainable_only=True)
    # the trainable count: one block + boundary norm + head (embedding frozen)
    assert count_parameters(pre, trainable_only=True) == 2 * per_layer + h + v * h


# ---------------------------------------------------------------- causality and padding
@pytest.mark.parametrize("placement", PLACEMENT_NAMES)
def test_causal(teacher, placement):
    student = make_student(teacher, placement)
    ids = random_ids(2, 10)
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 7) % 63 + 1
    mask = torch.ones_like(ids)
    with torch.no_grad():
        a, b = student(ids, mask), student(changed, mask)
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-6)
    assert not torch.allclose(a[:, 6:], b[:, 6:], atol=1e-4)


@pytest.mark.parametrize("placement", PLACEMENT_NAMES)
def test_right_padding_is_invisible_to_real_positions(teacher, placement):
    student = make_student(teacher, placement)
    rng = np.random.default_rng(0)
    docs = [rng.integers(1, 64, size=n) for n in (10, 4, 7)]
    batch = collate(docs, pad_id=0)
    other = collate(docs, pad_id=5)
    real = batch.attention_mask.bool()
    with torch.no_grad():
        a = student(batch.input_ids, batch.attention_mask)
        b = student(other.input_ids, other.attention_mask)
        torch.testing.assert_close(a[real], b[real], rtol=0, atol=1e-6)
        for row, doc in enumerate(docs):
            ids = torch.from_numpy(doc).long().unsqueeze(0)
            alone = student(ids, torch.ones_like(ids))[0]
            torch.testing.assert_close(a[row, : len(doc)], alone, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- training path
@pytest.mark.parametrize("placement", PLACEMENT_NAMES)
def test_frozen_embedding_trained_head_and_teacher_copies(teacher, placement):
    student = BlockStackStudent.from_teacher(teacher, placement, 2, 1, seed=0)
    assert torch.equal(student.embed_tokens.weight, teacher.get_input_embeddings().weight)
    assert torch.equal(student.lm_head.weight, teacher.get_output_embeddings().weight)
    assert torch.equal(student.boundary_norm.weight, teacher.model.norm.weight)
    assert not torch.equal(teacher.model.norm.weight, torch.ones_like(teacher.model.norm.weight))

    student.set_trainable([0, 1])
    student.train()
    optimizer = build_optimizer(student, TRAIN)
    embedding = student.embed_tokens.weight.detach().clone()
    head = student.lm_head.weight.detach().clone()
    norm = student.boundary_norm.weight.detach().clone()
    rng = np.random.default_rng(1)
    batch = collate([rng.integers(1, 64, size=n) for n in (8, 5, 3)], pad_id=0)
    positions, labels = positions_and_labels(batch)
    with torch.no_grad():
        teacher_logits = causal_lm_logits(teacher, batch, positions)
    loss = Objective()(student_logits(student, batch, positions), teacher_logits, labels)["total"]
    loss.backward()
    assert student.embed_tokens.weight.grad is None
    assert student.lm_head.weight.grad is not None and student.lm_head.weight.grad.abs().sum() > 0
    optimizer.step()
    assert torch.equal(student.embed_tokens.weight, embedding)
    assert not torch.equal(student.lm_head.weight, head)
    assert not torch.equal(student.boundary_norm.weight, norm)


# ---------------------------------------------------------------- paired initialisation
def test_paired_initialisation(teacher):
    pre = make_student(teacher, "pre", 3, 2, seed=7)
    post = make_student(teacher, "post", 3, 2, seed=7)
    pre_state, post_state = pre.state_dict(), post.state_dict()
    assert pre_state.keys() == post_state.keys()
    for key in pre_state:
        assert torch.equal(pre_state[key], post_state[key]), key
    other = make_student(teacher, "pre", 3, 2, seed=8).blocks.state_dict()
    block_state = pre.blocks.state_dict()
    differs = [k for k in block_state if not torch.equal(block_state[k], other[k])]
    assert differs and all("norm" not in k for k in differs)
    assert {k for k in block_state if "proj" in k} <= set(differs)
    # every block is its own draw (not a copy of block 0)
    assert not torch.equal(block_state["0.0.mlp.up_proj.weight"], block_state["1.0.mlp.up_proj.weight"])


def test_initialisation_scheme(teacher):
    student = make_student(teacher, "pre", 3, 2, seed=0)
    std = student.config.initializer_range
    weights = []
    for name, param in student.blocks.named_parameters():
        if name.endswith("norm.weight"):
            assert torch.equal(param, torch.ones_like(param)), name
        else:
            weights.append(param.detach().flatten())
    values = torch.cat(weights)
    assert abs(float(values.mean())) < 0.05 * std
    assert abs(float(values.std()) - std) < 0.05 * std


def test_construction_does_not_depend_on_curriculum(teacher):
    """The joint run's phase-0 start equals the grow run's: active blocks and trainability only
    select, they never change weights."""
    joint = make_student(teacher, "post", 3, 1, seed=3)
    grow = make_student(teacher, "post", 3, 1, seed=3)
    joint.active_blocks = 3
    joint.set_trainable([0, 1, 2])
    grow.active_blocks = 1
    grow.set_trainable([0])
    a, b = joint.state_dict(), grow.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the same teacher at another seed gives the same non-block weights
    again = make_student(make_teacher(), "post", 3, 1, seed=4)
    for key in ("embed_tokens.weight", "lm_head.weight", "boundary_norm.weight"):
        assert torch.equal(a[key], again.state_dict()[key])


def test_set_trainable(teacher):
    student = make_student(teacher, "pre", 3, 1)
    student.set_trainable([1])
    for b, block in enumerate(student.blocks):
        flags = {p.requires_grad for p in block.parameters()}
        assert flags == {b == 1}, b
    assert student.boundary_norm.weight.requires_grad
    assert student.lm_head.weight.requires_grad
    assert not student.embed_tokens.weight.requires_grad
    student.set_trainable([0, 1, 2])
    assert all(p.requires_grad for p in student.blocks.parameters())
    assert not student.embed_tokens.weight.requires_grad
