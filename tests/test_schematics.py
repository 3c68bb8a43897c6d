"""The paper's Fig. 1 and Fig. 2 (normgrow.paper.schematics) drawn from the resolved config: each
placement's layout (normgrow.model.layout) against the equations written out by hand, a non-default
curriculum's phase × block states against known answers, and both figures written."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import REPO

from normgrow.design.config import science_config, validate_config
from normgrow.model.layout import LAYOUTS, SUBLAYERS, boundary
from normgrow.paper import schematics
from normgrow.paper.document import Figure, Heading
from normgrow.paper.reference import paper_reference
from normgrow.paper.report import report_document


# ---------------------------------------------------------------- Fig. 1's data: each layer kind's layout
def test_layouts_and_their_equations():
    """Where each placement puts its norms (the positions Fig. 1 draws and DecoderLayer follows), written
    as the equations docs/placements.md and tests/test_student.py's reference write out, and the boundary
    norm of each."""
    positions = {kind: sorted((n.sublayer, n.position, n.symbol) for n in layout.norms)
                 for kind, layout in LAYOUTS.items()}
    assert positions == {
        "pre": [("attn", "input", "N_a"), ("mlp", "input", "N_m")],
        "post": [("attn", "sum", "N_a"), ("mlp", "sum", "N_m")],
        "sandwich": [("attn", "input", "N_a"), ("attn", "output", "N_ao"), ("mlp", "input", "N_m"),
                     ("mlp", "output", "N_mo")],
        "deepnorm": [("attn", "sum", "N_a"), ("mlp", "sum", "N_m")],
        "hybridnorm": [("attn", "sum", "N_m")],
    }
    equations = {kind: [layout.equation(s) for s in SUBLAYERS] for kind, layout in LAYOUTS.items()}
    assert equations == {
        "pre": ["h ← h + Attn(N_a(h))", "h ← h + MLP(N_m(h))"],
        "post": ["h ← N_a(h + Attn(h))", "h ← N_m(h + MLP(h))"],
        "sandwich": ["h ← h + N_ao(Attn(N_a(h)))", "h ← h + N_mo(MLP(N_m(h)))"],
        "deepnorm": ["h ← N_a(α·h + Attn(h))", "h ← N_m(α·h + MLP(h))"],
        "hybridnorm": ["h ← N_m(h + Attn_qkv(h))", "h ← h + MLP(h)"],
    }
    assert {p: boundary(p) for p in (*LAYOUTS, "mix-ln", "mix-ln@2")} == {
        "pre": "final", "post": "entry", "sandwich": "final", "deepnorm": "entry", "hybridnorm": "final",
        "mix-ln": "final", "mix-ln@2": "final"}


def test_mix_ln_is_drawn_as_its_blocks_layer_kinds():
    assert schematics.layer_groups("mix-ln@2", 4) == [("post", range(0, 2)), ("pre", range(2, 4))]
    assert schematics.layer_groups("mix-ln", 3) == [("post", range(0, 1)), ("pre", range(1, 3))]
    assert schematics.layer_groups("mix-ln@5", 4) == [("post", range(0, 4))]
    assert schematics.layer_groups("sandwich", 4) == [("sandwich", range(0, 4))]


# ---------------------------------------------------------------- Fig. 2's data: a user's own curriculum
CUSTOM = [{"active_blocks": 1},
          {"active_blocks": 2, "trainable": "newest"},
          {"active_blocks": 3, "data": "reset", "growth": {"operator": "copy"}},
          {"active_blocks": 4, "trainable": "newest", "data": "fresh", "steps": 40, "lr_restart": False,
           "growth": {"operator": "ramp", "steps": 10}}]


@pytest.fixture(scope="module")
def config() -> dict:
    """The embedded default with a 4-block student, a curriculum of its own (a freeze, a reset, a
    copy, a ramp on fresh data with a shorter, continued LR schedule) under Mix-LN@2, and a
    sandwich joint run; validated and reduced as the workflow hands it to the report."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["student"]["blocks"] = 4
    config["curricula"] = {"joint": [{"active_blocks": 4}], "custom": copy.deepcopy(CUSTOM)}
    config["runs"] = {"mix-custom": {"placement": "mix-ln@2", "curriculum": "custom"},
                      "sandwich-joint": {"placement": "sandwich", "curriculum": "joint"},
                      "pre-joint": {"placement": "pre", "curriculum": "joint"}}
    config["build"] = ["mix-custom", "sandwich-joint"]
    config["diagnostics"]["runs"] = []
    return science_config(validate_config(config))


