"""FSDP2 training on CPU with gloo: two ranks under torchrun against one process on the same global
batches, DCP resume states that move between rank counts, and the unsharded export."""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import (
    SHUTDOWN_TIMEOUT,
    make_teacher,
    only_the_finished_record_remains,
    phase_job,
    tiny_run_config,
    train_job,
    train_named,
    with_out,
    write_phase_inputs,
)
from safetensors.torch import load_file

from normgrow.cluster.launch import torchrun_command
from normgrow.model.student import BlockStackStudent
from normgrow.train.data import Batch, collate
from normgrow.train.distributed import Ranks, process_group, shard_student

STEPS = 8
LOSS_TOLERANCE = 1e-5   # fp32 losses, 2 ranks vs 1 process
WEIGHT_TOLERANCE = 1e-4  # parameters after several AdamW updates


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    """Tokens, a teacher, phase 0 of a 2-block grow run (one process) and phase 1's job."""
    root = tmp_path_factory.mktemp("distributed")
    # 5 validation documents: the last batch is not divisible by 2 ranks
    write_phase_inputs(root, seed=3, documents=40, longest=14, valid=5)
    config = tiny_run_config(phase_steps=STEPS, batch_size=4, resume_every=3, eval_every=4)
    config["curricula"] = {"grow": [{"active_blocks": 1}, {"active_blocks": 2}]}
    config["runs"] = {"post-grow": {"placement": "post", "curriculum": "grow"}}
    config["diagnostics"] = {"runs": ["post-grow"], "snapshots_per_phase": 2}
    setup = {"root": root, "config": config}
    setup["jobs"] = [phase_job(config, "post-grow", 7, phase, root) for phase in (0, 1)]
    proc = train(setup, "phase0", phase=0)
    assert proc.returncode == 0, proc.stdout[-3000:]
    setup["reference"] = root / "reference"
    proc = train(setup, "reference")
    assert proc.returncode == 0, proc.stdout[-3000:]
    return setup


def train(setup: dict, name: str, ranks: int = 1, phase: int = 1, fault: str | None = None,
          job: dict | None = None) -> subprocess.CompletedProcess:
    """Phase `phase` (its `job`, by default setup's) in one process, or in `ranks` ranks under torchrun (the
    launcher's command)."""
    root = setup["root"]
    return train_named(root, job or setup["jobs"][phase], name, root / "phase0" if phase else None, fault, ranks)


def changed(job: dict, part: str, **changes) -> dict:
    """A copy of a one-phase `job` with `changes` to its spec's `training` or its `execution` (`part`)."""
    job = json.loads(json.dumps(job))
    task = job["tasks"][0]
    (task["spec"]["training"] if part == "training" else task["execution"]).update(changes)
    return job


def assert_matches_reference(setup: dict, name: str) -> None:
    assert_matches(setup["root"] / name, setup["reference"])


def assert_matches(got: Path, want: Path) -> None:
    """Equal metrics, counters and weights within the fp32 tolerances of ranks vs one process."""
    for table in ("train.csv", "eval.csv"):
        a, b = pd.read_csv(got / table), pd.read_csv(want / table)
        assert list(a.columns) == list(b.columns) and len(a) == len(b)
        pd.testing.assert_frame_equal(a, b, check_exact=False, atol=LOSS_TOLERANCE, rtol=1e-6)  # ppl = exp(ce)
    state, reference = json.loads((got / "state.json").read_text()), json.loads((want / "state.json").read_text())
    for key in ("run_counters", "phase_counters", "data", "global_step"):
        assert state[key] == reference[key], key
    weights, reference_weights = load_file(got / "student.safetensors"), load_file(want / "student.safetensors")
    assert weights.keys() == reference_weights.keys()
    for key, value in reference_weights.items():
        assert weights[key].dtype == value.dtype and weights[key].shape == value.shape, key
        torch.testing.assert_close(weights[key], value, atol=WEIGHT_TOLERANCE, rtol=0, msg=key)
    snapshots = sorted(p.name for p in (got / "snapshots").iterdir())
    assert snapshots == sorted(p.name for p in (want / "snapshots").iterdir())
    assert only_the_finished_record_remains(got)
    assert not (got / ".spec.json").exists() and not (got / ".job.json").exists()


