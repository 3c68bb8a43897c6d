"""A training job's retries (normgrow.train.attempts): a retry restores a phase an earlier attempt finished
(the TIMEOUT race of docs/cluster.md, "Time limits"), resumes after a stop, and fails at once after a
Python exception; a first attempt (a fresh run, --forcerun) trains. The attempt is given as Snakemake
gives it to the job (resources.attempt), to the job's own function (launch_phases) or to begin_attempt."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import traceback
from pathlib import Path

import pytest
from conftest import (
    REPO,
    SHUTDOWN_TIMEOUT,
    only_the_finished_record_remains,
    phase_outputs,
    tiny_run_config,
    write_phase_inputs,
)

from normgrow.train.attempts import (
    PreviousAttemptFailed,
    begin_attempt,
    finished_paths,
    keep_finished,
    record_error,
    recorded_errors,
    restore_finished,
    verified_finished,
)
from normgrow.train.outputs import atomic_write, write_json

DECLARED = ("student.safetensors", "state.json", "train.csv", "eval.csv")


def test_the_one_writer_replaces_a_file_whole_through_a_temporary_file_of_its_process(tmp_path):
    """write_json (the attempt and resume records on one line, the outputs indented) goes through
    atomic_write, whose temporary file carries the process id: ranks writing side by side never share one,
    and none is left behind."""
    path = tmp_path / "resume" / "record.json"
    write_json(path, {"rank": 1}, indent=None)
    assert path.read_text() == '{"rank": 1}'
    write_json(path, {"ranks": [0, 1]})
    assert path.read_text() == '{\n  "ranks": [\n    0,\n    1\n  ]\n}\n'
    temporary = []
    atomic_write(path, lambda tmp: temporary.append(tmp.name) or tmp.write_text("whole"))
    assert temporary == [f".record.json.{os.getpid()}.tmp"]
    assert path.read_text() == "whole" and [p.name for p in path.parent.iterdir()] == ["record.json"]


def fake_phase(out: Path, content: str = "weights") -> Path:
    """A finished phase's outputs (the declared files and a snapshot), without training."""
    (out / "snapshots").mkdir(parents=True)
    for name in DECLARED:
        (out / name).write_text(f"{content} {name}")
    (out / "snapshots" / "step2.safetensors").write_text(f"{content} snapshot")
    return out


def delete_outputs(out: Path) -> None:
    """What Snakemake does to a failed job's outputs (and again before its retry)."""
    for name in DECLARED:
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "snapshots", ignore_errors=True)


def contents(out: Path) -> dict[str, str]:
    files = [out / name for name in DECLARED] + sorted((out / "snapshots").iterdir())
    return {path.relative_to(out).as_posix(): path.read_text() for path in files}


def test_a_retry_restores_a_finished_phase_whose_outputs_snakemake_deleted(tmp_path):
    out = fake_phase(tmp_path / "phase")
    want = contents(out)
    keep_finished(out, "spec")
    record, _ = finished_paths(out)
    assert os.path.samefile(record / "student.safetensors", out / "student.safetensors")  # a link: no extra disk
    delete_outputs(out)
    log = io.StringIO()
    assert begin_attempt([(out, "spec")], 2, log) is True
    assert contents(out) == want
    assert "restored the outputs" in log.getvalue()
    delete_outputs(out)  # the record stays: a later retry (killed again) restores again
    assert begin_attempt([(out, "spec")], 3, io.StringIO()) is True and contents(out) == want


def test_a_phase_without_snapshots_is_restored_with_its_empty_snapshots_directory(tmp_path):
    """The embedded default keeps no snapshots, but snapshots/ is a declared output: the restore makes it."""
    out = fake_phase(tmp_path / "phase")
    (out / "snapshots" / "step2.safetensors").unlink()
    keep_finished(out, "spec")
    delete_outputs(out)
    assert begin_attempt([(out, "spec")], 2, io.StringIO()) is True
    assert (out / "snapshots").is_dir() and not any((out / "snapshots").iterdir())
    assert (out / "state.json").read_text() == "weights state.json"


