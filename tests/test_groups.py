"""Phases that read one batch stream, trained side by side on one teacher forward per batch
(normgrow.train.trainer.train_phases): every student's outputs are bit-identical to its phase trained
alone; groups come from the phase specs; one student's failure names it and loses no other
student's work; a group killed with SIGKILL resumes bit-identically."""

from __future__ import annotations

import copy
import dataclasses
import io
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import (
    REPO,
    only_the_finished_record_remains,
    phase_outputs,
    tiny_run_config,
    train_job,
    write_phase_inputs,
)

from normgrow.design.config import validate_config
from normgrow.design.curriculum import PhaseTable, phase_spec, stream_key
from normgrow.design.execution import Execution
from normgrow.model.layout import PLACEMENTS
from normgrow.train.trainer import GroupFailed, PhaseTask, TrainingJob, train_phases

STEPS, SEED = 6, 3
ALL_PLACEMENTS = [p if p != "mix-ln" else "mix-ln@1" for p in PLACEMENTS]


def group_config() -> dict:
    config = tiny_run_config(phase_steps=STEPS, resume_every=2, eval_every=3)
    config["curricula"] = {"grow": [{"active_blocks": 1}, {"active_blocks": 2}], "joint": [{"active_blocks": 2}],
                           "reset": [{"active_blocks": 1}, {"active_blocks": 2, "data": "reset"}]}
    config["runs"] = {f"{p}-{c}": {"placement": p, "curriculum": c} for p in ALL_PLACEMENTS
                      for c in ("grow", "joint", "reset")}
    config["diagnostics"] = {"runs": ["post-grow"], "snapshots_per_phase": 2}
    return config


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("groups")
    write_phase_inputs(root, seed=2, documents=30, longest=12, valid=4)
    return {"root": root, "config": group_config(), "teacher": str(root / "teacher"), "tokens": root / "tokens"}


def task(setup: dict, run: str, phase: int, out: Path, previous: Path | None = None) -> PhaseTask:
    config = setup["config"]
    snapshots = 2 if run == "post-grow" else 0
    return PhaseTask(phase_spec(config, run, SEED, phase), Execution.from_config(config, snapshots), previous, out)


def job(setup: dict, tasks: list[PhaseTask]) -> TrainingJob:
    """`tasks` as one job on setup's teacher and tokens."""
    return TrainingJob(tuple(tasks), setup["teacher"], setup["tokens"])


def alone(setup: dict, run: str, phase: int = 0, previous: Path | None = None) -> Path:
    """The phase trained by itself (cached per run and phase)."""
    out = setup["root"] / "alone" / f"{run}-{phase}"
    if not (out / "state.json").exists():
        t = task(setup, run, phase, out, previous)
        train_phases(job(setup, [t]), io.StringIO())
    return out


def test_a_pre_post_pair_and_its_next_phases_are_bit_identical_grouped_or_alone(setup):
    root = setup["root"] / "pair"
    tasks = [task(setup, run, 0, root / run) for run in ("pre-grow", "post-grow")]
    log = io.StringIO()
    train_phases(job(setup, tasks), log)
    assert "group of 2 students on one teacher forward per batch" in log.getvalue()
    for run in ("pre-grow", "post-grow"):
        assert phase_outputs(root / run) == phase_outputs(alone(setup, run)), run
    assert only_the_finished_record_remains(root / "post-grow")  # states cleared once every student finished
    later = [task(setup, run, 1, root / f"{run}-1", previous=root / run) for run in ("pre-grow", "post-grow")]
    train_phases(job(setup, later), io.StringIO())
    for run in ("pre-grow", "post-grow"):
        assert phase_outputs(root / f"{run}-1") == phase_outputs(alone(setup, run, 1, previous=alone(setup, run))), run


def test_a_group_of_every_placement_and_curriculum_sharing_a_stream_is_bit_identical(setup):
    runs = [f"{p}-{c}" for p in ALL_PLACEMENTS for c in ("grow", "joint")]
    root = setup["root"] / "all"
    tasks = [task(setup, run, 0, root / run) for run in runs]
    assert len({stream_key(t.spec) for t in tasks}) == 1 and len({t.spec.key for t in tasks}) == len(runs)
    train_phases(job(setup, tasks), io.StringIO())
    for run in runs:
        assert phase_outputs(root / run) == phase_outputs(alone(setup, run)), run


def test_phases_of_different_streams_are_refused(setup):
    root = setup["root"] / "refused"
    first = task(setup, "post-grow", 1, root / "a", previous=alone(setup, "post-grow"))
    reset = task(setup, "post-reset", 1, root / "b", previous=alone(setup, "post-grow"))
    with pytest.raises(ValueError, match="different batch streams"):
        train_phases(job(setup, [first, reset]), io.StringIO())