def test_a_custom_curriculum_is_drawn_phase_by_phase(config):
    batch, length = config["train"]["batch_size"], config["data"]["max_length"]

    def column(index, states, appended, growth, data, steps, continued=False):
        return schematics.PhaseColumn(index, tuple(states.split()), appended, growth, data, steps, steps * batch,
                           steps * batch * length, continued)

    assert schematics.curriculum_columns(config, "custom") == [
        column(0, "trained inactive inactive inactive", (), None, "continue", 100),
        column(1, "frozen trained inactive inactive", (1,), None, "continue", 100),
        column(2, "trained trained trained inactive", (2,), "copy", "reset", 100),
        column(3, "frozen frozen frozen trained", (3,), "ramp10", "fresh", 40, continued=True),
    ]
    assert [c.states for c in schematics.curriculum_columns(config, "joint")] == [("trained",) * 4]


def test_what_the_run_builds_is_drawn(config):
    """Only the built runs' placements and curricula (pre-joint is defined, not built); joint first."""
    assert schematics.placements_used(config) == ["sandwich", "mix-ln@2"]
    assert schematics.curricula_used(config) == {"joint": ["sandwich-joint"], "custom": ["mix-custom"]}


def test_both_figures_are_written_and_shown_near_the_top(config, tmp_path):
    paths = schematics.schematics(config, tmp_path)
    assert sorted(p.name for p in paths) == ["fig1_placements.pdf", "fig1_placements.png", "fig2_curricula.pdf",
                                             "fig2_curricula.png"]
    for path in paths:
        assert path.stat().st_size > 10_000, path
    pngs = [p for p in paths if p.suffix == ".png"]
    import pandas as pd

    blocks = report_document({"far": False, "scale": dict.fromkeys(paper_reference()["scale"], "-"), "regime": [],
                              "preconditions": [], "massive": pd.DataFrame(columns=["model"]),
                              "outside": [], "unmeasured": [], "claims": [], "margin": 0.01, "tables": [], "seeds": 3,
                              "not_built": {},
                              "schematics": pngs, "figures": [], "config": config,
                              "provenance": {"git commit": "abc", "packages": {}, "data": {}, "hub": {},
                                             "code": [], "current code": {"digest": "x", "torch": "t",
                                                                          "transformers": "t"},
                                             "code warning": ""}})
    figures = [b for b in blocks if isinstance(b, Figure)]
    assert [f.path.as_posix() for f in figures] == ["figures/fig1_placements.png", "figures/fig2_curricula.png"]
    assert figures[0].caption.startswith("Fig. 1 — ") and figures[1].caption.startswith("Fig. 2 — ")
    assert figures[0].caption.endswith("(PDF beside it in figures/)")
    headings = [b.text for b in blocks if isinstance(b, Heading)]
    assert headings.index("Placements and curricula") < headings.index("Claims")


def test_the_same_figure_is_the_same_bytes(config, tmp_path):
    """A figure drawn twice is written twice byte for byte (a PDF carries no creation date), so a rerun's
    figures compare equal to the first run's (docs/reliability.md, Determinism)."""
    import time

    first = {p.name: p.read_bytes() for p in schematics.schematics(config, tmp_path / "a")}
    time.sleep(1.1)  # the PDF's date has one-second resolution
    second = {p.name: p.read_bytes() for p in schematics.schematics(config, tmp_path / "b")}
    assert first == second
