"""Tracking (normgrow.train.tracking): a phase's TensorBoard events and W&B offline records hold the values of
its train.csv and eval.csv; a phase killed after logging past its last state and resumed holds each
step once in TensorBoard; the config section names accelerate's trackers."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, RESUMABLE_EVERY, RESUMABLE_STEPS, train_named

from normgrow.design.execution import Tracking
from normgrow.train.tracking import flatten, run_name

STEPS, STATE_EVERY = RESUMABLE_STEPS, RESUMABLE_EVERY
KILLED_AT = 7  # the state at update 6 is the newest when update 7 is killed
TRAIN_KEYS = ("loss", "ce", "kd", "kd_soft", "lr", "grad_norm")
EVAL_KEYS = ("ce", "kd", "kd_soft", "ppl")


def train(resumable: dict, name: str, log_with: list[str], fault: str | None = None) -> subprocess.CompletedProcess:
    """conftest's resumable phase as the workflow's job runs it (`normgrow.cli train-phase`), tracked as `name`."""
    root, job = resumable["root"], resumable["job"]
    task = job["tasks"][0]
    tracked = {**task, "execution": {**task["execution"], "tracking": dataclasses.asdict(Tracking(
        tuple(log_with), str(root / "tracking"), "normgrow", {}, f"{name}/seed5/phase0"))}}
    return train_named(root, {**job, "tasks": [tracked]}, name, fault=fault, WANDB_SILENT="true")


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def tensorboard_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag's (step, value) as TensorBoard's reader shows it (purged steps dropped)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def wandb_history(directory: Path) -> list[dict]:
    """The history rows of W&B offline runs under `directory` (their .wandb files: a log of
    protobuf records in 32 KiB blocks, each chunk headed by CRC32, length and type)."""
    from wandb.proto import wandb_internal_pb2

    rows = []
    for path in sorted(directory.glob("wandb/offline-run-*/run-*.wandb")):
        raw, position, record = path.read_bytes(), 7, b""
        assert raw[:4] == b":W&B"
        while position + 7 <= len(raw):
            if 32768 - position % 32768 < 7:  # a block's tail too short for a header is padding
                position += 32768 - position % 32768
                continue
            _, length, kind = struct.unpack("<IHB", raw[position:position + 7])
            if kind == 0:
                break
            record += raw[position + 7:position + 7 + length]
            position += 7 + length
            if kind in (1, 4):  # a full record, or the last chunk of one
                parsed = wandb_internal_pb2.Record()
                parsed.ParseFromString(record)
                record = b""
                if parsed.WhichOneof("record_type") == "history":
                    rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                                 for item in parsed.history.item})
    return rows


def assert_scalars_equal_csv(scalars: dict, directory: Path) -> None:
    train, evals = read_csv(directory / "train.csv"), read_csv(directory / "eval.csv")
    for key in TRAIN_KEYS:
        want = [(int(row["global_step"]), np.float32(float(row[key]))) for row in train]
        assert [(s, np.float32(v)) for s, v in scalars[f"train/{key}"]] == want, key
    for key in EVAL_KEYS:
        want = [(int(row["global_step"]), np.float32(float(row[key]))) for row in evals]
        assert [(s, np.float32(v)) for s, v in scalars[f"eval/{key}"]] == want, key
    steps = [s for s, _ in scalars["train/tokens_per_s"]]
    assert steps == list(range(1, STEPS + 1))
    assert all(v > 0 for _, v in scalars["train/tokens_per_s"] + scalars["train/peak_memory_mb"])


def test_tensorboard_and_wandb_offline_hold_the_csv_values(resumable):
    pytest.importorskip("wandb")
    proc = train(resumable, "tracked", ["tensorboard", "wandb"])
    assert proc.returncode == 0, proc.stdout
    root = resumable["root"]
    assert_scalars_equal_csv(tensorboard_scalars(root / "tracking" / "normgrow" / "tracked" / "seed5" / "phase0"),
                             root / "tracked")
    history = wandb_history(root / "tracking")
    logged = {}
    for row in history:
        for key, value in row.items():
            if key.startswith(("train/", "eval/")):
                logged.setdefault(key, []).append((row["_step"], value))
    assert_scalars_equal_csv(logged, root / "tracked")
    for key in TRAIN_KEYS:  # W&B keeps the float64 values of train.csv exactly
        assert [v for _, v in logged[f"train/{key}"]] == [float(r[key]) for r in read_csv(root / "tracked" /
                                                                                        "train.csv")]


def test_a_phase_killed_and_resumed_holds_each_step_once_in_tensorboard(resumable):
    killed = train(resumable, "resumed", ["tensorboard"], fault=f"kill@{KILLED_AT}")
    assert killed.returncode == -9
    events = resumable["root"] / "tracking" / "normgrow" / "resumed" / "seed5" / "phase0"
    assert [s for s, _ in tensorboard_scalars(events)["train/loss"]] == list(range(1, KILLED_AT + 1))
    proc = train(resumable, "resumed", ["tensorboard"])
    assert proc.returncode == 0, proc.stdout
    assert "resumed from the state at update 6" in proc.stdout
    assert len(list(events.glob("events.out.tfevents.*"))) == 2  # the killed job's file, then the resumed one's
    assert_scalars_equal_csv(tensorboard_scalars(events), resumable["root"] / "resumed")


def test_tracking_off_writes_nothing(resumable):
    proc = train(resumable, "untracked", [])
    assert proc.returncode == 0, proc.stdout
    assert not (resumable["root"] / "tracking" / "normgrow" / "untracked").exists()


def test_the_schema_offers_accelerates_trackers():
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    schema = yaml.safe_load((REPO / "src" / "normgrow" / "design" / "config.schema.yaml").read_text())
    section = schema["properties"]["tracking"]
    assert section["kind"] == "execution"
    assert set(section["properties"]["log_with"]["items"]["enum"]) == set(LOGGER_TYPE_TO_CLASS)
    assert set(section["properties"]["init_kwargs"]["propertyNames"]["enum"]) == set(LOGGER_TYPE_TO_CLASS)


def test_run_names_and_flattened_configuration():
    assert run_name("post-grow seed 3 phase 2") == "post-grow/seed3/phase2"
    assert run_name("mix-ln@2 grow seed 1 phase 0") == "mix-ln@2 grow/seed1/phase0"
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": None, "e": True}) == {"a/b": 1, "a/c": "[1, 2]", "d": "None",
                                                                          "e": True}


@pytest.mark.slow
def test_the_ci_run_tracks_every_phase_and_the_teacher_in_tensorboard(ci_workdir):
    """The CI configuration run end to end (tracking at its default, TensorBoard): every phase's event
    files hold its train.csv and eval.csv, under the name of the first run sharing it; the teacher's
    pretraining logged every update."""
    from normgrow.design.config import merge, validate_config
    from normgrow.design.curriculum import PhaseTable

    config = merge(yaml.safe_load((REPO / "config.yaml").read_text()),
                   yaml.safe_load((REPO / "configs" / "ci.yaml").read_text()))
    table = PhaseTable.from_config(validate_config(config))
    tracking = ci_workdir / "results" / "tracking" / "normgrow"
    for key in table.specs:
        events = tracking / run_name(table.sharing(key)[0])
        phase = ci_workdir / "results" / "phases" / key
        scalars = tensorboard_scalars(events)
        train, evals = read_csv(phase / "train.csv"), read_csv(phase / "eval.csv")
        for name, rows, keys in (("train", train, TRAIN_KEYS), ("eval", evals, EVAL_KEYS)):
            for k in keys:
                want = [(int(row["global_step"]), np.float32(float(row[k]))) for row in rows]
                assert [(s, np.float32(v)) for s, v in scalars[f"{name}/{k}"]] == want, (key, name, k)
    teacher = tensorboard_scalars(tracking / "teacher" / "pretrain")["train/loss"]
    assert [s for s, _ in teacher] == list(range(1, config["teacher"]["pretrain"]["steps"] + 1))


def test_the_configuration_is_attached_once(resumable):
    """TensorBoard holds the phase spec as YAML text in the phase's own run (no second run per phase)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = resumable["root"] / "tracking" / "normgrow" / "tracked" / "seed5" / "phase0"
    assert [p.name for p in events.iterdir() if p.is_dir()] == []
    accumulator = EventAccumulator(str(events), size_guidance={"tensors": 0})
    accumulator.Reload()
    [text] = accumulator.Tensors("configuration/text_summary")
    attached = yaml.safe_load(text.tensor_proto.string_val[0].decode())
    assert attached["spec"]["placement"] == "post" and attached["execution"]["tracking"]["name"] == \
        "tracked/seed5/phase0"