def test_a_retry_restores_over_outputs_a_later_attempt_left_behind(tmp_path):
    """Outputs still there (a later attempt's, cut short) are replaced by the finished record's."""
    out = fake_phase(tmp_path / "phase")
    want = contents(out)
    keep_finished(out, "spec")
    for name in ("train.csv", "state.json"):
        (out / name).unlink()
        (out / name).write_text("a later attempt's")
    assert begin_attempt([(out, "spec")], 2, io.StringIO()) is True
    assert contents(out) == want


def test_the_restore_links_state_json_last(tmp_path, monkeypatch):
    """state.json is what the next jobs read as the phase's end: it comes back after every other file, in
    whatever order the record lists them."""
    out = fake_phase(tmp_path / "phase")
    keep_finished(out, "spec")
    delete_outputs(out)
    files = verified_finished(out, "spec", io.StringIO())
    linked = []
    link = Path.hardlink_to
    monkeypatch.setattr(Path, "hardlink_to", lambda self, target: (linked.append(self.name), link(self, target)))
    restore_finished(out, {"state.json": files["state.json"], **files})
    assert linked[-1] == "state.json" and sorted(linked) == sorted(Path(name).name for name in files)


def test_a_phase_that_finishes_again_replaces_its_finished_record(tmp_path):
    """A record of another spec (not restored: the phase trained again) gives way to the new one."""
    out = fake_phase(tmp_path / "phase", "old")
    keep_finished(out, "old spec")
    delete_outputs(out)
    fake_phase(out, "new")
    keep_finished(out, "new spec")
    delete_outputs(out)
    assert begin_attempt([(out, "new spec")], 2, io.StringIO()) is True
    assert (out / "state.json").read_text() == "new state.json"


def test_a_first_attempt_drops_the_finished_record_and_trains(tmp_path):
    """A fresh run or --forcerun (attempt 1) trains the phase again, and a retry of that run no longer
    finds the old record."""
    out = fake_phase(tmp_path / "phase")
    keep_finished(out, "spec")
    assert begin_attempt([(out, "spec")], 1, io.StringIO()) is False
    assert not any(path.exists() for path in finished_paths(out))
    delete_outputs(out)
    assert begin_attempt([(out, "spec")], 2, io.StringIO()) is False
    assert not (out / "state.json").exists()


@pytest.mark.parametrize("damage", ["other spec", "no manifest", "cut short"])
def test_a_record_of_another_spec_or_incomplete_is_not_restored(tmp_path, damage):
    out = fake_phase(tmp_path / "phase")
    keep_finished(out, "spec")
    delete_outputs(out)
    record, manifest = finished_paths(out)
    if damage == "no manifest":  # killed while linking: the manifest is written last
        manifest.unlink()
    elif damage == "cut short":
        (record / "train.csv").write_text("x")
    log = io.StringIO()
    assert begin_attempt([(out, "other" if damage == "other spec" else "spec")], 2, log) is False
    assert not (out / "state.json").exists()
    assert "resuming from the newest saved state" in log.getvalue()


def test_a_group_is_restored_only_when_every_phase_finished(tmp_path):
    """Records are kept for every student before any state is cleared: one without a record still has its
    states, and the group trains (its finished students write their outputs again without training)."""
    first, second = fake_phase(tmp_path / "a"), fake_phase(tmp_path / "b")
    keep_finished(first, "a")
    delete_outputs(first)
    delete_outputs(second)
    assert begin_attempt([(first, "a"), (second, "b")], 2, io.StringIO()) is False
    assert not (first / "state.json").exists()


def failed(out: Path, rank: int, world: int, monkeypatch) -> None:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    try:
        raise ValueError("teacher model_type 'gpt2' is not supported")
    except ValueError as error:
        record_error(out, error)


def test_a_retry_after_an_exception_fails_at_once_with_it(tmp_path, monkeypatch):
    out = tmp_path / "phase"
    failed(out, 0, 1, monkeypatch)
    for attempt in (2, 3):  # a refused retry records nothing: the next one still reports the first error
        with pytest.raises(PreviousAttemptFailed, match="ValueError: teacher model_type 'gpt2' is not supported"):
            begin_attempt([(out, "spec")], attempt, io.StringIO())
    assert begin_attempt([(out, "spec")], 1, io.StringIO()) is False  # a new run: trains, the record gone
    assert recorded_errors(out) == []