def test_groups_come_from_the_specs_not_the_run_names():
    """The embedded default's 18 phases read 7 batch streams: pre/post pairs, joint with grow's first
    phase, freeze with grow's later phases, and the two longer joint controls alone; every phase is in
    one job; renaming every run changes no group."""
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()))
    table = PhaseTable.from_config(config)
    groups = table.groups(64)
    assert sorted(len(g.keys) for g in groups) == [1, 1, 2, 2, 4, 4, 4] and len(table.specs) == 18
    labels = [sorted(table.sharing(k)[0].split(" seed")[0] for k in g.keys) for g in groups]
    assert ["post-grow", "post-joint", "pre-grow", "pre-joint"] in labels
    assert ["post-freeze", "post-grow", "pre-freeze", "pre-grow"] in labels
    assert sorted(len(g.keys) for g in table.groups(2)) == [1, 1] + [2] * 8
    assert all(g.keys == (g.id,) for g in table.groups(1))  # a job per phase, named by its key
    assert sorted(key for g in groups for key in g.keys) == sorted(table.specs)
    renamed = copy.deepcopy(config)
    renamed["runs"] = {f"x{i}": run for i, run in enumerate(config["runs"].values())}
    assert [g.keys for g in PhaseTable.from_config(renamed).groups(64)] == [g.keys for g in groups]


def test_a_failing_student_is_named_and_the_others_keep_their_finished_work(setup, monkeypatch):
    root = setup["root"] / "failing"
    tasks = [task(setup, run, 0, root / run) for run in ("pre-grow", "post-grow", "sandwich-grow")]
    bad = tasks[1].spec
    monkeypatch.setenv("NORMGROW_FAULT", f"nan@4:{bad.key}")
    with pytest.raises(GroupFailed, match=rf"post seed {SEED} phase 0 \[{bad.key}\]: non-finite loss"):
        train_phases(job(setup, tasks), io.StringIO())
    for t in tasks:
        assert not (t.out / "state.json").exists()
    assert (root / "pre-grow" / "resume" / f"state-{STEPS}.json").exists()
    monkeypatch.delenv("NORMGROW_FAULT")
    log = io.StringIO()
    train_phases(job(setup, tasks), log)
    assert f"pre seed {SEED} phase 0 [{tasks[0].spec.key}]: resumed from the state at update {STEPS}" in log.getvalue()
    assert f"post seed {SEED} phase 0 [{bad.key}]: resumed from the state at update 2" in log.getvalue()
    for run in ("pre-grow", "post-grow", "sandwich-grow"):
        assert phase_outputs(root / run) == phase_outputs(alone(setup, run)), run


def test_a_group_whose_every_student_fails_names_them_all(setup, monkeypatch):
    """As a phase alone: their own error (not GroupFailed, which promises siblings that finished)."""
    root = setup["root"] / "all-failing"
    tasks = [task(setup, run, 0, root / run) for run in ("pre-grow", "post-grow")]
    monkeypatch.setenv("NORMGROW_FAULT", "nan@2")
    with pytest.raises(FloatingPointError, match=r"pre seed .*non-finite loss.*; post seed .*non-finite loss") as error:
        train_phases(job(setup, tasks), io.StringIO())
    assert not isinstance(error.value, GroupFailed)


def test_students_one_state_apart_resume_at_their_common_update(setup, monkeypatch):
    """A job killed between two students' saves leaves them a state apart: both resume at the older."""
    root = setup["root"] / "apart"
    tasks = [task(setup, run, 0, root / run) for run in ("pre-grow", "post-grow")]
    monkeypatch.setenv("NORMGROW_FAULT", "term@4")
    from normgrow.train.trainer import Preempted

    with pytest.raises(Preempted):
        train_phases(job(setup, tasks), io.StringIO())
    monkeypatch.delenv("NORMGROW_FAULT")
    newest = root / "post-grow" / "resume" / "state-4"
    shutil.rmtree(newest)
    newest.with_suffix(".json").unlink()
    log = io.StringIO()
    train_phases(job(setup, tasks), log)
    assert "resumed from the state at update 2" in log.getvalue() and "update 4" not in log.getvalue()
    for run in ("pre-grow", "post-grow"):
        assert phase_outputs(root / run) == phase_outputs(alone(setup, run)), run


def test_a_group_killed_with_sigkill_resumes_bit_identically(setup):
    root = setup["root"] / "killed"
    tasks = [task(setup, run, 0, root / run) for run in ("pre-grow", "post-grow")]
    root.mkdir(parents=True)

    def run(fault: str | None) -> subprocess.CompletedProcess:
        return train_job(job(setup, tasks).to_json(), root / "job.json", fault)

    assert run("kill@3").returncode == -9
    proc = run(None)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.count("resumed from the state at update 2") == 2
    for name in ("pre-grow", "post-grow"):
        assert phase_outputs(root / name) == phase_outputs(alone(setup, name)), name


