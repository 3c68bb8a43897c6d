"""The paper's reported numbers: the one reference file (reference.yaml, package data), used only to
set them beside ours in tables, claims and the regime, and to scale the start-gap precondition's threshold
(normgrow.paper.preconditions.start_gap: a multiple of the paper's largest effect)."""

from __future__ import annotations

from importlib import resources

import yaml


def paper_reference() -> dict:
    """The paper's reported numbers, for side-by-side display only."""
    return yaml.safe_load(resources.files(__package__).joinpath("reference.yaml").read_text())