# ---------------------------------------------------------------- the Tracker itself, in this process
class Recorder:
    """A tracker back-end that keeps what it is given."""

    name = "recorder"

    def __init__(self):
        self.logged: list[tuple[int, dict]] = []

    def log(self, values: dict, step: int) -> None:
        self.logged.append((step, values))

    def finish(self) -> None:
        pass


def test_only_the_main_rank_logs(tmp_path):
    """Every rank of a torchrun launch builds a Tracker; only the main one's writes anything."""
    import torch

    from normgrow.train.tracking import Tracker

    tracking = Tracking(("tensorboard",), str(tmp_path), "normgrow", {}, "run/seed1/phase0")
    row = {"loss": 1.0, "ce": 1.0, "kd": 1.0, "kd_soft": 1.0, "lr": 1e-3, "grad_norm": 1.0, "tokens": 10}
    for main in (False, True):
        tracker = Tracker(tracking, {"a": 1}, main, torch.device("cpu"))
        tracker.log_update(row, 1)
        tracker.log_eval({"ce": 1.0, "kd": 1.0, "kd_soft": 1.0, "ppl": 2.7}, 1)
        tracker.finish()
        written = list((tmp_path / "normgrow").rglob("events.out.tfevents.*"))
        assert len(written) == (1 if main else 0), main


