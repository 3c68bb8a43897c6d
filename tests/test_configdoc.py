"""docs/configuration.md is generated from the config schema's descriptions (normgrow.design.configdoc): it is
current, every property of the schema has a description, and every key the shipped configs set has a row."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import REPO, SCHEMA

from normgrow.design.configdoc import COMMAND, render

DOC = REPO / "docs" / "configuration.md"
# Every JSON Schema keyword the schema uses. Anything else is most likely a stray key: in a YAML flow
# mapping, an unquoted comma in `description: a, b` ends the description and starts a key `b`.
KEYWORDS = {"$schema", "$defs", "$ref", "description", "type", "enum", "const", "default", "properties",
            "additionalProperties", "required", "propertyNames", "minProperties", "items", "minItems", "maxItems",
            "uniqueItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern", "if", "then",
            "else", "kind"}  # kind: science or execution, normgrow.design.kinds (an annotation JSON Schema ignores)
# Keys whose entries are user-chosen names: the reference writes them as `*`.
MAPS = {"curricula", "runs"}


def schemas(schema: dict, path: str = "#"):
    """(path, subschema) of the schema and every schema nested in it, $defs included."""
    yield path, schema
    for keyword in ("properties", "$defs"):
        for name, sub in schema.get(keyword, {}).items():
            yield from schemas(sub, f"{path}/{keyword}/{name}")
    for keyword in ("items", "additionalProperties", "propertyNames", "if", "then", "else"):
        if isinstance(schema.get(keyword), dict):
            yield from schemas(schema[keyword], f"{path}/{keyword}")


@pytest.fixture(scope="module")
def schema() -> dict:
    return yaml.safe_load(SCHEMA.read_text())


@pytest.fixture(scope="module")
def rendered() -> str:
    return render()


def test_configuration_md_is_current(rendered):
    assert DOC.read_text() == rendered, (
        "docs/configuration.md differs from the schema's descriptions (it is generated; do not edit it by hand): "
        f"edit src/normgrow/design/config.schema.yaml if needed, then run `{COMMAND}`")


def test_every_property_has_a_description(schema):
    missing = []
    for path, sub in schemas(schema):
        if "/if" in path:  # a condition names keys, it does not define them
            continue
        for name, prop in sub.get("properties", {}).items():
            if not str(prop.get("description") or "").strip():
                missing.append(f"{path}/properties/{name}")
        entry = sub.get("additionalProperties")
        if isinstance(entry, dict) and not str(entry.get("description") or "").strip():
            missing.append(f"{path}/additionalProperties")
    assert not missing, ("properties without a description in src/normgrow/design/config.schema.yaml:\n"
                         + "\n".join(missing))


def test_schema_has_no_stray_keys(schema):
    stray = [f"{path}: {key!r}" for path, sub in schemas(schema) for key in sub if key not in KEYWORDS]
    assert not stray, ("not JSON Schema keywords (an unquoted comma in a flow-style description?):\n"
                       + "\n".join(stray))


def leaf_keys(value, key: str = ""):
    """Dotted keys of the values a config sets: `*` for a map entry's name, `[]` for the items of a list."""
    if isinstance(value, dict) and value:
        for name, sub in value.items():
            yield from leaf_keys(sub, f"{key}.*" if key in MAPS else f"{key}.{name}" if key else name)
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        for item in value:
            yield from leaf_keys(item, f"{key}[]")
    else:
        yield key


def test_leaf_keys_of_the_default():
    keys = set(leaf_keys(yaml.safe_load((REPO / "config.yaml").read_text())))
    assert {"seeds", "data.source.sha256", "objective.alpha", "train.betas", "curricula.*[].active_blocks",
            "curricula.*[].trainable", "runs.*.placement", "runs.*.curriculum"} <= keys


@pytest.mark.parametrize("config", ["config.yaml", "configs/ci.yaml", "configs/mid.yaml", "configs/paper.yaml",
                                    "configs/placements.yaml"])
def test_every_key_of_a_shipped_config_has_a_row(config, rendered):
    keys = set(leaf_keys(yaml.safe_load((REPO / config).read_text())))
    documented = set(re.findall(r"^\| `([^`]+)` \|", rendered, re.M))
    assert not keys - documented, f"{config}: keys without a row in docs/configuration.md: {sorted(keys - documented)}"


def test_the_reference_names_every_supported_teacher_family(schema):
    """teacher.name's entry lists normgrow.model.family's families, every one (docs/configuration.md)."""
    from normgrow.model.family import SOURCES

    described = schema["properties"]["teacher"]["properties"]["name"]["description"]
    listed = re.search(r"families ([\w, ]+):", described).group(1).split(", ")
    assert listed == list(SOURCES)