def test_rows_split_a_global_batch_and_complete_it_with_one_token_rows():
    ids = torch.arange(15, dtype=torch.int32).reshape(5, 3)  # the completion keeps the batch's dtypes
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]])
    batch = Batch(ids, mask)
    parts = [Ranks(r, 2, torch.device("cpu")).rows(batch, pad_id=99) for r in (0, 1)]
    assert torch.equal(torch.cat([p.input_ids for p in parts])[:5], ids)
    assert torch.equal(parts[1].input_ids[-1], torch.tensor([99, 99, 99]))
    assert parts[1].attention_mask[-1].tolist() == [1, 0, 0]  # one token: no loss position
    assert sum(p.tokens for p in parts) == batch.tokens + 1
    assert all((p.input_ids.dtype, p.attention_mask.dtype) == (ids.dtype, mask.dtype) for p in parts)  # completed too
    one = Ranks(0, 1, torch.device("cpu")).rows(batch, pad_id=99)
    assert torch.equal(one.input_ids, ids) and torch.equal(one.attention_mask, mask)


def test_a_rank_s_rows_are_as_wide_as_its_own_longest_document():
    """A global batch is padded to its longest document (9, on rank 0); every other rank's rows are cut to
    its own documents' longest, the same tokens (issue 58: they kept the global width)."""
    lengths = [2, 9, 3, 4, 1, 5, 2, 3]
    batch = collate([np.arange(1, n + 1) for n in lengths], pad_id=0)
    for rank in range(4):
        rows = Ranks(rank, 4, torch.device("cpu")).rows(batch, pad_id=0)
        own = lengths[2 * rank:2 * rank + 2]
        assert rows.input_ids.shape == (2, max(own))
        assert torch.equal(rows.input_ids, batch.input_ids[2 * rank:2 * rank + 2, :max(own)])
        assert rows.attention_mask.sum(1).tolist() == own


def test_two_ranks_match_one_process(setup):
    proc = train(setup, "two-ranks", ranks=2)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert json.loads((setup["root"] / "two-ranks" / "state.json").read_text())["ranks"] == 2
    assert_matches_reference(setup, "two-ranks")


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["activation_checkpointing", "padding_free"])
def test_an_execution_setting_on_two_ranks_gives_the_reference_training(setup, setting):
    """Activation checkpointing (recomputed activations) and train.padding_free (each rank lays its
    documents end to end, normgrow.train.data.Batch.packed) change how a phase runs, not what it
    learns: two ranks with the setting on match one process without it."""
    proc = train(setup, setting, ranks=2, job=changed(setup["jobs"][1], "execution", **{setting: True}))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert_matches_reference(setup, setting)


@pytest.mark.slow
def test_state_saved_by_two_ranks_resumes_with_one_and_with_two(setup):
    root = setup["root"]
    proc = train(setup, "preempted", ranks=2, fault="term@5")
    assert proc.returncode != 0
    assert "SIGTERM at update 5" in proc.stdout
    state = root / "preempted" / "resume" / "state-5"
    assert sorted(p.name for p in state.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]  # one shard per rank
    assert not (root / "preempted" / "state.json").exists()
    for ranks in (1, 2):
        name = f"resumed-with-{ranks}"
        shutil.copytree(root / "preempted", root / name)
        proc = train(setup, name, ranks=ranks)
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert "resumed from the state at update 5" in proc.stdout
        assert_matches_reference(setup, name)


@pytest.mark.slow
def test_a_batch_that_does_not_split_over_the_ranks_is_refused(setup):
    proc = train(setup, "odd", ranks=2, job=changed(setup["jobs"][1], "training", batch_size=3))
    assert proc.returncode != 0
    assert "train.batch_size (3) must be a multiple of the number of ranks (2)" in proc.stdout
    assert not (setup["root"] / "odd" / "student.safetensors").exists()