def test_throughput_after_an_evaluation_leaves_the_evaluation_out(monkeypatch):
    """`train/tokens_per_s` of the update after an evaluation counts the time from the evaluation's end."""
    import types

    import torch

    from normgrow.train import tracking
    from normgrow.train.tracking import Tracker

    now = [0.0]
    monkeypatch.setattr(tracking, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    tracker = Tracker(Tracking(), {}, True, torch.device("cpu"))
    recorder = tracker.trackers = [Recorder()]
    row = {"loss": 1.0, "tokens": 100}
    now[0] = 2.0
    tracker.log_update(row, 1)  # 100 tokens in 2 s
    now[0] = 12.0
    tracker.log_eval({"ce": 1.0, "kd": 1.0, "kd_soft": 1.0, "ppl": 2.7}, 1)  # a 10 s evaluation
    now[0] = 16.0
    tracker.log_update(row, 2)  # 100 tokens in the 4 s after it
    rates = [values["train/tokens_per_s"] for _, values in recorder[0].logged if "train/tokens_per_s" in values]
    assert rates == [50.0, 25.0]


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident set from /proc")
def test_the_cpu_peak_memory_is_in_megabytes():
    """On a CPU the peak is the process's largest resident set: at least what it holds now (read from
    /proc, not from getrusage; the kernel's per-thread counters may lag by a few pages), and less than
    the machine's memory."""
    import torch

    from normgrow.train.tracking import peak_memory_mb

    page = os.sysconf("SC_PAGE_SIZE")
    resident_mb = int(Path("/proc/self/statm").read_text().split()[1]) * page / 2**20
    peak = peak_memory_mb(torch.device("cpu"))
    assert 0.9 * resident_mb <= peak <= page * os.sysconf("SC_PHYS_PAGES") / 2**20
