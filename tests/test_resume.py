"""Resume after SIGKILL and SIGTERM, corrupted states, and NaN: faults injected into a real phase
run as a subprocess (`python -m normgrow.cli train-phase`), compared with an uninterrupted run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    REPO,
    RESUMABLE_EVERY,
    RESUMABLE_STEPS,
    only_the_finished_record_remains,
    phase_outputs,
    train_named,
    with_out,
)

STEPS, STATE_EVERY = RESUMABLE_STEPS, RESUMABLE_EVERY
DECLARED = ("student.safetensors", "state.json", "train.csv", "eval.csv")


@pytest.fixture(scope="module")
def setup(resumable) -> dict:
    """conftest's resumable phase, trained once without a fault as the reference."""
    setup = dict(resumable)
    setup["reference"] = train(setup, "reference")
    assert setup["reference"].returncode == 0, setup["reference"].stdout
    return setup


def train(setup: dict, name: str, fault: str | None = None, job: dict | None = None) -> subprocess.CompletedProcess:
    return train_named(setup["root"], job or setup["job"], name, fault=fault)


@pytest.fixture(scope="module")
def killed_at_8(setup) -> Path:
    """The phase killed (SIGKILL) at update 8: its states of updates 3 and 6 on disk, no outputs."""
    assert train(setup, "killed-at-8", fault="kill@8").returncode == -9
    return setup["root"] / "killed-at-8"


def killed_copy(setup: dict, killed: Path, name: str) -> None:
    """A copy of the killed phase's directory under `name`, to resume or to damage."""
    shutil.copytree(killed, setup["root"] / name)


def assert_same_as_reference(setup: dict, name: str) -> None:
    got, want = phase_outputs(setup["root"] / name), phase_outputs(setup["root"] / "reference")
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key
    assert only_the_finished_record_remains(setup["root"] / name)


def test_uninterrupted_run_is_deterministic(setup):
    assert train(setup, "again").returncode == 0
    assert_same_as_reference(setup, "again")
    assert len(phase_outputs(setup["root"] / "reference")["snapshots"]) == 3


@pytest.mark.slow
def test_kill9_at_three_steps_then_resume_gives_the_same_result(setup):
    for kill, resumed_from in ((4, None), (8, 3), (11, 6)):
        proc = train(setup, "killed", fault=f"kill@{kill}")
        assert proc.returncode == -9, proc.stdout
        if resumed_from is not None:
            assert f"resumed from the state at update {resumed_from}" in proc.stdout
        assert not (setup["root"] / "killed" / "state.json").exists()
    proc = train(setup, "killed")
    assert proc.returncode == 0, proc.stdout
    assert "resumed from the state at update 9" in proc.stdout
    assert_same_as_reference(setup, "killed")


@pytest.mark.slow
def test_sigterm_saves_a_state_and_resumes_to_the_same_result(setup):
    proc = train(setup, "term", fault="term@5")
    assert proc.returncode == 143, proc.stdout
    assert "SIGTERM at update 5" in proc.stdout
    assert (setup["root"] / "term" / "resume" / "state-5.json").is_file()
    assert not (setup["root"] / "term" / "student.safetensors").exists()
    proc = train(setup, "term")
    assert proc.returncode == 0 and "resumed from the state at update 5" in proc.stdout
    assert_same_as_reference(setup, "term")


@pytest.mark.slow
def test_corrupted_state_falls_back_to_the_previous_one(setup, killed_at_8):
    killed_copy(setup, killed_at_8, "corrupt")
    resume = setup["root"] / "corrupt" / "resume"
    newest = next((resume / "state-6").glob("*.distcp"))
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # truncated
    proc = train(setup, "corrupt")
    assert proc.returncode == 0, proc.stdout
    assert "state-6.json: checksum mismatch" in proc.stdout
    assert "resumed from the state at update 3" in proc.stdout
    assert_same_as_reference(setup, "corrupt")


@pytest.mark.slow
def test_all_states_corrupted_is_a_clear_error(setup, killed_at_8):
    killed_copy(setup, killed_at_8, "allbad")
    for state in (setup["root"] / "allbad" / "resume").glob("state-*/*.distcp"):
        state.write_bytes(b"garbage")
    proc = train(setup, "allbad")
    assert proc.returncode != 0
    assert "no usable resume state" in proc.stdout and "Delete" in proc.stdout
    for name in DECLARED:
        assert not (setup["root"] / "allbad" / name).exists()