def test_multi_node_command_starts_one_torchrun_per_node_inside_srun():
    command = torchrun_command(8, 4, ["--job", "j.json"], SHUTDOWN_TIMEOUT)
    assert command[:5] == ["srun", "--nodes=4", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "bash"]
    script = command[-1]
    assert "--nnodes=4 --nproc_per_node=8 --rdzv_backend=c10d" in script
    assert '--rdzv_endpoint="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1):$((' in script
    assert script.endswith("-m normgrow.cli train-phase --job j.json")
    gpus = torchrun_command(8, 4, ["--job", "j.json"], SHUTDOWN_TIMEOUT, gpus_per_node=8, cpus_per_gpu=6)
    assert gpus[:6] == ["srun", "--nodes=4", "--ntasks-per-node=1", "--gpus-per-node=8", "--cpus-per-task=48",
                        "--kill-on-bad-exit=1"]  # each node's task holds the node's GPUs and their CPUs
    single = torchrun_command(2, 1, ["--job", "j.json"], SHUTDOWN_TIMEOUT)
    assert single[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def test_torchrun_gives_the_ranks_the_configured_grace_after_sigterm():
    """torchrun kills its ranks `--shutdown-timeout` seconds after it forwards a SIGTERM (torch's default:
    30 s, less than a paper-scale save): every launch passes resources.train.shutdown_timeout."""
    single = torchrun_command(2, 1, ["--job", "j.json"], 450)
    assert "--shutdown-timeout=450" in single[:single.index("normgrow.cli")]
    assert "--shutdown-timeout=450" in torchrun_command(8, 4, ["--job", "j.json"], 450)[-1].split(" -m normgrow")[0]


def test_a_gpu_job_uses_expandable_segments_unless_the_allocator_is_configured(monkeypatch):
    from normgrow.cluster.launch import job_environment

    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    assert job_environment(8)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert "PYTORCH_CUDA_ALLOC_CONF" not in job_environment(0)  # a CPU job
    monkeypatch.setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:512")  # the user's own setting stays
    assert "PYTORCH_CUDA_ALLOC_CONF" not in job_environment(8)


def test_the_rendezvous_port_is_the_jobs_own():
    """Two multi-node jobs whose allocations start on one node meet on different ports (from SLURM_JOB_ID)."""
    from normgrow.cluster.launch import RENDEZVOUS_PORT

    assert f":{RENDEZVOUS_PORT}\"" in torchrun_command(8, 2, ["--job", "j.json"], SHUTDOWN_TIMEOUT)[-1]
    ports = [int(subprocess.run(["bash", "-c", f"echo {RENDEZVOUS_PORT}"], env={"SLURM_JOB_ID": job}, text=True,
                                stdout=subprocess.PIPE, check=True).stdout) for job in ("812345", "812346")]
    assert ports[0] != ports[1] and all(1024 < port < 65536 for port in ports)


@pytest.mark.parametrize("visible, local_ranks", [(0, 1), (1, 2)])
def test_a_job_that_asked_for_gpus_and_sees_too_few_is_refused(monkeypatch, visible, local_ranks):
    """The launcher tells the ranks the GPUs per node the job asked for: none visible (CPU-only torch, a
    node without its devices), or fewer than the node's ranks, stops the job before it trains on the CPU."""
    from normgrow.train.distributed import ASKED_GPUS

    monkeypatch.setenv(ASKED_GPUS, "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_ranks))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    with pytest.raises(RuntimeError, match=f"asked for 8 GPU.* sees {visible} for {local_ranks} rank.*refusing"):
        with process_group():
            pass
    monkeypatch.setenv(ASKED_GPUS, "0")  # a CPU job: the world of one it always was
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with process_group() as ranks:
        assert ranks.device.type == "cpu"


LAUNCHER = """import json, sys
from pathlib import Path
from normgrow.cluster.launch import launch_phases
from normgrow.train.trainer import TrainingJob
job = TrainingJob.from_json(json.loads(Path(sys.argv[1]).read_text()))
sys.exit(launch_phases(job, sys.stdout, ranks_per_node=2, shutdown_timeout=int(sys.argv[2])))
"""


@pytest.mark.slow
@pytest.mark.parametrize("to", ["launcher", "launcher and torchrun"])
def test_a_40_second_save_after_sigterm_to_the_launcher_is_written_before_torchrun_kills_the_ranks(setup, to):
    """SIGTERM to the job's launcher (launch_phases, which forwards it to torchrun, which forwards it to the
    two ranks) while they train — or to both at once (SLURM signals every process of a job step: torchrun
    then gets a second SIGTERM, the launcher's, during its grace; torchrun's ranks have sessions of their
    own and get torchrun's): the ranks save a state that takes 40 s more (the slowsave fault: about a
    paper-scale 30.8 GB state's write and hash), longer than torchrun's own 30 s grace; with
    resources.train.shutdown_timeout (here 120 s) the state's manifest is written and the job exits 143."""
    root = setup["root"]
    name = "slow-save-" + to.replace(" ", "-")
    out = root / name
    job = with_out(changed(setup["jobs"][1], "execution", resume_every=1000), out, root / "phase0")
    (root / f"{name}.job.json").write_text(json.dumps(job))
    log_path = root / f"{name}.log"
    env = {**os.environ, "NORMGROW_FAULT": "slow@2000,slowsave@40000"}  # 2 s per update: SIGTERM lands mid-phase
    with log_path.open("w") as log:
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(root / f"{name}.job.json"), "120"],
                                    stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 300
        while f"0/{STEPS}" not in log_path.read_text() and launcher.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)  # rank 0's progress bar: the ranks train, with their SIGTERM handler on
        if to == "launcher":
            launcher.send_signal(signal.SIGTERM)
        else:
            os.killpg(launcher.pid, signal.SIGTERM)
        status = launcher.wait(timeout=300)
    text = log_path.read_text()
    assert status == 143, text[-4000:]
    assert "SIGTERM at update" in text, text[-4000:]
    manifests = list((out / "resume").glob("state-*.json"))
    assert len(manifests) == 1 and not (out / "state.json").exists(), text[-4000:]


