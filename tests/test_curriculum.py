"""The curriculum: phases from config, the phase spec, and phase identity (which phases are the same)."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SCHEMA, phase_record

from normgrow.design import curriculum
from normgrow.design.config import science_config, validate_config
from normgrow.design.curriculum import (
    DataPosition,
    PhaseSpec,
    PhaseTable,
    phase_spec,
    phase_start_position,
    run_phases,
    stream_key,
)
from normgrow.design.execution import Execution, Tracking


# ---------------------------------------------------------------- phases
def test_run_phases_fill_defaults_and_restart_the_schedule(default):
    phases = run_phases(default, "post-grow")
    assert [p.active_blocks for p in phases] == [1, 2, 3]
    for i, phase in enumerate(phases):
        assert phase.index == i
        assert phase.trainable == "all"
        assert phase.data == "continue"
        assert phase.steps == 100
        assert phase.schedule_offset == 0
        assert phase.schedule_length == 100
    assert [p.trainable for p in run_phases(default, "pre-freeze")] == ["newest"] * 3
    assert [p.data for p in run_phases(default, "pre-grow-reset")] == ["reset"] * 3
    assert [p.data for p in run_phases(default, "post-joint-longer")] == ["continue", "fresh", "fresh"]


def test_run_phases_do_not_change_the_config(default):
    before = copy.deepcopy(default)
    run_phases(default, "post-grow")
    assert default == before


def test_run_phases_with_steps_override(default):
    default["curricula"]["grow"][1]["steps"] = 40
    phases = run_phases(default, "pre-grow")
    assert [p.steps for p in phases] == [100, 40, 100]
    assert [p.schedule_length for p in phases] == [100, 40, 100]


def test_lr_restart_false_continues_the_schedule(default):
    default["curricula"]["two"] = [{"active_blocks": 3, "steps": 100},
                                   {"active_blocks": 3, "steps": 60, "lr_restart": False}]
    default["runs"]["post-two"] = {"placement": "post", "curriculum": "two"}
    validate_config(default, SCHEMA)
    phases = run_phases(default, "post-two")
    assert [p.schedule_offset for p in phases] == [0, 100]
    assert [p.schedule_length for p in phases] == [160, 160]


def test_lr_restart_segments(default):
    default["curricula"]["mix"] = [{"active_blocks": 1, "steps": 10},
                                   {"active_blocks": 2, "steps": 20, "lr_restart": False},
                                   {"active_blocks": 3, "steps": 30},
                                   {"active_blocks": 3, "steps": 40, "lr_restart": False},
                                   {"active_blocks": 3, "steps": 50, "lr_restart": False}]
    default["runs"]["mix"] = {"placement": "pre", "curriculum": "mix"}
    phases = run_phases(validate_config(default, SCHEMA), "mix")
    assert [p.schedule_offset for p in phases] == [0, 10, 0, 30, 70]
    assert [p.schedule_length for p in phases] == [30, 30, 120, 120, 120]


def test_first_phase_without_lr_restart_starts_a_schedule(default):
    default["curricula"]["joint"][0]["lr_restart"] = False
    phases = run_phases(default, "pre-joint")
    assert phases[0].schedule_offset == 0 and phases[0].schedule_length == 100


def test_phase_spec_round_trips_through_json(default):
    spec = phase_spec(default, "post-joint-long", "42", "1")
    again = PhaseSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec and again.key == spec.key
    assert spec.seed == 42 and spec.index == 1 and spec.placement == "post"
    assert spec.shard_docs == 100 * 14
    assert len(spec.phases) == 2 and spec.phase.data == "fresh"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1


def test_trainable_blocks():
    def blocks(active, trainable):
        return run_phases({"train": {"phase_steps": 5}, "runs": {"r": {"curriculum": "c"}},
                           "curricula": {"c": [{"active_blocks": active, "trainable": trainable}]}}, "r")[0]
    assert blocks(3, "newest").trainable_blocks == (2,)
    assert blocks(3, "all").trainable_blocks == (0, 1, 2)
    assert blocks(1, "newest").trainable_blocks == (0,)


def test_phase_start_positions():
    read = DataPosition(mode="shard", position=1500, high_water=1200)
    assert phase_start_position("continue", read) == read
    assert phase_start_position("reset", read) == DataPosition("shard", 0, 1200)
    assert phase_start_position("fresh", read) == DataPosition("stream", 1200, 1200)
    with pytest.raises(ValueError, match="shuffle"):
        phase_start_position("shuffle", read)


# ---------------------------------------------------------------- identity
def keys(config: dict) -> dict[tuple[str, int], list[str]]:
    return PhaseTable.from_config(config).runs


def test_default_config_has_18_distinct_phases_of_25(default):
    table = PhaseTable.from_config(default)
    assert sum(len(k) for k in table.runs.values()) == 25
    assert len(table.specs) == 18
    runs = table.runs
    for placement in ("pre", "post"):
        # phase 0 of grow, freeze (one active block: newest is all) and grow-reset (reset at 0 is continue)
        assert runs[(f"{placement}-grow", 42)][0] == runs[(f"{placement}-freeze", 42)][0] \
            == runs[(f"{placement}-grow-reset", 42)][0]
        assert len({runs[(f"{placement}-{c}", 42)][1] for c in ("grow", "freeze", "grow-reset")}) == 3
        assert runs[(f"{placement}-joint", 42)][0] != runs[(f"{placement}-grow", 42)][0]
    assert runs[("post-joint", 42)] == runs[("post-joint-long", 42)][:1] == runs[("post-joint-longer", 42)][:1]
    assert runs[("post-joint-long", 42)] == runs[("post-joint-longer", 42)][:2]
    assert runs[("pre-joint", 42)] != runs[("post-joint", 42)]  # the placement is part of the identity


def test_shared_phase_keeps_the_most_snapshots(default):
    table = PhaseTable.from_config(default)
    shared = table.runs[("post-grow", 42)][0]  # diagnosed; shared with post-freeze (not diagnosed)
    assert table.snapshots[shared] == 3
    assert table.snapshots[table.runs[("post-freeze", 42)][1]] == 0
    assert "post-freeze seed 42 phase 0" in table.sharing(shared)


@pytest.mark.parametrize("change", [
    lambda c: c.update(threads=2),
    lambda c: c["train"].update(resume_every=7),
    lambda c: c["train"].update(loss_chunk=100),
    lambda c: c["train"].update(compile=True, activation_checkpointing=True),
    lambda c: c["resources"]["train"].update(gpus=4),
    lambda c: c["teacher"].update(min_margin_nats=0.1),
    lambda c: c.update(runs={f"renamed-{run}": spec for run, spec in c["runs"].items()}),
    lambda c: c["teacher"]["pretrain"].update(threads=1),
    lambda c: c["objective"].update(temperature=1, alpha=0.7),  # 1 and 1.0 are the same setting
    lambda c: c["train"].update(weight_decay=0),
])
def test_execution_settings_and_names_do_not_change_keys(default, change):
    before = sorted(PhaseTable.from_config(default).specs)
    changed = copy.deepcopy(default)
    change(changed)
    assert sorted(PhaseTable.from_config(changed).specs) == before


@pytest.mark.parametrize("change", [
    lambda c: c["train"].update(lr=2e-3),
    lambda c: c["train"].update(batch_size=4),
    lambda c: c["train"].update(phase_steps=120),
    lambda c: c["train"].update(precision="bfloat16"),
    lambda c: c["train"].update(eval_every=25),
    lambda c: c["objective"].update(alpha=0.5),
    lambda c: c["student"].update(layers_per_block=3),
    lambda c: c["student"].update(boundary_norm_init="identity"),
    lambda c: c["teacher"]["pretrain"].update(steps=10),
    lambda c: c["data"].update(max_length=64),
    lambda c: c["tokenizer"].update(vocab_size=2048),
    lambda c: c.update(seeds=[7]),
])
def test_science_changes_every_key(default, change):
    before = set(PhaseTable.from_config(default).specs)
    changed = copy.deepcopy(default)
    change(changed)
    assert not before & set(PhaseTable.from_config(changed).specs)


def test_the_papers_boundary_norm_init_keeps_the_keys_phases_had_before_the_key(default):
    """student.boundary_norm_init at `teacher` (the default, the paper's) leaves every phase key as it was
    before the key existed, so that finished phases are not retrained; `identity` is other phases
    (test_science_changes_every_key)."""
    assert default["student"]["boundary_norm_init"] == "teacher"
    before = copy.deepcopy(default)
    del before["student"]["boundary_norm_init"]
    assert set(PhaseTable.from_config(before).specs) == set(PhaseTable.from_config(default).specs)


def test_build_keeps_keys_and_snapshots(default):
    """Building a subset of the runs neither renames nor re-snapshots the phases it shares."""
    full = PhaseTable.from_config(default)
    subset = PhaseTable.from_config({**default, "build": ["post-joint-long", "post-freeze"]})
    assert set(subset.runs) == {("post-joint-long", 42), ("post-freeze", 42)}
    assert len(subset.specs) == 5
    for key in subset.specs:
        assert subset.snapshots[key] == full.snapshots[key]
    assert subset.snapshots[subset.runs[("post-freeze", 42)][0]] == 3  # shared with post-grow, diagnosed


def test_a_named_teacher_ignores_the_pretraining_recipe(default):
    named = copy.deepcopy(default)
    named["teacher"]["name"] = "Qwen/Qwen3-0.6B-Base"
    other = copy.deepcopy(named)
    other["teacher"]["pretrain"]["steps"] = 5
    assert set(PhaseTable.from_config(named).specs) == set(PhaseTable.from_config(other).specs)


def hub_config(default: dict, teacher_revision=None, data_revision=None) -> dict:
    """The default with a hub teacher and a hub dataset at the given revisions (validated, as the DAG sees it)."""
    config = copy.deepcopy(default)
    config["teacher"].update(name="Qwen/Qwen3-0.6B-Base", revision=teacher_revision)
    config["data"]["source"] = {"loader": "datasets", "path": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT",
                                "streaming": True, "text_field": "text", "revision": data_revision}
    return validate_config(config, SCHEMA)


def test_a_revision_of_the_teacher_or_the_data_changes_every_key(default):
    """teacher.revision and data.source.revision are science: another snapshot is another phase. A null
    revision is no revision (the default branch): the keys of configs that name none stay as they were."""
    unpinned = set(PhaseTable.from_config(hub_config(default)).specs)
    sha = "0123456789abcdef0123456789abcdef01234567"
    for pinned in (hub_config(default, teacher_revision=sha), hub_config(default, data_revision=sha)):
        assert not unpinned & set(PhaseTable.from_config(pinned).specs)
    assert set(PhaseTable.from_config(hub_config(default, sha)).specs) != set(
        PhaseTable.from_config(hub_config(default, sha[::-1])).specs)
    left_out = copy.deepcopy(hub_config(default))
    assert "revision" not in left_out["teacher"] and "revision" not in left_out["data"]["source"]
    assert set(PhaseTable.from_config(left_out).specs) == unpinned


def test_extending_a_curriculum_keeps_its_prefix(default):
    extended = copy.deepcopy(default)
    extended["curricula"]["grow-more"] = [*default["curricula"]["grow"], {"active_blocks": 3, "data": "fresh"}]
    extended["runs"]["post-grow-more"] = {"placement": "post", "curriculum": "grow-more"}
    table = PhaseTable.from_config(extended)
    assert table.runs[("post-grow-more", 42)][:3] == table.runs[("post-grow", 42)]
    assert len(table.specs) == 19


def test_lr_restart_false_changes_the_earlier_phase(default):
    """A phase whose schedule continues into the next one is not the standalone phase."""
    changed = copy.deepcopy(default)
    changed["curricula"]["grow"][1]["lr_restart"] = False
    table, before = PhaseTable.from_config(changed), PhaseTable.from_config(default)
    assert table.runs[("post-grow", 42)][0] != before.runs[("post-grow", 42)][0]
    assert table.runs[("post-freeze", 42)][0] == before.runs[("post-freeze", 42)][0]


# Every part of what a phase reads (the stream identity): changing any one gives other batches or
# other teacher outputs, so the phase must not train on another's stream.
STREAM_CHANGES = {
    "seed": lambda s: dataclasses.replace(s, seed=s.seed + 1),
    "shard_docs": lambda s: dataclasses.replace(s, shard_docs=s.shard_docs + 1),
    "batch_size": lambda s: dataclasses.replace(s, training=dataclasses.replace(s.training, batch_size=3)),
    "eval_every": lambda s: dataclasses.replace(s, training=dataclasses.replace(s.training, eval_every=7)),
    "teacher_dtype": lambda s: dataclasses.replace(s, teacher_dtype="bfloat16"),
    "attn_implementation": lambda s: dataclasses.replace(s, student={**s.student, "attn_implementation": "eager"}),
    "upstream": lambda s: dataclasses.replace(s, upstream={**s.upstream, "tokenizer": {"vocab_size": 7}}),
    "data policy": lambda s: dataclasses.replace(
        s, phases=(*s.phases[:-1], dataclasses.replace(s.phases[-1], data="fresh"))),
    "earlier phase's budget": lambda s: dataclasses.replace(
        s, phases=(dataclasses.replace(s.phases[0], steps=7), *s.phases[1:])),
}


@pytest.mark.parametrize("field", list(STREAM_CHANGES))
def test_phases_that_read_other_batches_never_share_a_stream(default, field):
    spec = phase_spec(default, "post-grow", 42, 1)
    assert stream_key(STREAM_CHANGES[field](spec)) != stream_key(spec)


def test_phases_of_different_seeds_are_never_grouped(default):
    table = PhaseTable.from_config({**default, "seeds": [1, 2]})
    groups = table.groups(8)
    assert groups  # pre- and post-norm of one seed share their batches
    for group in groups:
        assert len({table.specs[key].seed for key in group.keys}) == 1, group


def test_the_document_order_enters_every_phase_key_and_stream(default, monkeypatch):
    """Results read in another order (normgrow.train.data.epoch_permutation, pinned in test_data) are
    never taken for these: the order's salt is part of the phase key and the stream key."""
    spec = phase_spec(default, "post-grow", 42, 1)
    key, stream = spec.key, stream_key(spec)
    monkeypatch.setattr(curriculum, "DOCUMENT_ORDER", "every epoch of the shard in another order")
    assert spec.key != key and stream_key(spec) != stream


# How the appended blocks start (curriculum `growth`); None and `random` are the paper's.
GROWTHS = [{"operator": "zero"}, {"operator": "zero", "from": "copy"}, {"operator": "copy"},
           {"operator": "ramp", "steps": 10}, {"operator": "ramp", "steps": 20}, None]


def test_every_growth_operator_and_setting_is_its_own_phase(default):
    """Two grow runs that differ only in how phase 1's block starts share phase 0, and no later phase."""
    runs = []
    for growth in [*GROWTHS, {"operator": "random"}]:
        config = copy.deepcopy(default)
        config["curricula"]["grow"][1].pop("growth", None)
        if growth is not None:
            config["curricula"]["grow"][1]["growth"] = growth
        runs.append([spec.key for spec in [phase_spec(config, "post-grow", 42, p) for p in range(3)]])
    assert len({run[0] for run in runs}) == 1
    assert runs[-1] == runs[-2]  # `random` is the default
    for later in (1, 2):
        assert len({run[later] for run in runs[:-1]}) == len(GROWTHS)


def test_execution_from_config(default):
    execution = Execution.from_config(default, snapshots=3, tracked_as="post-grow/seed42/phase1")
    assert execution == Execution(threads=1, resume_every=50, loss_chunk=4096, compile=False,
                                  activation_checkpointing=False, snapshots=3,
                                  tracking=Tracking(("tensorboard",), "results/tracking", "normgrow", {},
                                                    "post-grow/seed42/phase1"))
    assert Execution.from_json(dataclasses.asdict(execution)) == execution


def test_science_config_drops_execution_settings(default):
    science = science_config(default)
    assert "threads" not in science and "resources" not in science
    assert "resume_every" not in science["train"] and science["train"]["lr"] == default["train"]["lr"]


def test_phases_command_lists_every_run_phase_and_what_it_shares(capsys):
    from normgrow.cli import main

    assert main(["phases", str(REPO / "config.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "18 distinct phases of 25 run phases"
    freeze = next(line for line in lines if line.startswith("post-freeze seed 42 phase 0: results/phases/"))
    assert "shared with post-grow seed 42 phase 0, post-grow-reset seed 42 phase 0" in freeze
    assert len(lines) == 26


def test_phases_command_lists_the_phases_trained_by_other_code(capsys, tmp_path, monkeypatch):
    """`phases --other-code`: the state.json of each finished phase of the config whose code is not the
    checkout's (to --forcerun them after a code fix); unfinished phases and other directories are left out."""
    from normgrow.cli import main
    from normgrow.design.science_code import record

    keys = list(PhaseTable.from_config(validate_config(yaml.safe_load((REPO / "config.yaml").read_text()),
                                                       SCHEMA)).specs)
    codes = {keys[0]: [record()], keys[1]: [{**record(), "digest": "0" * 16}], keys[2]: [{"digest": "x"}, record()],
             keys[3]: None, "0123456789abcdef": [{"digest": "0" * 16}]}
    for key, code in codes.items():
        (tmp_path / "results" / "phases" / key).mkdir(parents=True)
        state = phase_record(key=key, code=code).to_json()
        if code is None:  # a record written before phases recorded their code
            del state["code"]
        (tmp_path / "results" / "phases" / key / "state.json").write_text(json.dumps(state))
    monkeypatch.chdir(tmp_path)
    assert main(["phases", str(REPO / "config.yaml"), "--other-code"]) == 0
    assert sorted(capsys.readouterr().out.split()) == sorted(f"results/phases/{key}/state.json" for key in keys[1:4])


def test_a_training_job_is_named_for_its_run_phases(default):
    """normgrow.design.job_names.job_name: the runs sharing a job's phases, its seed and phase index, then its
    id; a group names the runs of all its phases; past JOB_NAME_LENGTH the runs left out are counted."""
    from normgrow.design.curriculum import PhaseGroup
    from normgrow.design.job_names import JOB_NAME_LENGTH, job_name, job_names

    table = PhaseTable.from_config(default)
    shared = table.runs[("post-grow", 42)][0]
    assert job_name(table, PhaseGroup((shared,))) == (f"train_post-grow+post-freeze+post-grow-reset_seed42_phase0_"
                                                     f"{shared}")
    alone = table.runs[("post-grow", 42)][2]
    assert job_names(table, 1)[alone] == f"train_post-grow_seed42_phase2_{alone}"
    pair = PhaseGroup((table.runs[("pre-grow", 42)][1], table.runs[("post-grow", 42)][1]))
    assert job_name(table, pair) == f"train_pre-grow+post-grow_seed42_phase1_{pair.id}"
    many = dataclasses.replace(table, runs={(f"run-{i:03d}-{'x' * 20}", 42): [shared] for i in range(20)})
    name = job_name(many, PhaseGroup((shared,)))
    assert len(name) <= JOB_NAME_LENGTH and name.startswith("train_run-000-")
    assert name.endswith(f"more_seed42_phase0_{shared}")
    assert int(re.search(r"\+(\d+)more_", name).group(1)) == 20 - name.count("run-")


def test_phases_command_names_the_job_of_one_run_phase_from_the_config_alone(capsys, tmp_path, monkeypatch):
    """`phases --run R --seed S --phase P` in an empty directory (nothing has run): the phase's directory and job,
    as the paper config's workflow names it; `--jobs` prints the job alone; a run phase the config lacks is one
    line on stderr and exit status 1."""
    from normgrow.cli import main, read_configs

    monkeypatch.chdir(tmp_path)
    paper = str(REPO / "configs" / "paper.yaml")
    assert main(["phases", paper, "--run", "post-grow", "--seed", "42", "--phase", "2"]) == 0
    header, line = capsys.readouterr().out.splitlines()
    assert header == "18 distinct phases of 25 run phases"
    key = re.fullmatch(r"post-grow seed 42 phase 2: results/phases/([0-9a-f]{16}), job train_post-grow_seed42_phase2_"
                       r"\1", line).group(1)
    assert key == PhaseTable.from_config(read_configs([Path(paper)])).runs[("post-grow", 42)][2]
    assert main(["phases", str(REPO / "config.yaml"), paper, "--run", "post-freeze", "--phase", "0", "--jobs"]) == 0
    shared = PhaseTable.from_config(read_configs([Path(paper)])).runs[("post-freeze", 42)][0]
    assert capsys.readouterr().out.split() == [f"train_post-grow+post-freeze+post-grow-reset_seed42_phase0_{shared}"]
    assert main(["phases", paper, "--run", "post-grow", "--seed", "7"]) == 1
    assert capsys.readouterr().err.startswith("no run phase of these config files is run post-grow seed 7 phase any")