@pytest.mark.slow
def test_nan_stops_the_phase_and_keeps_the_last_good_state(setup):
    proc = train(setup, "nan", fault="nan@5")
    assert proc.returncode != 0
    assert "FloatingPointError" in proc.stdout
    assert "post seed 5 phase 0 [" in proc.stdout and "]: non-finite loss (nan)" in proc.stdout
    assert "at update 5" in proc.stdout
    resume = setup["root"] / "nan" / "resume"
    assert sorted(p.name for p in resume.glob("state-*.json")) == ["state-3.json"]
    for name in DECLARED:
        assert not (setup["root"] / "nan" / name).exists()
    # a rerun without the fault resumes from the good state and matches the reference
    assert train(setup, "nan").returncode == 0
    assert_same_as_reference(setup, "nan")


def changed_job(setup: dict, part: str, **changes) -> dict:
    """A copy of the phase's job with `changes` to its `part` ("spec": its training, or "execution")."""
    job = json.loads(json.dumps(setup["job"]))
    task = job["tasks"][0]
    (task["spec"]["training"] if part == "spec" else task["execution"]).update(changes)
    return job


@pytest.mark.slow
def test_a_state_saved_under_other_execution_settings_resumes(setup, killed_at_8):
    """resume_every, loss_chunk and threads are not part of the phase: its resume states stay valid."""
    killed_copy(setup, killed_at_8, "execution")
    other = changed_job(setup, "execution", resume_every=5, loss_chunk=7, threads=2)
    proc = train(setup, "execution", job=other)
    assert proc.returncode == 0, proc.stdout
    assert "resumed from the state at update 6" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("part,changes", [("spec", {"lr": 0.02}), ("execution", {"snapshots": 1})])
def test_a_state_of_another_phase_or_other_snapshots_is_not_resumed(setup, killed_at_8, part, changes):
    name = f"other-{part}"
    killed_copy(setup, killed_at_8, name)
    proc = train(setup, name, job=changed_job(setup, part, **changes))
    assert proc.returncode == 0, proc.stdout
    assert "resumed" not in proc.stdout


def test_in_process_resume_gives_the_uninterrupted_result(setup, monkeypatch):
    """Preempted at update 5 and resumed in the same process: the weights, train.csv, eval.csv and
    state equal the uninterrupted phase's — the optimizer state and the document iterator's position
    come back with the weights."""
    import io

    import torch

    from normgrow.train import trainer

    root, threads = setup["root"], torch.get_num_threads()
    job = trainer.TrainingJob.from_json(with_out(setup["job"], root / "in-process"))
    monkeypatch.setenv("NORMGROW_FAULT", "term@5")
    try:
        with pytest.raises(trainer.Preempted):
            trainer.train_phases(job, io.StringIO())
        saved = root / "in-process" / "resume" / "state-5"
        # data only, so that loading a state runs no code: DCP's shards and metadata, and JSON
        assert all(p.suffix in (".distcp", ".json") or p.name == ".metadata" for p in saved.iterdir())
        progress = json.loads((saved / "progress.json").read_text())
        assert progress["progress"]["step"] == 5 and set(progress["rng"]) == {"torch", "numpy", "python"}
        monkeypatch.delenv("NORMGROW_FAULT")
        log = io.StringIO()
        trainer.train_phases(job, log)
    finally:
        torch.set_num_threads(threads)
    assert "resumed from the state at update 5" in log.getvalue()
    assert_same_as_reference(setup, "in-process")