@pytest.mark.slow
def test_bf16_compute_keeps_fp32_weights_and_tracks_the_fp32_loss(setup):
    proc = train(setup, "bf16", ranks=2, job=changed(setup["jobs"][1], "training", precision="bfloat16"))
    assert proc.returncode == 0, proc.stdout[-4000:]
    weights = load_file(setup["root"] / "bf16" / "student.safetensors")
    assert {w.dtype for w in weights.values()} == {torch.float32}  # sharded master weights stay fp32
    got = pd.read_csv(setup["root"] / "bf16" / "train.csv")["loss"]
    want = pd.read_csv(setup["reference"] / "train.csv")["loss"]
    assert (got - want).abs().max() < 0.05  # bf16 rounding, not a different training
    assert not got.equals(want)  # the layers really computed in bf16


def test_one_fp32_process_keeps_the_plain_module_and_bf16_is_sharded():
    """In a world of one, fp32 sharding would only add copies; bf16 still needs FSDP's casting."""
    from torch.distributed.fsdp import FSDPModule

    with process_group() as ranks:
        for precision, sharded in (("float32", False), ("bfloat16", True)):
            student = BlockStackStudent.from_teacher(make_teacher(), "pre", 2, 1, seed=0)
            shard_student(student, ranks, precision)
            assert isinstance(student, FSDPModule) == sharded
            assert isinstance(student.blocks[0][0], FSDPModule) == sharded


@pytest.mark.slow
def test_a_group_on_two_ranks_matches_its_phases_alone_and_resumes_after_sigterm(setup):
    """Phase 0 of pre- and post-norm grow (one batch stream) as a group of two students on one teacher
    forward, sharded over 2 ranks: each student matches its phase trained alone in one process; the
    group preempted at update 5 resumes on 2 ranks to the same result."""
    from normgrow.design.curriculum import phase_spec
    from normgrow.design.execution import Execution
    from normgrow.train.trainer import PhaseTask, TrainingJob

    root, config = setup["root"], copy.deepcopy(setup["config"])
    config["runs"]["pre-grow"] = {"placement": "pre", "curriculum": "grow"}
    alone = train(setup, "pre0", phase=0, job=phase_job(config, "pre-grow", 7, 0, root))
    assert alone.returncode == 0, alone.stdout[-3000:]

    def group(name: str, fault: str | None = None) -> subprocess.CompletedProcess:
        tasks = tuple(PhaseTask(phase_spec(config, run, 7, 0), Execution.from_config(config, snapshots), None,
                                root / name / run) for run, snapshots in (("pre-grow", 0), ("post-grow", 2)))
        job = TrainingJob(tasks, str(root / "teacher"), root / "tokens")
        return train_job(job.to_json(), root / f"{name}.json", fault, ranks=2)

    proc = group("group")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "group of 2 students on one teacher forward per batch" in proc.stdout
    assert_matches(root / "group" / "pre-grow", root / "pre0")
    assert_matches(root / "group" / "post-grow", root / "phase0")
    assert group("preempted-group", fault="term@5").returncode != 0
    proc = group("preempted-group")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert proc.stdout.count("resumed from the state at update 5") == 2
    for run in ("pre-grow", "post-grow"):
        assert_matches(root / "preempted-group" / run, root / "group" / run)