def test_a_retry_resumes_when_a_rank_left_no_error_record(tmp_path, monkeypatch):
    """Two ranks, one killed (no record), the other failing on the lost peer: a kill, resumed; when both
    raised, the exception is the job's and the retry fails at once."""
    out = tmp_path / "phase"
    failed(out, 1, 2, monkeypatch)
    assert begin_attempt([(out, "spec")], 2, io.StringIO()) is False
    assert recorded_errors(out) == []  # the killed attempt's: a failure of this attempt records its own
    failed(out, 0, 2, monkeypatch)
    failed(out, 1, 2, monkeypatch)
    with pytest.raises(PreviousAttemptFailed):
        begin_attempt([(out, "spec")], 2, io.StringIO())


def test_an_out_of_memory_error_of_one_rank_refuses_the_retry(tmp_path, monkeypatch):
    """Rank 3 of 8 ran out of memory; its peers, waiting for it in a collective, were killed and left no
    record. A retry would replay the same batches on the same memory: it fails at once with that error."""
    out = tmp_path / "phase"
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    record_error(out, MemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), alone=True)
    with pytest.raises(PreviousAttemptFailed, match="CUDA out of memory"):
        begin_attempt([(out, "spec")], 2, io.StringIO())



def test_the_refusal_shows_the_out_of_memory_error_not_a_peers_lost_connection(tmp_path, monkeypatch):
    """A peer that recorded its lost connection before the rank that ran out of memory: the retry names the
    out-of-memory error, the cause."""
    out = tmp_path / "phase"
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "0")
    record_error(out, RuntimeError("Connection closed by peer"))
    monkeypatch.setenv("RANK", "3")
    record_error(out, MemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), alone=True)
    with pytest.raises(PreviousAttemptFailed) as refused:
        begin_attempt([(out, "spec")], 2, io.StringIO())
    assert "CUDA out of memory" in str(refused.value) and "Connection closed" not in str(refused.value)


