"""How an appended block starts (normgrow.design.curriculum.Growth, BlockStackStudent.start_appended and
its `gate`): each operator's defining property at the append step, for every placement; the
configuration's refusals; the paper's phases keep their keys; a ramp resumes bit-identically."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from conftest import SEED, make_teacher, tiny_run_config, train_alone
from safetensors.torch import load_file

from normgrow.design.config import ConfigError, validate_config
from normgrow.design.curriculum import Growth, phase_spec, run_phases
from normgrow.model.layout import PLACEMENTS
from normgrow.model.student import ZEROED_OUTPUTS, BlockStackStudent
from normgrow.train.data import Batch

# Where the zero operator leaves the student's function unchanged: where an appended layer's output
# is its input plus its residual branches (pre-norm; sandwich, whose output norms map 0 to 0; mix-ln,
# whose appended blocks are pre-norm layers) — not where a norm follows the residual add (post-norm,
# DeepNorm, HybridNorm's MLP norm): N(h + 0) = N(h) ≠ h.
ZERO_PRESERVES = {"pre", "sandwich", "mix-ln"}


def grown(placement: str, growth: Growth, seed: int = 3) -> tuple[BlockStackStudent, Batch]:
    """A 3-block student trained as if through phase 0 (its first block moved off its initialisation)
    and a batch; the caller appends block 1."""
    student = BlockStackStudent.from_teacher(make_teacher(), placement, 3, 1, seed=seed).eval()
    with torch.no_grad():
        for param in student.blocks[0].parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=torch.Generator().manual_seed(1)))
    ids = torch.randint(1, 64, (2, 7), generator=torch.Generator().manual_seed(2))
    return student, Batch(ids, torch.ones_like(ids))


def hidden(student: BlockStackStudent, batch: Batch, active: int, gate: tuple | None = None) -> torch.Tensor:
    student.active_blocks = active
    with torch.no_grad():
        return student(batch.input_ids, batch.attention_mask, gate=gate)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_zero_preserves_the_function_exactly_where_the_block_is_its_residual(placement):
    student, batch = grown(placement, Growth("zero"))
    before = hidden(student, batch, 1)
    student.start_appended((1,), Growth("zero"))
    after = hidden(student, batch, 2)
    assert torch.equal(before, after) == (placement in ZERO_PRESERVES), placement
    zeroed = [name for name, p in student.blocks[1].named_parameters() if name.endswith(ZEROED_OUTPUTS)]
    assert len(zeroed) == 2 and all(not p.any() for n, p in student.blocks[1].named_parameters() if n in zeroed)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_the_ramp_preserves_the_function_at_c_0_and_is_the_plain_block_at_c_1(placement):
    student, batch = grown(placement, Growth("ramp", steps=4))
    before, plain = hidden(student, batch, 1), hidden(student, batch, 2)
    assert torch.allclose(hidden(student, batch, 2, gate=(1, 0.0)), before, atol=1e-6, rtol=0)
    assert torch.allclose(hidden(student, batch, 2, gate=(1, 1.0)), plain, atol=1e-6, rtol=0)
    ramp = Growth("ramp", steps=4)
    assert [ramp.gate(t) for t in range(6)] == [0.0, 0.25, 0.5, 0.75, None, None]


@pytest.mark.parametrize("operator", ["copy", "zero-from-copy"])
@pytest.mark.parametrize("appended", [(1,), (2,), (1, 2)])
def test_copy_starts_the_block_as_the_one_before_it(operator, appended):
    growth = Growth("copy") if operator == "copy" else Growth("zero", source="copy")
    student, _ = grown("post", growth)
    with torch.no_grad():  # block 1 trained too, as if through phase 1: every block differs
        for param in student.blocks[1].parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=torch.Generator().manual_seed(4)))
    source = {b: copy.deepcopy(student.blocks[b - 1].state_dict()) for b in appended if b - 1 not in appended}
    student.start_appended(appended, growth)
    for b in appended:
        want = source.get(b) or student.blocks[b - 1].state_dict()  # a block appended before it: as it now is
        for name, got in student.blocks[b].state_dict().items():
            zeroed = growth.operator == "zero" and name.endswith(ZEROED_OUTPUTS)
            expected = torch.zeros_like(want[name]) if zeroed else want[name]
            assert torch.equal(got, expected), (b, name)


@pytest.mark.parametrize("operator", ["random", "ramp"])
def test_random_and_ramp_change_no_weight(operator):
    student, _ = grown("post", Growth(operator, steps=2))
    before = copy.deepcopy(student.state_dict())
    student.start_appended((1,), Growth(operator, steps=2))
    assert all(torch.equal(before[k], v) for k, v in student.state_dict().items())


# ---------------------------------------------------------------- configuration and identity
def with_growth(config: dict, phase: int, growth: dict, curriculum: str = "grow") -> dict:
    config = copy.deepcopy(config)
    config["curricula"][curriculum][phase]["growth"] = growth
    return config


@pytest.mark.parametrize("curriculum, phase, growth, message", [
    ("grow", 0, {"operator": "copy"}, "operator copy on a phase that appends no block"),
    ("joint-long", 1, {"operator": "zero"}, "operator zero on a phase that appends no block"),
    ("grow", 1, {"operator": "ramp", "steps": 101}, "longer than the phase"),
    ("grow", 1, {"operator": "ramp", "steps": 40}, "outlasts the phase's first snapshot"),
    ("grow", 1, {"operator": "ramp"}, "needs the updates"),
    ("grow", 1, {"operator": "copy", "from": "fresh"}, "only the zero operator"),
    ("grow", 1, {"operator": "zero", "steps": 5}, "only the ramp operator has steps"),
    ("grow", 1, {"operator": "grow"}, "is not one of"),
])
def test_a_growth_operator_where_it_cannot_apply_is_refused(default, curriculum, phase, growth, message):
    with pytest.raises(ConfigError, match=message) as error:
        validate_config(with_growth(default, phase, growth, curriculum))
    assert f"curricula.{curriculum}" in str(error.value)


def test_random_keeps_the_papers_keys_and_any_other_operator_changes_them(default):
    explicit = validate_config(with_growth(default, 1, {"operator": "random"}))
    zero = validate_config(with_growth(default, 1, {"operator": "zero"}))
    keys = {name: phase_spec(c, "pre-grow", 42, 1).key for name, c in
            (("default", default), ("random", explicit), ("zero", zero))}
    assert keys["random"] == keys["default"] != keys["zero"]
    assert phase_spec(zero, "pre-grow", 42, 0).key == phase_spec(default, "pre-grow", 42, 0).key
    phases = run_phases(zero, "pre-grow")
    assert [p.appended for p in phases] == [(), (1,), (2,)] and phases[1].growth == Growth("zero")
    spec = phase_spec(zero, "pre-grow", 42, 2)
    assert type(spec).from_json(spec.to_json()) == spec


# ---------------------------------------------------------------- a ramp in training, resumed
def test_a_ramped_phase_resumes_bit_identically(workspace, monkeypatch):
    """Phase 1 of the tiny freeze run with a 2-update ramp, preempted at update 1 (inside the ramp)
    and resumed: the same weights and losses as uninterrupted — c comes from the update."""
    from normgrow.design.execution import Execution
    from normgrow.train import trainer

    config = tiny_run_config()
    config["curricula"]["freeze"][1]["growth"] = {"operator": "ramp", "steps": 2}
    execution = Execution.from_config(config)
    root, threads = workspace["root"] / "ramp", torch.get_num_threads()

    def train(phase: int, out: str, previous: str | None = None):
        return train_alone(phase_spec(config, "post-freeze", SEED, phase), execution, workspace["teacher"],
                                   workspace["tokens"], None if previous is None else root / previous, root / out,
                                   log=io.StringIO())

    try:
        train(0, "phase0")
        train(1, "whole", "phase0")
        monkeypatch.setenv("NORMGROW_FAULT", "term@1")
        with pytest.raises(trainer.Preempted):
            train(1, "resumed", "phase0")
        monkeypatch.delenv("NORMGROW_FAULT")
        train(1, "resumed", "phase0")
        plain = copy.deepcopy(config)
        del plain["curricula"]["freeze"][1]["growth"]
        train_alone(phase_spec(plain, "post-freeze", SEED, 1), execution, workspace["teacher"],
                            workspace["tokens"], root / "phase0", root / "plain", log=io.StringIO())
    finally:
        torch.set_num_threads(threads)
    whole, resumed = (load_file(root / name / "student.safetensors") for name in ("whole", "resumed"))
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    assert (root / "whole" / "train.csv").read_text() == (root / "resumed" / "train.csv").read_text()
    plain_weights = load_file(root / "plain" / "student.safetensors")
    assert not all(torch.equal(whole[k], plain_weights[k]) for k in whole), "the ramp changed nothing"


# ---------------------------------------------------------------- the operators as the trainer applies them
class Seen(Exception):
    """Raised by a hook once it has checked what it came for: the phase need not train on."""


def three_block_config(growth: dict) -> dict:
    """The tiny run with a 3-block student whose phase 1 appends blocks 1 and 2 at once with `growth`."""
    config = tiny_run_config()
    config["student"]["blocks"] = 3
    config["curricula"] = {"grow": [{"active_blocks": 1}, {"active_blocks": 3, "growth": growth}]}
    config["runs"] = {"post-grow": {"placement": "post", "curriculum": "grow"}}
    return config


def train_grown(workspace: dict, config: dict, phase: int, out, previous=None) -> None:
    from normgrow.design.execution import Execution

    threads = torch.get_num_threads()
    try:
        train_alone(phase_spec(config, "post-grow", SEED, phase), Execution.from_config(config), workspace["teacher"],
                    workspace["tokens"], previous, out, log=io.StringIO())
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def three_blocks_phase0(workspace):
    """Phase 0 of the 3-block run: block 0 trained, blocks 1 and 2 as initialised (phase 0 appends nothing,
    so the growth of phase 1 does not matter here)."""
    out = workspace["root"] / "three-blocks-phase0"
    train_grown(workspace, three_block_config({"operator": "random"}), 0, out)
    return out


def first_updates_of_phase1(workspace, phase0, monkeypatch, growth: dict, check, updates: int) -> None:
    """Phase 1 of the 3-block run with `growth`, trained through the trainer from `phase0`: `check(t,
    student, rows, gate)` sees the student and the ramp's gate as update t computes its loss, for the first
    `updates` updates; then the phase stops."""
    forward, seen = BlockStackStudent.forward, []

    def hooked(student, input_ids, attention_mask, position_ids=None, gate=None, skip_block=None):
        if torch.is_grad_enabled():  # an update, not an evaluation
            seen.append(len(seen) + 1)
            check(seen[-1], student, Batch(input_ids, attention_mask, position_ids), gate)
            if len(seen) == updates:
                raise Seen
        return forward(student, input_ids, attention_mask, position_ids, gate, skip_block)

    monkeypatch.setattr(BlockStackStudent, "forward", hooked)
    with pytest.raises(Seen):
        train_grown(workspace, three_block_config(growth), 1, workspace["root"] / f"phase1-{growth['operator']}",
                    previous=phase0)
    assert seen == list(range(1, updates + 1))


@pytest.mark.parametrize("operator", ["copy", "zero"])
def test_the_trainer_starts_the_appended_blocks_with_the_operators_weights(workspace, three_blocks_phase0,
                                                                           monkeypatch, operator):
    """The weights the first update of a grown phase trains from are those the operator gives on the previous
    phase's weights: copies of block 0 (copy), or the blocks as initialised with their output projections zeroed
    (zero) — not the blocks as initialised."""
    start = {}
    first_updates_of_phase1(workspace, three_blocks_phase0, monkeypatch, {"operator": operator},
                            lambda t, student, rows, gate: start.update(copy.deepcopy(student.state_dict())), updates=1)
    previous = load_file(three_blocks_phase0 / "student.safetensors")
    for b in (1, 2):
        block = {k.split(".", 2)[2]: v for k, v in start.items() if k.startswith(f"blocks.{b}.")}
        assert block
        for name, got in block.items():
            if operator == "copy":
                want = previous[f"blocks.0.{name}"]
            else:
                want = previous[f"blocks.{b}.{name}"]
                want = torch.zeros_like(want) if name.endswith(ZEROED_OUTPUTS) else want
            assert torch.equal(got, want), (b, name)
    assert not torch.equal(previous["blocks.0.0.mlp.down_proj.weight"], previous["blocks.1.0.mlp.down_proj.weight"])


def test_the_trainers_ramp_mixes_every_appended_block_in_at_c_of_the_update(workspace, three_blocks_phase0,
                                                                           monkeypatch):
    """A ramp over two appended blocks at update t (c = t / steps, from the first update on): the student's
    output is h + c·(stack(h) − h), h the output of the previous phase's blocks — both appended blocks
    gated, and the ramp's c of this update, so that they learn from the first update on. (Post-norm: the
    boundary norm is on the embedding, so the output is the gated stream itself.)"""
    ramp = Growth("ramp", steps=3)
    cs = []

    def check(t, student, rows, gate):
        with torch.no_grad():
            trained = student(rows.input_ids, rows.attention_mask, gate=gate)
            ends = []
            for active in (1, 3):
                student.active_blocks = active
                ends.append(student(rows.input_ids, rows.attention_mask))
            student.active_blocks = 3
        previous, stacked = ends
        c = ramp.gate(t)
        cs.append(c)
        assert torch.allclose(trained, previous + c * (stacked - previous), atol=1e-5, rtol=0), t

    first_updates_of_phase1(workspace, three_blocks_phase0, monkeypatch, {"operator": "ramp", "steps": 3}, check,
                            updates=2)
    assert cs == [1 / 3, 2 / 3]
