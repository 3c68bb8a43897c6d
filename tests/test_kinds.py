"""Science or execution, declared once in the config schema (normgrow.design.kinds): every key has a kind, a
key without one is refused, and what the workflow treats as execution follows from the marks."""

import dataclasses

import pytest
import yaml

from normgrow.design.config import science_config
from normgrow.design.curriculum import TRAIN_SCIENCE, Training, phase_spec
from normgrow.design.execution import TRAIN_EXECUTION, Execution
from normgrow.design.kinds import SCHEMA, SchemaKindError, execution_keys, kinds, walk


def test_every_key_of_the_schema_has_a_kind():
    assert set(kinds().values()) <= {"science", "execution", "mixed"}
    assert ("train", "resume_every") in kinds() and kinds()[("runs", "*", "placement")] == "science"


@pytest.mark.parametrize("where", ["train", "teacher.pretrain", "(top level)"])
def test_a_new_key_without_a_kind_is_refused(where):
    schema = yaml.safe_load(SCHEMA.read_text())
    node = schema
    for part in [] if where == "(top level)" else where.split("."):
        node = node["properties"][part]
    node["properties"]["new_setting"] = {"type": "integer", "description": "a key nobody marked"}
    with pytest.raises(SchemaKindError, match="new_setting has no kind"):
        list(walk(schema))


def test_a_key_that_contradicts_its_parent_is_refused():
    schema = yaml.safe_load(SCHEMA.read_text())
    schema["properties"]["objective"]["properties"]["alpha"]["kind"] = "execution"
    with pytest.raises(SchemaKindError, match="objective.alpha is execution under a science parent"):
        list(walk(schema))


def test_a_science_key_under_an_execution_parent_is_refused():
    """Else it would drop out of the phase keys with its execution parent, silently."""
    schema = yaml.safe_load(SCHEMA.read_text())
    schema["properties"]["tracking"]["properties"]["project"]["kind"] = "science"
    with pytest.raises(SchemaKindError, match=r"tracking\.project is science under an? execution parent"):
        list(walk(schema))


def test_the_phase_key_execution_and_the_rerun_triggers_follow_the_marks(default):
    marked = set(execution_keys())
    assert {("threads",), ("resources",), ("tracking",), ("teacher", "pretrain", "threads")} <= marked
    assert {("train", k) for k in TRAIN_EXECUTION} == {p for p in marked if p[0] == "train"}
    assert set(TRAIN_SCIENCE) | set(TRAIN_EXECUTION) == set(default["train"])
    assert {f.name for f in dataclasses.fields(Training)} == set(TRAIN_SCIENCE) - {"phase_steps"}
    assert {f.name for f in dataclasses.fields(Execution)} - {"snapshots"} == {"threads", "tracking", *TRAIN_EXECUTION}
    science = science_config(default)
    for path in marked:
        parent = science
        for part in path[:-1]:
            parent = parent[part]
        assert path[-1] not in parent, path
    key = phase_spec(default, "pre-grow", 1, 0).key
    for path in marked:
        changed = yaml.safe_load(yaml.safe_dump(default))
        parent = changed
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = {"gpus": 1} if path == ("resources",) else 7
        assert phase_spec(changed, "pre-grow", 1, 0).key == key, path