def test_a_job_in_one_process_records_its_error_as_rank_0_of_1(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    try:
        raise ValueError("boom")
    except ValueError as raised:
        error = raised
        record_error(tmp_path, error)
    [record] = recorded_errors(tmp_path)
    assert (record["rank"], record["world"], record["error"], record["alone"]) == (0, 1, "ValueError: boom", False)
    assert record["traceback"] == "".join(traceback.format_exception(error))  # Python's own, whole

# ---------------------------------------------------------------- the job's function on a real phase

@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("attempts")
    write_phase_inputs(root, seed=3, documents=20, longest=10, valid=2)
    config = tiny_run_config(phase_steps=4, resume_every=2, eval_every=2)
    config["diagnostics"] = {"runs": ["post-freeze"], "snapshots_per_phase": 1}
    return {"root": root, "config": config}


def phase_task(setup: dict, out: Path, snapshots: int = 2):
    from normgrow.design.curriculum import phase_spec
    from normgrow.design.execution import Execution
    from normgrow.train.trainer import PhaseTask

    config = setup["config"]
    return PhaseTask(phase_spec(config, "post-freeze", 5, 0), Execution.from_config(config, snapshots), None, out)


def launch(setup: dict, out: Path, attempt: int, teacher: str = "teacher", gpus: int = 0,
           snapshots: int = 2, name: str = "") -> tuple[int, str]:
    import torch

    from normgrow.cluster.launch import launch_phases
    from normgrow.train.trainer import TrainingJob

    log, threads = io.StringIO(), torch.get_num_threads()
    job = TrainingJob((phase_task(setup, out, snapshots),), str(setup["root"] / teacher), setup["root"] / "tokens")
    try:
        status = launch_phases(job, log, attempt=attempt, shutdown_timeout=SHUTDOWN_TIMEOUT, gpus_per_node=gpus,
                               name=name)
    finally:
        torch.set_num_threads(threads)
    return status, log.getvalue()


def test_a_retry_of_a_job_killed_after_its_phase_finished_restores_it_and_a_forced_rerun_trains(setup):
    """The TIMEOUT race: the phase finished (outputs written, resume states cleared), the kill came after,
    Snakemake deleted the outputs. The retry (attempt 2) restores them byte for byte without training; a
    first attempt (--forcerun) trains the phase again."""
    out = setup["root"] / "finished"
    status, log = launch(setup, out, attempt=1)
    assert status == 0 and "validation CE" in log
    want = phase_outputs(out)
    assert only_the_finished_record_remains(out)
    delete_outputs(out)
    status, log = launch(setup, out, attempt=2)
    assert status == 0 and "restored the outputs" in log
    assert "validation CE" not in log and "resumed" not in log  # nothing trained
    assert phase_outputs(out) == want
    status, log = launch(setup, out, attempt=1)  # --forcerun: Snakemake deleted nothing of resume/
    assert status == 0 and "validation CE" in log and "restored" not in log
    assert phase_outputs(out) == want


def test_a_retry_restores_a_phase_that_kept_no_snapshots_with_its_empty_snapshots_directory(setup):
    """The embedded default's phases keep no snapshots: the TIMEOUT race's retry restores such a phase, its
    declared snapshots/ directory empty, without training."""
    out = setup["root"] / "no-snapshots"
    status, _ = launch(setup, out, attempt=1, snapshots=0)
    assert status == 0 and not any((out / "snapshots").iterdir())
    want = phase_outputs(out)
    delete_outputs(out)
    status, log = launch(setup, out, attempt=2, snapshots=0)
    assert status == 0 and "restored the outputs" in log and "validation CE" not in log
    assert phase_outputs(out) == want


def test_an_unsupported_teacher_fails_the_retry_at_once_with_the_first_error(setup):
    """A deterministic error inside the phase job (normgrow.model.family): recorded by the first attempt; the
    retry raises it without loading anything."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("gpt2", n_layer=1, n_embd=32, n_head=4, vocab_size=64)
    AutoModelForCausalLM.from_config(config).save_pretrained(setup["root"] / "gpt2")
    out = setup["root"] / "unsupported"
    with pytest.raises(ValueError, match="'gpt2' is not supported"):
        launch(setup, out, attempt=1, teacher="gpt2")
    assert [record["error"].split(":")[0] for record in recorded_errors(out)] == ["ValueError"]
    with pytest.raises(PreviousAttemptFailed, match="ValueError: teacher model_type 'gpt2' is not supported"):
        launch(setup, out, attempt=2, teacher="teacher")  # even with a good teacher: the retry runs nothing


def test_a_training_jobs_error_names_the_job_and_its_run_phases(setup):
    """launch_phases' `name` (the workflow's job: its rule and run phases, workflow/scripts/train_phase.py) is a
    note on the exception a phase raised, shown in its traceback."""
    import traceback

    name = "training job train_post-freeze_seed5_phase0_KEY: post-freeze seed 5 phase 0 (results/phases/KEY)"
    with pytest.raises(Exception) as raised:
        launch(setup, setup["root"] / "named", attempt=1, teacher="missing", name=name)
    assert raised.value.__notes__ == [f"in the {name}"]
    assert f"in the {name}" in "".join(traceback.format_exception(raised.value))


def test_a_job_that_asked_for_gpus_on_a_node_without_them_fails_and_its_retry_too(setup, monkeypatch):
    """resources.train.gpus reaches the job's ranks through its launcher: on a node where CUDA sees none (here:
    every test), the job fails before it trains (no CPU fallback until its time limit), and so does its retry."""
    from normgrow.train.distributed import ASKED_GPUS

    monkeypatch.setenv(ASKED_GPUS, "0")  # restored after the test: the launcher sets it for its ranks
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "")
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    out = setup["root"] / "no-gpu"
    with pytest.raises(RuntimeError, match="asked for 8 GPU.*refusing to train on the CPU"):
        launch(setup, out, attempt=1, gpus=8)
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"  # set before CUDA starts
    assert not (out / "train.csv").exists()
    with pytest.raises(PreviousAttemptFailed, match="refusing to train on the CPU"):
        launch(setup, out, attempt=2, gpus=8)


@pytest.mark.parametrize("error, alone", [("OutOfMemoryError", True), ("ValueError", False)])
def test_an_out_of_memory_error_is_recorded_to_refuse_the_retries_alone(setup, monkeypatch, error, alone):
    """The job's function records torch's out-of-memory error as one that refuses the retries by itself, any
    other exception as one rank's part of the job's failure."""
    import torch

    from normgrow.train.trainer import Trainer

    def fail(self):
        raise torch.OutOfMemoryError("CUDA out of memory") if error == "OutOfMemoryError" else ValueError("bad")

    monkeypatch.setattr(Trainer, "run", fail)
    out = setup["root"] / f"failed-{error}"
    with pytest.raises((torch.OutOfMemoryError, ValueError)):
        launch(setup, out, attempt=1)
    assert [(record["error"].split(":")[0], record["alone"]) for record in recorded_errors(out)] == [(error, alone)]


def test_a_state_the_file_system_failed_to_write_is_not_recorded_and_the_retry_trains(setup, monkeypatch):
    """An OSError while the resume state is written (here at SIGTERM) is the file system's: the job fails
    without an error record (normgrow.train.resume.StateNotSaved), and the retry trains the phase."""
    from normgrow.train.resume import ResumeStore, StateNotSaved

    def fail(self, step, *args):
        raise StateNotSaved(f"the resume state at update {step} could not be written")

    out = setup["root"] / "not-saved"
    monkeypatch.setenv("NORMGROW_FAULT", "term@2")
    with monkeypatch.context() as patch:
        patch.setattr(ResumeStore, "save", fail)
        with pytest.raises(StateNotSaved):
            launch(setup, out, attempt=1)
    assert recorded_errors(out) == []
    monkeypatch.delenv("NORMGROW_FAULT")
    status, log = launch(setup, out, attempt=2)
    assert status == 0 and "resuming from the newest saved state" in log


def test_a_retry_after_sigterm_resumes(setup, monkeypatch):
    """A stop (SIGTERM: a state saved, exit 143) leaves no error record: the retry resumes the phase."""
    out = setup["root"] / "preempted"
    monkeypatch.setenv("NORMGROW_FAULT", "term@2")
    status, _ = launch(setup, out, attempt=1)
    assert status == 143 and recorded_errors(out) == []
    monkeypatch.delenv("NORMGROW_FAULT")
    status, log = launch(setup, out, attempt=2)
    assert status == 0 and "resumed from the state at update 2" in log


@pytest.mark.slow
def test_snakemake_retries_a_phase_killed_after_it_finished_by_restoring_it(ci_workdir, tmp_path):
    """The CI workflow's pre-joint phase with NORMGROW_FAULT=finished@0: its job is killed (SIGKILL) after the
    phase finished, as SLURM's kill at the time limit does after a restart in the allocation; Snakemake
    deletes the outputs and retries the job (the rule's retries), whose attempt 2 restores the outputs from
    the finished record instead of training: the same weights as the CI run's. The data and the teacher are
    the CI run's (copied with their times and Snakemake's records: up to date, not rebuilt)."""
    from conftest import snakemake_command

    work = tmp_path / "work"
    for kept in ("results/data", "results/teacher", ".snakemake/metadata"):
        shutil.copytree(ci_workdir / kept, work / kept, symlinks=True)
    index = json.loads((ci_workdir / "results" / "runs" / "pre-joint" / "seed42" / "phases.json").read_text())
    key = index["phases"][0]["key"]
    target = f"results/phases/{key}/state.json"
    env = {**os.environ, "NORMGROW_FAULT": f"finished@0:{key}"}
    proc = subprocess.run(snakemake_command(work, "--cores", "2", "--", target), cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "Trying to restart job" in proc.stdout and "Removing output files of failed job" in proc.stdout
    log = next((work / "logs" / "train").glob(f"*_{key}.log")).read_text()  # the retry's (Snakemake rewrites it)
    assert "attempt 2: restored the outputs" in log and "validation CE" not in log, log[-3000:]
    phase, reference = work / "results" / "phases" / key, ci_workdir / "results" / "phases" / key
    for name in ("student.safetensors", "train.csv", "eval.csv"):
        assert (phase / name).read_bytes() == (reference / name).read_bytes(), name