def test_each_student_draws_its_own_random_numbers_in_a_group(setup, monkeypatch):
    """With torch, numpy and python draws in every update, each student of a group draws what its
    phase draws alone, and new numbers every update: a student's RNG states are its own and kept
    from one update to the next."""
    import random

    import numpy as np
    import torch

    from normgrow.model.student import BlockStackStudent

    draws: list[tuple] = []
    forward = BlockStackStudent.forward

    def with_draws(student, *args, **kwargs):
        if torch.is_grad_enabled():  # an update, not an evaluation
            draws.append((student.placement, float(torch.rand(1)), float(np.random.rand()), random.random()))
        return forward(student, *args, **kwargs)

    monkeypatch.setattr(BlockStackStudent, "forward", with_draws)
    root = setup["root"] / "draws"
    runs = ("pre-grow", "post-grow")
    alone_draws = {}
    for run in runs:
        draws.clear()
        t = task(setup, run, 0, root / f"alone-{run}")
        train_phases(job(setup, [t]), io.StringIO())
        alone_draws[run] = list(draws)
    draws.clear()
    train_phases(job(setup, [task(setup, run, 0, root / run) for run in runs]), io.StringIO())
    for run in runs:
        placement = run.split("-")[0]
        assert [d for d in draws if d[0] == placement] == alone_draws[run]
        assert len(alone_draws[run]) == STEPS
        for generator in (1, 2, 3):  # each update draws on from where the last left off: new numbers
            assert len({d[generator] for d in alone_draws[run]}) == STEPS, (run, generator)


@pytest.mark.slow
def test_switching_grouping_on_for_a_finished_run(ci_workdir, tmp_path):
    """The CI run trained every phase alone. With grouping switched on, Snakemake's default rerun
    triggers see another rule making the grouped phases' files and would retrain them; one
    `--touch` under the new setting marks the finished outputs up to date, and nothing trains
    (docs/performance.md)."""
    from conftest import snakemake_command

    workdir = tmp_path / "run"
    shutil.copytree(ci_workdir, workdir, symlinks=True)  # copy2: modification times kept

    def snakemake(*options: str) -> str:
        command = snakemake_command(workdir, "--cores", "2", "--config", 'resources={"train": {"group_size": 8}}',
                                    *options, "--", "results/paper")
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout + done.stderr

    assert snakemake("-n").count("\nrule train_") == 7  # the 18 phases in 7 jobs (4, 4, 4, 2, 2, 1, 1)
    snakemake("--touch")
    assert "Nothing to be done" in snakemake("-n")


def test_a_bad_input_names_its_student(setup):
    root = setup["root"] / "bad"
    broken = root / "broken-previous"
    shutil.copytree(alone(setup, "post-grow"), broken)
    (broken / "student.safetensors").write_bytes(b"not a checkpoint")
    tasks = [task(setup, "pre-grow", 1, root / "pre", previous=alone(setup, "pre-grow")),
             task(setup, "post-grow", 1, root / "post", previous=broken)]
    with pytest.raises(Exception, match=rf"post seed {SEED} phase 1 \[{tasks[1].spec.key}\]: "):
        train_phases(job(setup, tasks), io.StringIO())


def test_a_group_whose_students_read_different_batches_is_refused(setup, monkeypatch):
    """Should two phases that read different batches pass as one stream (a wrong stream key), the group
    is refused before its first update, naming the student that would read other batches, rather than
    training a student on batches its phase does not read."""
    from normgrow.train import trainer

    monkeypatch.setattr(trainer, "stream_key", lambda spec: "one stream")
    config, root = setup["config"], setup["root"] / "other-batches"
    tasks = [PhaseTask(phase_spec(config, "post-grow", seed, 0), Execution.from_config(config), None, root / str(seed))
             for seed in (SEED, SEED + 1)]
    with pytest.raises(RuntimeError, match=rf"seed {SEED + 1} phase 0 .* reads other batches than .*seed {SEED} "):
        train_phases(job(setup, tasks), io.StringIO())
    assert not any((root / str(seed) / "train.csv").exists() for seed in (SEED, SEED + 1))


def test_a_group_listing_a_phase_or_an_output_twice_is_refused(setup):
    root = setup["root"] / "twice"
    pre, post = task(setup, "pre-grow", 0, root / "pre"), task(setup, "post-grow", 0, root / "post")
    for tasks in ([pre, pre], [pre, dataclasses.replace(pre, out=root / "other")],
                  [pre, dataclasses.replace(post, out=pre.out)]):
        with pytest.raises(ValueError, match="lists one phase or output directory twice"):
            train_phases(job(setup, tasks), io.StringIO())
    assert not root.exists()


@pytest.mark.parametrize("setting", ["threads", "resume_every", "loss_chunk", "padding_free"])
def test_a_group_mixing_execution_settings_is_refused(setup, setting):
    """Every student of a group follows one loop: one thread count, one state interval, one loss chunk
    (the evaluation of every student runs at the first one's), one layout of the batch (one teacher
    forward for all)."""
    root = setup["root"] / "mixed"
    pre, post = task(setup, "pre-grow", 0, root / "pre"), task(setup, "post-grow", 0, root / "post")
    value = getattr(post.execution, setting)
    other = dataclasses.replace(post.execution, **{setting: not value if isinstance(value, bool) else value + 1})
    with pytest.raises(ValueError, match="must share threads, train.resume_every, train.loss_chunk and "
                                         "train.padding_free"):
        train_phases(job(setup, [pre, dataclasses.replace(post, execution=other)]), io.StringIO())
    assert not root.exists()