def test_resume_restores_the_random_number_generators(setup, monkeypatch):
    """With a source of randomness in every update (torch, numpy and python draws beside the
    objective), a phase preempted at update 5 and resumed draws exactly what the uninterrupted
    phase drew at updates 6..12: the RNG states were saved and restored (in process)."""
    import io
    import random

    import numpy as np
    import torch

    from normgrow.model.student import BlockStackStudent
    from normgrow.train import trainer

    draws: list[tuple] = []
    forward = BlockStackStudent.forward

    def with_draws(*args, **kwargs):
        if torch.is_grad_enabled():  # an update, not an evaluation
            draws.append((float(torch.rand(1)), float(np.random.rand()), random.random()))
        return forward(*args, **kwargs)

    monkeypatch.setattr(BlockStackStudent, "forward", with_draws)
    root = setup["root"]

    def run(name: str) -> list[tuple]:
        draws.clear()
        threads = torch.get_num_threads()
        try:
            trainer.train_phases(trainer.TrainingJob.from_json(with_out(setup["job"], root / name)), io.StringIO())
        finally:
            torch.set_num_threads(threads)
        return list(draws)

    reference = run("rng-reference")
    monkeypatch.setenv("NORMGROW_FAULT", "term@5")
    with pytest.raises(trainer.Preempted):
        run("rng-resumed")
    monkeypatch.delenv("NORMGROW_FAULT")
    random.seed(123)  # the process's generators move on before the rerun, as in a new process
    np.random.seed(123)
    torch.manual_seed(123)
    resumed = run("rng-resumed")
    assert len(reference) == STEPS and len(resumed) == STEPS - 5
    assert resumed == reference[5:]


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_exactly_the_newest_keep_states_remain(tmp_path):
    """Saving five states with keep = 2 leaves the newest two, manifests and directories alike."""
    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    store = ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")), keep=2)
    for step in range(1, 6):
        store.save(step, model, optimizer, {"update": step})
    assert sorted(path.name for path in tmp_path.iterdir()) == ["state-4", "state-4.json", "state-5", "state-5.json"]
    assert store.latest_step() == 5



@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
@pytest.mark.parametrize("cut", ["manifest", "shard"])
def test_a_newest_state_cut_short_on_disk_falls_back_to_the_one_before(tmp_path, cut):
    """A node that fails before its page cache reaches the disk can leave the newest state's files renamed
    but empty (they are not fsynced): its manifest unreadable, or a shard shorter than its checksum says.
    The state before it loads, weights and progress."""
    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    store = ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")))
    store.save(4, model, optimizer, {"update": 4})
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1.0)
    store.save(8, model, optimizer, {"update": 8})
    damaged = tmp_path / "state-8.json" if cut == "manifest" else next((tmp_path / "state-8").glob("*.distcp"))
    damaged.write_bytes(b"")
    assert store.load_latest(model, optimizer) == {"update": 4}
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved.items())


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_a_phase_keeps_its_own_states_beside_newer_ones_of_another_spec(tmp_path):
    """States 8 and 10 of another spec (the phase's snapshots changed) are skipped; the phase starts over and
    its own state 4 stays (the newest `keep` are counted among its own), so a kill before update 8 resumes
    from 4, not from the beginning."""
    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ranks = Ranks(0, 1, torch.device("cpu"))
    other = ResumeStore(tmp_path, {"phase": "p", "snapshots": 3}, ranks)
    for step in (8, 10):
        other.save(step, model, optimizer, {"update": step})
    store = ResumeStore(tmp_path, {"phase": "p", "snapshots": 0}, ranks)
    assert store.latest_step() is None
    store.save(4, model, optimizer, {"update": 4})
    assert store.latest_step() == 4

