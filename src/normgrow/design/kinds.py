"""Science or execution, declared once: every key of the config schema (config.schema.yaml) carries
`kind` — `science` (it changes what a job computes: a rerun trigger, part of a phase's key where it
reaches the phase, recorded in the report), `execution` (how a job runs: threads, resources, state
saving, chunking, compilation, checkpointing; changing it reruns nothing) or `mixed` (an object whose
properties each carry their own). A key inherits the kind of the nearest ancestor that has one; under
a `mixed` object every property must carry its own, and under a `science` or `execution` one none may
differ. The phase key (normgrow.design.curriculum), `Execution`, the rules' rerun triggers
(normgrow.design.config.science_config), the configuration reference (normgrow.design.configdoc) and the scripts
that read execution settings from the config, not from their rule's params, all follow from it.

Imports neither torch nor transformers (the DAG is built from it).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from importlib import resources

import yaml

SCHEMA = resources.files("normgrow.design") / "config.schema.yaml"  # package data: found in an installed package too
KINDS = ("science", "execution", "mixed")
KeyPath = tuple[str, ...]  # a key's path from the config's top level; "*" for any name of a map


class SchemaKindError(ValueError):
    """A schema key without a kind, or with one its ancestors do not allow."""


def _resolve(node: dict, root: dict) -> dict:
    while "$ref" in node:
        target = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _children(node: dict) -> Iterator[tuple[str, dict]]:
    yield from node.get("properties", {}).items()
    if isinstance(node.get("additionalProperties"), dict):
        yield "*", node["additionalProperties"]
    if isinstance(node.get("items"), dict):
        yield "[]", node["items"]


def walk(schema: dict) -> Iterator[tuple[KeyPath, str]]:
    """Every key of `schema` (a loaded config schema) with its kind, parents first; raises
    SchemaKindError naming the first key whose kind is missing or contradicts its ancestors'."""

    def visit(node: dict, path: KeyPath, inherited: str) -> Iterator[tuple[KeyPath, str]]:
        node = _resolve(node, schema)
        for name, sub in _children(node):
            key = (*path, name)
            own = _resolve(sub, schema).get("kind")
            dotted = ".".join(key)
            if own is not None and own not in KINDS:
                raise SchemaKindError(f"config schema: {dotted} has kind {own!r}, not one of {', '.join(KINDS)}")
            if inherited == "mixed" and own is None:
                raise SchemaKindError(f"config schema: {dotted} has no kind (science or execution), and its parent is "
                                      f"mixed: mark it")
            if inherited != "mixed" and own is not None and own != inherited:
                raise SchemaKindError(f"config schema: {dotted} is {own} under a {inherited} parent: mark the parent "
                                      f"mixed and each of its keys")
            kind = own or inherited
            yield key, kind
            yield from visit(sub, key, kind)

    yield from visit(schema, (), "mixed")


@cache
def kinds() -> dict[KeyPath, str]:
    """Every key of the package's config schema → its kind."""
    return dict(walk(yaml.safe_load(SCHEMA.read_text())))


def keys_of(section: KeyPath, kind: str) -> tuple[str, ...]:
    """The names of the keys directly under `section` (e.g. ("train",)) of `kind`, in schema order."""
    return tuple(path[-1] for path, k in kinds().items() if path[:-1] == section and k == kind)


def execution_keys() -> list[KeyPath]:
    """The outermost keys of kind execution (their children are execution too)."""
    marked = [path for path, kind in kinds().items() if kind == "execution"]
    return [path for path in marked if not any(path[:n] in marked for n in range(1, len(path)))]


def without_execution(config: dict) -> dict:
    """A copy of `config` (nested mappings copied, values shared) without its execution settings."""
    out = dict(config)
    for path in execution_keys():
        if "*" in path or "[]" in path:
            raise SchemaKindError(f"config schema: {'.'.join(path)}: execution keys inside maps or lists are not "
                                  f"supported")
        parent = out
        for part in path[:-1]:
            if not isinstance(parent.get(part), dict):
                break
            copied = dict(parent[part])
            parent[part] = copied
            parent = copied
        else:
            parent.pop(path[-1], None)
    return out
