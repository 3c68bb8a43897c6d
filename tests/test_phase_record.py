"""A finished phase's record (normgrow.design.phase_record): state.json read back as written, older records, and
files that are not records refused by name. The trainer's own records: tests/test_trainer.py."""

import json

import pytest
from conftest import phase_record

from normgrow.design.curriculum import DataPosition
from normgrow.design.phase_record import PhaseRecord, RunPosition


def test_a_record_reads_back_as_written_and_gives_where_its_run_stands(tmp_path):
    record = phase_record(global_step=7, data=DataPosition("stream", 40, 40), code=[{"digest": "0123"}])
    path = tmp_path / "state.json"
    path.write_text(json.dumps(record.to_json(), indent=2))
    assert PhaseRecord.read(path) == record
    assert record.position == RunPosition(7, DataPosition("stream", 40, 40), record.run_counters)
    counters = {"tokens": 10, "unique_tokens": 5, "active_layer_tokens": 40, "steps": 3}
    after = record.position.after(3, DataPosition("stream", 50, 50), counters)
    assert after.global_step == 10 and after.run_counters == {"tokens": 74, "unique_tokens": 69,
                                                              "active_layer_tokens": 296, "steps": 5}
    assert RunPosition().after(3, DataPosition(), counters).run_counters == counters


def test_a_record_written_before_phases_recorded_their_code_reads_with_none(tmp_path):
    state = phase_record().to_json()
    del state["code"]
    (tmp_path / "state.json").write_text(json.dumps(state))
    assert PhaseRecord.read(tmp_path / "state.json").code == []


@pytest.mark.parametrize(("text", "error", "message"), [
    (None, FileNotFoundError, "state.json: missing"),
    ("{", ValueError, "state.json: not JSON"),
    ("[]", ValueError, "state.json: not a phase record .* it lacks an object"),
    ('{"key": "k", "seed": 1}', ValueError, "it lacks phase, placement, active_blocks, .*, ranks\\)$")])
def test_a_file_that_is_not_a_record_is_refused_by_name(tmp_path, text, error, message):
    path = tmp_path / "state.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(error, match=message):
        PhaseRecord.read(path)


def test_a_record_with_keys_this_code_does_not_know_reads_without_them():
    """A record written by a later version (a field added since) still reads here, the new key left out."""
    record = phase_record()
    assert PhaseRecord.from_json({**record.to_json(), "added_later": 1}) == record