def test_each_rank_hashes_only_its_own_shard_streamed_to_the_whole_files_digest(tmp_path, monkeypatch):
    """A state of 4 ranks' shards (one larger than hashlib's chunk): rank r of a world of 2 opens only
    shards r and r + 2, rank 0 also DCP's metadata and progress.json, none reads a file whole, and the
    hashes of both ranks together are the SHA-256 of every whole file."""
    import hashlib
    import pathlib

    from normgrow.train.resume import file_hashes

    rng = np.random.default_rng(0)
    names = [f"__{r}_0.distcp" for r in range(4)] + [".metadata", "progress.json"]
    for index, name in enumerate(names):
        (tmp_path / name).write_bytes(rng.bytes(3_000_000 if index == 1 else 1000 + index))
    whole = {name: hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in names}
    opened, open_file = [], pathlib.Path.open

    def record(path, *args, **kwargs):
        opened.append(path.name)
        return open_file(path, *args, **kwargs)

    def whole_read(path):
        raise AssertionError(f"{path.name} read whole")

    monkeypatch.setattr(pathlib.Path, "open", record)
    monkeypatch.setattr(pathlib.Path, "read_bytes", whole_read)
    hashes = {}
    for rank, own in ((0, {"__0_0.distcp", "__2_0.distcp", ".metadata", "progress.json"}),
                      (1, {"__1_0.distcp", "__3_0.distcp"})):
        opened.clear()
        part = file_hashes(tmp_path, rank, world=2)
        assert set(opened) == set(part) == own and len(opened) == len(own), rank
        hashes |= part
    assert hashes == whole
    assert file_hashes(tmp_path) == whole  # a world of one hashes everything


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_a_start_hashes_each_state_once(tmp_path, monkeypatch):
    """A job's start asks for the newest state, then loads it: its files are hashed once, not twice."""
    import hashlib
    from pathlib import Path

    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu"))).save(4, model, optimizer, {"update": 4})
    hashed, digest = [], hashlib.file_digest

    def record(file, *args, **kwargs):
        hashed.append(Path(file.name).name)
        return digest(file, *args, **kwargs)

    monkeypatch.setattr(hashlib, "file_digest", record)
    store = ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")))
    assert store.latest_step() == 4
    assert store.load_latest(model, optimizer) == {"update": 4}
    assert sorted(hashed) == [".metadata", "__0_0.distcp", "progress.json"]


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_an_os_error_inside_dcp_save_is_a_retryable_state_not_saved(tmp_path, monkeypatch):
    """DCP raises a write's OSError as a CheckpointException (a BaseException, on every rank): the store
    raises StateNotSaved, which a retry resumes from (normgrow.train.attempts.RetryableError); another
    failure inside DCP stays what it was."""
    import torch
    from torch.distributed.checkpoint import CheckpointException, filesystem

    from normgrow.train.attempts import RetryableError
    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore, StateNotSaved

    def broken_disk(*args, **kwargs):
        raise OSError(5, "Input/output error")

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    store = ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")))
    monkeypatch.setattr(filesystem, "_write_files_from_queue", broken_disk)
    with pytest.raises(StateNotSaved, match="state at update 4 could not be written") as raised:
        store.save(4, model, optimizer, {"update": 4})
    assert isinstance(raised.value, RetryableError) and isinstance(raised.value.__cause__, CheckpointException)
    assert not (tmp_path / "state-4.json").exists()
    monkeypatch.setattr(filesystem, "_write_files_from_queue", lambda *a, **k: 1 / 0)
    with pytest.raises(CheckpointException):
        store.save(5, model, optimizer, {"update": 5})


# The runs the preempted workflow builds: a phase of every kind — growth, frozen earlier blocks, the
# iterator reset, fresh data with an LR restart — and a diagnosed run (the CI config's post-grow).
PREEMPTED_RUNS = ["post-grow", "post-freeze", "post-grow-reset", "post-joint-longer"]



@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_a_state_at_or_before_an_update_loads_with_its_weights(tmp_path):
    """States of updates 2, 4 and 6: the newest at update 5 or before is 4's, weights and progress; at 4, 4's;
    before 2, none."""
    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    store = ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")), keep=3)
    weights = {}
    for step in (2, 4, 6):
        with torch.no_grad():
            model.weight.add_(1.0)
        weights[step] = model.weight.detach().clone()
        store.save(step, model, optimizer, {"update": step})
    for at_most, step in ((5, 4), (4, 4), (6, 6), (None, 6)):
        assert store.load_latest(model, optimizer, at_most=at_most) == {"update": step}, at_most
        assert torch.equal(model.weight, weights[step]), at_most
    assert store.load_latest(model, optimizer, at_most=1) is None
    store.save(10, model, optimizer, {"update": 10})  # newest by its update, not by its name ("state-10" < "state-6")
    assert store.latest_step() == 10


def test_a_store_joins_its_ranks_own_hashes_and_none_when_a_rank_cannot_read(tmp_path, monkeypatch):
    """Rank 1 of 2 hashes shards 1 and 3 and takes rank 0's part from the collective; a rank whose read failed
    (its own or a peer's) makes the state unverifiable on every rank, not a crash."""
    import torch

    from normgrow.train import resume
    from normgrow.train.distributed import Ranks

    for name in ("__0_0.distcp", "__1_0.distcp", "__3_0.distcp", ".metadata"):
        (tmp_path / name).write_bytes(name.encode())
    store = resume.ResumeStore(tmp_path / "store", {"phase": "p"}, Ranks(1, 2, torch.device("cpu")))
    peer: dict = {"part": {"__0_0.distcp": "0", ".metadata": "m"}}
    monkeypatch.setattr(Ranks, "gather", lambda self, value: [peer["part"], value])
    own = resume.file_hashes(tmp_path, 1, 2)
    assert set(own) == {"__1_0.distcp", "__3_0.distcp"}
    assert store._hashes(tmp_path) == {"__0_0.distcp": "0", ".metadata": "m", **own}
    peer["part"] = None
    assert store._hashes(tmp_path) is None

    def unreadable(*args):
        raise OSError("input/output error")

    peer["part"] = {}
    monkeypatch.setattr(resume, "file_hashes", unreadable)
    assert store._hashes(tmp_path) is None

