"""The optimizer and a small end-to-end of the phase trainer (docs/definitions.md §3)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import BATCH, LAYERS_PER_BLOCK, SEED, STEPS, tiny_run_config, train_alone
from safetensors.torch import load_file

from normgrow.design.curriculum import Training, phase_spec
from normgrow.design.execution import Execution
from normgrow.design.phase_record import PhaseRecord
from normgrow.design.schedule import lr_at
from normgrow.model.student import BlockStackStudent
from normgrow.train.data import collate, epoch_permutation
from normgrow.train.objective import Objective, loss_positions, next_token_labels
from normgrow.train.trainer import build_optimizer

TRAIN = Training.from_config(tiny_run_config()["train"])


def test_build_optimizer(teacher):
    student = BlockStackStudent.from_teacher(teacher, "post", 3, 1, seed=0)
    student.set_trainable([1])
    optimizer = build_optimizer(student, TRAIN)
    assert isinstance(optimizer, torch.optim.AdamW)
    assert len(optimizer.param_groups) == 1
    group = optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.95)
    assert group["eps"] == 1e-8
    assert group["weight_decay"] == 0.0
    assert group["lr"] == 1e-2
    assert len(optimizer.state) == 0
    wanted = {id(p) for p in student.parameters() if p.requires_grad}
    got = [id(p) for p in group["params"]]
    assert len(got) == len(set(got)) and set(got) == wanted
    assert id(student.embed_tokens.weight) not in got
    assert id(student.lm_head.weight) in got and id(student.boundary_norm.weight) in got
    assert all(id(p) not in got for p in student.blocks[0].parameters())


# ---------------------------------------------------------------- end to end
def run_all(workspace: dict, name: str, config: dict | None = None, run: str = "post-freeze") -> list[Path]:
    config = config or tiny_run_config()
    outs, previous = [], None
    threads = torch.get_num_threads()
    try:
        for phase in range(len(config["curricula"][config["runs"][run]["curriculum"]])):
            spec = phase_spec(config, run, SEED, phase)
            out = workspace["root"] / name / f"phase{phase}"
            train_alone(spec, Execution.from_config(config), workspace["teacher"], workspace["tokens"], previous, out,
                        log=io.StringIO())
            outs.append(out)
            previous = out
    finally:
        torch.set_num_threads(threads)
    return outs


@pytest.fixture(scope="module")
def freeze_run(workspace) -> list[Path]:
    return run_all(workspace, "first")


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_spec_shape():
    spec = phase_spec(tiny_run_config(), "post-freeze", SEED, 1)
    assert spec.shard_docs == STEPS * BATCH
    assert [p.active_blocks for p in spec.phases] == [1, 2]
    assert all(p.schedule_offset == 0 and p.schedule_length == STEPS for p in spec.phases)


def test_an_update_clips_the_global_gradient_norm_before_its_step(workspace, freeze_run):
    """train.grad_clip scales the gradient before AdamW's step, and train.csv keeps the norm before clipping:
    with a clip of 1e-12 the first update's recorded norm is the unclipped run's (same weights, same batch),
    while the weights barely move (AdamW's eps, 1e-8, dwarfs a gradient of norm 1e-12)."""
    config = tiny_run_config()
    config["train"]["grad_clip"] = 1e-12
    out = workspace["root"] / "clipped"
    threads = torch.get_num_threads()
    try:
        train_alone(phase_spec(config, "post-freeze", SEED, 0), Execution.from_config(config), workspace["teacher"],
                    workspace["tokens"], None, out, log=io.StringIO())
    finally:
        torch.set_num_threads(threads)
    clipped, unclipped = read_csv(out / "train.csv")[0], read_csv(freeze_run[0] / "train.csv")[0]
    assert float(clipped["grad_norm"]) == float(unclipped["grad_norm"]) > 1e-3
    init = BlockStackStudent.from_teacher(workspace["teacher_model"], "post", 2, LAYERS_PER_BLOCK, seed=SEED)
    key = "lm_head.weight"
    moved = {name: float((load_file(str(path / "student.safetensors"))[key] - init.state_dict()[key]).abs().max())
             for name, path in (("clipped", out), ("unclipped", freeze_run[0]))}
    assert moved["clipped"] < 1e-2 * moved["unclipped"], moved


def test_freeze_checkpoints(workspace, freeze_run):
    teacher = workspace["teacher_model"]
    init = BlockStackStudent.from_teacher(teacher, "post", 2, LAYERS_PER_BLOCK, seed=SEED).state_dict()
    phase0 = load_file(str(freeze_run[0] / "student.safetensors"))
    phase1 = load_file(str(freeze_run[1] / "student.safetensors"))
    assert phase0.keys() == init.keys() == phase1.keys()

    def block(state, b):
        return {k: v for k, v in state.items() if k.startswith(f"blocks.{b}.")}

    def same(a, b):
        return all(torch.equal(a[k], b[k]) for k in a)

    # phase 0 trains block 0 only; block 1 keeps its seed init
    assert not same(block(phase0, 0), block(init, 0))
    assert same(block(phase0, 1), block(init, 1))
    # phase 1 (freeze) trains block 1 only; block 0 is exactly phase 0's
    assert same(block(phase1, 0), block(phase0, 0))
    assert not same(block(phase1, 1), block(init, 1))
    # every projection of the trained block moved
    for key, value in block(phase1, 1).items():
        if "proj" in key:
            assert not torch.equal(value, init[key]), key
    # head and boundary norm train in both phases; the embedding never changes
    for key in ("lm_head.weight", "boundary_norm.weight"):
        assert not torch.equal(phase0[key], init[key]), key
        assert not torch.equal(phase1[key], phase0[key]), key
    emb = teacher.get_input_embeddings().weight
    assert torch.equal(phase0["embed_tokens.weight"], emb)
    assert torch.equal(phase1["embed_tokens.weight"], emb)


def test_token_counters(workspace, freeze_run):
    train = workspace["train"]
    shard = STEPS * BATCH
    shard_tokens = sum(len(doc) for doc in train[:shard])
    # phase 0 reads the shard once in the seed's first-epoch order, BATCH documents per update
    order = epoch_permutation(shard, SEED, 0)
    batches = [[train[j] for j in order[i:i + BATCH]] for i in range(0, shard, BATCH)]
    tokens0 = sum(len(d) for b in batches for d in b)
    states = [PhaseRecord.read(out / "state.json") for out in freeze_run]
    assert all(list(json.loads((out / "state.json").read_text())) == list(record.to_json())
               for out, record in zip(freeze_run, states, strict=True))  # the file is the record, in its order
    c0, c1 = states[0].phase_counters, states[1].phase_counters
    assert c0["steps"] == c1["steps"] == STEPS
    assert c0["tokens"] == tokens0 == shard_tokens
    assert c0["unique_tokens"] == shard_tokens
    assert c0["active_layer_tokens"] == tokens0 * 1 * LAYERS_PER_BLOCK
    # phase 1 continues into the shard's second epoch (a permutation): the same documents again
    assert c1["tokens"] == shard_tokens
    assert c1["unique_tokens"] == 0
    assert c1["active_layer_tokens"] == shard_tokens * 2 * LAYERS_PER_BLOCK
    # training rows record the batch tokens, non-padding only
    rows0 = read_csv(freeze_run[0] / "train.csv")
    assert [int(r["tokens"]) for r in rows0] == [sum(len(d) for d in b) for b in batches]
    rows1 = read_csv(freeze_run[1] / "train.csv")
    assert sum(int(r["tokens"]) for r in rows1) == shard_tokens
    # run counters accumulate
    run = states[1].run_counters
    assert run["tokens"] == 2 * shard_tokens
    assert run["unique_tokens"] == shard_tokens
    assert run["active_layer_tokens"] == shard_tokens * (1 + 2) * LAYERS_PER_BLOCK
    assert run["steps"] == 2 * STEPS
    assert states[1].global_step == 2 * STEPS and states[1].position.global_step == 2 * STEPS
    assert states[1].trainable_blocks == [1]
    assert [int(r["global_step"]) for r in rows1] == [STEPS + t for t in range(1, STEPS + 1)]


def test_eval_rows_and_lr(freeze_run):
    for out in freeze_run:
        rows = read_csv(out / "eval.csv")
        assert [int(r["step"]) for r in rows] == [2, 3]
        for r in rows:
            assert float(r["ppl"]) == pytest.approx(np.exp(float(r["ce"])), rel=1e-6)
        state = json.loads((out / "state.json").read_text())
        assert state["final_eval"]["step"] == STEPS
        lrs = [float(r["lr"]) for r in read_csv(out / "train.csv")]
        # restarted schedule each phase: peak at the (one-step) warm-up, min at the end
        assert lrs[0] == pytest.approx(1e-2) and lrs[-1] == pytest.approx(1e-4)


def test_each_phase_records_the_code_that_trained_it(freeze_run):
    """state.json names the science code digest and the torch and transformers versions
    (normgrow.design.science_code): a phase reused after a code change can be told from a retrained one."""
    from normgrow.design.science_code import record

    for out in freeze_run:
        assert json.loads((out / "state.json").read_text())["code"] == [record()]
    assert set(record()) == {"digest", "torch", "transformers"} and torch.__version__ == record()["torch"]


def test_a_phase_finished_by_an_earlier_job_keeps_the_code_that_trained_it(workspace, monkeypatch):
    """A phase preempted at its last update keeps its final resume state; the job that writes its outputs
    later, under other code, trains nothing: state.json names the code that trained it, not the code
    that only wrote it out."""
    from normgrow.design import science_code
    from normgrow.train.trainer import Preempted

    config = tiny_run_config()
    spec = phase_spec(config, "post-freeze", SEED, 0)
    out, threads = workspace["root"] / "finished-earlier" / "phase0", torch.get_num_threads()
    trained_by = science_code.record()
    try:
        monkeypatch.setenv("NORMGROW_FAULT", f"term@{STEPS}")
        with pytest.raises(Preempted):
            train_alone(spec, Execution.from_config(config), workspace["teacher"], workspace["tokens"], None, out,
                        log=io.StringIO())
        monkeypatch.delenv("NORMGROW_FAULT")
        monkeypatch.setattr(science_code, "record", lambda: {**trained_by, "digest": "0" * 16})
        log = io.StringIO()
        train_alone(spec, Execution.from_config(config), workspace["teacher"], workspace["tokens"], None, out, log=log)
    finally:
        torch.set_num_threads(threads)
    assert f"resumed from the state at update {STEPS}" in log.getvalue()
    assert json.loads((out / "state.json").read_text())["code"] == [trained_by]


def test_deterministic_on_cpu(workspace, freeze_run):
    again = run_all(workspace, "second")
    for a, b in zip(freeze_run, again, strict=True):
        assert (a / "eval.csv").read_text() == (b / "eval.csv").read_text()
        rows_a, rows_b = read_csv(a / "train.csv"), read_csv(b / "train.csv")
        assert [r["loss"] for r in rows_a] == [r["loss"] for r in rows_b]


def test_first_logged_loss_is_the_objective_of_the_first_batch(workspace, freeze_run):
    """The objective evaluated independently (full logits, the unfused path) on the first batch with
    the initial student equals the first logged loss, CE and KD: means over the loss positions."""
    config = tiny_run_config()
    teacher = workspace["teacher_model"]
    student = BlockStackStudent.from_teacher(teacher, "post", 2, LAYERS_PER_BLOCK, seed=SEED)
    student.active_blocks = 1
    first = epoch_permutation(STEPS * BATCH, SEED, 0)[:BATCH]  # phase 0's first batch, in the seed's order
    batch = collate([np.array(workspace["train"][i]) for i in first], pad_id=0)
    positions = loss_positions(batch.attention_mask)
    with torch.no_grad():
        teacher_logits = teacher(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[positions]
        logits = student.lm_head(student(batch.input_ids, batch.attention_mask)[positions])
        terms = Objective(**config["objective"])(logits, teacher_logits,
                                                 next_token_labels(batch.input_ids, positions))
    first = read_csv(freeze_run[0] / "train.csv")[0]
    for name, column in (("total", "loss"), ("ce", "ce"), ("kd", "kd")):
        assert float(first[column]) == pytest.approx(float(terms[name]), rel=1e-5), name


def test_lr_restart_false_continues_the_schedule_across_phases(workspace):
    config = tiny_run_config()
    config["curricula"] = {"two": [{"active_blocks": 1}, {"active_blocks": 2, "lr_restart": False}]}
    config["runs"] = {"post-two": {"placement": "post", "curriculum": "two"}}
    outs = run_all(workspace, "no-restart", config, run="post-two")
    logged = [float(r["lr"]) for out in outs for r in read_csv(out / "train.csv")]
    train = config["train"]
    want = [lr_at(t, 2 * STEPS, train["lr"], train["min_lr"], train["warmup_fraction"])
            for t in range(1, 2 * STEPS + 1)]
    assert logged == pytest.approx(want, rel=1e-12)
    assert logged[STEPS] < logged[STEPS - 1]  # no restart to the peak at the second phase


# ---------------------------------------------------------------- a phase alone (a group of one)
class Seen(Exception):
    """Raised by a hook once it has checked what it came for: the phase need not train on."""


def test_a_phase_alone_stops_with_its_own_error_on_a_non_finite_loss(workspace, monkeypatch):
    """Alone, a phase whose loss turns NaN stops at once with its own FloatingPointError (not a group's
    GroupFailed, whose text promises siblings that finished) and writes no outputs."""
    from normgrow.train.trainer import GroupFailed

    monkeypatch.setenv("NORMGROW_FAULT", "nan@1")
    with pytest.raises(FloatingPointError, match="non-finite loss") as error:
        run_all(workspace, "nan-alone")
    assert not isinstance(error.value, GroupFailed)
    assert not (workspace["root"] / "nan-alone" / "phase0" / "state.json").exists()


def test_a_phase_alone_frees_the_teachers_hidden_states_before_backward(workspace, monkeypatch):
    """A phase alone runs the teacher inside its student's step: the teacher's hidden states are gone once the
    student's forward has used them, before its backward; a group shares one teacher forward, held through
    every student's backward. The trainer, the memory trace and the plan ask one rule (normgrow.design.execution)."""
    import gc
    import weakref

    from normgrow.design.execution import shares_teacher_forward
    from normgrow.train import trainer
    from normgrow.train.objective import FusedDistillationLoss

    assert not shares_teacher_forward(1) and shares_teacher_forward(2)
    made, checked = [], []
    hidden_states = trainer.teacher_hidden_states

    def recorded(*args, **kwargs):
        out = hidden_states(*args, **kwargs)
        made.append(weakref.ref(out))
        return out

    def check_at_backward(ctx, *grads):  # the student's forward and loss have run; its backward begins
        gc.collect()
        checked.append([ref() is None for ref in made])
        raise Seen

    monkeypatch.setattr(trainer, "teacher_hidden_states", recorded)
    monkeypatch.setattr(FusedDistillationLoss, "backward", staticmethod(check_at_backward))
    with pytest.raises(Seen):
        run_all(workspace, "alone-teacher")
    assert checked == [[True]]


def test_a_later_phase_resumed_keeps_its_earlier_steps_in_tensorboard(workspace, freeze_run, monkeypatch):
    """Phase 1 (global steps STEPS + 1 on) preempted after update 2 and resumed: its tracker starts at the
    global step after the previous phase's and this job's updates, so TensorBoard purges only the steps the
    resumed job logs again and holds every step of the phase once."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from normgrow.train.trainer import Preempted

    config = tiny_run_config()
    tracking = workspace["root"] / "tracking-later"
    config["tracking"] = {"log_with": ["tensorboard"], "dir": str(tracking), "project": "normgrow", "init_kwargs": {}}
    spec = phase_spec(config, "post-freeze", SEED, 1)
    execution = Execution.from_config(config, tracked_as="post-freeze/seed5/phase1")
    out, threads = workspace["root"] / "tracked-later" / "phase1", torch.get_num_threads()
    try:
        monkeypatch.setenv("NORMGROW_FAULT", "term@2")
        with pytest.raises(Preempted):
            train_alone(spec, execution, workspace["teacher"], workspace["tokens"], freeze_run[0], out,
                        log=io.StringIO())
        monkeypatch.delenv("NORMGROW_FAULT")
        log = io.StringIO()
        train_alone(spec, execution, workspace["teacher"], workspace["tokens"], freeze_run[0], out, log=log)
    finally:
        torch.set_num_threads(threads)
    assert "resumed from the state at update 2" in log.getvalue()
    events = EventAccumulator(str(tracking / "normgrow" / "post-freeze" / "seed5" / "phase1"),
                              size_guidance={"scalars": 0})
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [STEPS + t for t in range(1, STEPS + 1)]
    assert [e.step for e in events.Scalars("eval/ce")] == [STEPS + 2, STEPS + 3]


class TeacherAskedFor(Exception):
    """Raised by the stand-in for load_teacher: the job stops once it has asked for its teacher."""


@pytest.mark.parametrize("through", ["this process", "the job file"])
def test_a_job_loads_its_hub_teacher_at_its_revision(tmp_path, monkeypatch, through):
    """The job's teacher_revision (the config's teacher.revision) reaches load_teacher: in this process, and
    through the job file every rank of a torchrun launch reads (normgrow.cluster.launch, normgrow.cli)."""
    import normgrow.train.trainer as trainer
    from normgrow.cli import main

    config = tiny_run_config()
    task = trainer.PhaseTask(phase_spec(config, "post-freeze", SEED, 0), Execution.from_config(config), None,
                             tmp_path / "phase")
    job = trainer.TrainingJob((task,), "someone/teacher", tmp_path / "tokens", "0123abc")
    asked = []

    def load_teacher(name, dtype, attn_implementation, revision=None):
        asked.append((name, revision))
        raise TeacherAskedFor

    monkeypatch.setattr(trainer, "load_teacher", load_teacher)
    threads = torch.get_num_threads()
    try:
        with pytest.raises(TeacherAskedFor):
            if through == "this process":
                trainer.train_phases(job, io.StringIO())
            else:
                path = tmp_path / "job.json"
                path.write_text(json.dumps(job.to_json()))  # as launch_phases writes it
                assert trainer.TrainingJob.from_json(json.loads(path.read_text())) == job
                main(["train-phase", "--job", str(path)])
    finally:
        torch.set_num_threads(threads)
    assert asked == [("someone/teacher", "0123abc")]