@pytest.mark.slow
def test_workflow_with_every_phase_preempted_once_matches_the_uninterrupted_run(ci_workdir, tmp_path):
    """The CI workflow's runs of every curriculum kind with SIGTERM at update 5 of every phase: each
    phase saves a state, exits 143, and Snakemake's retry (profiles/default) resumes it; the results
    equal the uninterrupted run's (ci_workdir, every run). The data and the teacher are the CI run's
    (copied with their times and Snakemake's records: up to date, not rebuilt)."""
    import pandas as pd
    import yaml
    from conftest import snakemake_command

    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump({"build": PREEMPTED_RUNS, "diagnostics": {"runs": ["post-grow"]}}))
    env = {**os.environ, "NORMGROW_FAULT": "term@5"}
    work = tmp_path / "work"
    for kept in ("results/data", "results/teacher", ".snakemake/metadata"):
        shutil.copytree(ci_workdir / kept, work / kept, symlinks=True)  # copy2: modification times kept
    proc = subprocess.run(snakemake_command(work, "--cores", "2", "--configfile", str(REPO / "configs" / "ci.yaml"),
                                            str(runs), "--", "results/metrics/phases.csv", config=None),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "rule pretrain_teacher:" not in proc.stdout and "rule tokenize_corpus:" not in proc.stdout
    logs = list((work / "logs" / "train").glob("*.log"))
    assert len(logs) == 10  # the distinct phases of the four runs
    for log in logs:
        assert "resumed from the state at update 5" in log.read_text(), log
    for name in ("phases.csv", "evals.csv", "transitions.csv", "block_removal.csv"):
        got = pd.read_csv(work / "results" / "metrics" / name)
        want = pd.read_csv(ci_workdir / "results" / "metrics" / name)
        want = want[want["run"].isin(PREEMPTED_RUNS)].reset_index(drop=True)
        assert len(got) == len(want) > 0, name
        pd.testing.assert_frame_equal(got.drop(columns=["wall_seconds"], errors="ignore"),
                                      want.drop(columns=["wall_seconds"], errors="ignore"))


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_a_state_saved_again_at_the_same_update_is_hashed_again(tmp_path):
    """A job that found its state 4 damaged (and remembered so) and trains past update 4 again saves a
    good state 4: the store verifies the new files, not its memory of the old ones."""
    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    store = ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")))
    store.save(4, model, optimizer, {"update": 4})
    next((tmp_path / "state-4").glob("*.distcp")).write_bytes(b"")
    with pytest.raises(Exception, match="checksum mismatch"):
        store.latest_step()
    store.save(4, model, optimizer, {"update": 4})
    assert store.latest_step() == 4


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_clearing_a_finished_phase_removes_its_states_and_the_empty_directory(tmp_path):
    """After the phase has finished, its states and manifests go, and the resume directory with them once
    empty; a file of something else keeps the directory."""
    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for directory, other in ((tmp_path / "a", None), (tmp_path / "b", "notes.txt")):
        store = ResumeStore(directory, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")), keep=2)
        for step in (2, 4):
            store.save(step, model, optimizer, {"update": step})
        if other:
            (directory / other).write_text("kept")
        store.clear()
    assert not (tmp_path / "a").exists()
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["notes.txt"]


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP in one process, no group
def test_an_unreadable_manifest_does_not_count_among_the_states_kept(tmp_path):
    """keep = 2 with state 4's manifest unreadable: saving state 6 keeps state 2, the newest readable one
    before it, instead of counting the unreadable manifest as one of the two."""
    import torch

    from normgrow.train.distributed import Ranks
    from normgrow.train.resume import ResumeStore

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    store = ResumeStore(tmp_path, {"phase": "p"}, Ranks(0, 1, torch.device("cpu")), keep=2)
    for step in (2, 4):
        store.save(step, model, optimizer, {"update": step})
    (tmp_path / "state-4.json").write_text("{not json")
    store.save(6, model, optimizer, {"update": 6})
    assert (tmp_path / "state-2.json").is_file() and (tmp_path / "state-2").is_dir()
