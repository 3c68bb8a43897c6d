"""The paper's Fig. 1 and Fig. 2, drawn from the resolved config rather than from the paper, so that a
user's own placements and curricula are drawn as they run:

- Fig. 1 (`fig1_placements`): for every placement the run builds, one decoder layer of each of its
  layer kinds (Mix-LN has two) with each RMSNorm where normgrow.model.layout puts it relative to the
  residual adds — the attention and the MLP sub-layer — and the model-boundary norm (entry or final);
- Fig. 2 (`fig2_curricula`): every curriculum the run builds as phases × blocks (normgrow.design.curriculum):
  which blocks each phase trains, keeps frozen or has not yet activated, the blocks it appends (with
  the growth operator unless random), its data policy and its budget.

The data each drawing is made from (`layer_groups`, `curriculum_columns`) is computed first and
tested on its own (tests/test_schematics.py)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Circle, FancyBboxPatch, Patch, Rectangle  # noqa: E402

from normgrow.design.config import built_runs  # noqa: E402
from normgrow.design.curriculum import Phase, run_phases  # noqa: E402
from normgrow.model.layout import LAYOUTS, PLACEMENTS, SUBLAYERS, Layout, boundary, layer_kinds, residual_scale  # noqa: E402
from normgrow.paper.figures import save  # noqa: E402
from normgrow.paper.items import ITEMS  # noqa: E402
from normgrow.paper.roles import CURRICULUM_ROLES, curriculum_role  # noqa: E402

FONT = 8
SAVED = {"font.size": FONT, "savefig.dpi": 200, "savefig.bbox": "tight"}  # both schematics' style
COLORS = {"norm": "#F5C46B", "attn": "#A9D3F0", "mlp": "#9FDCC4", "io": "#E6E6E6"}  # Okabe–Ito, lightened
STATE_COLORS = {"trained": "#0072B2", "frozen": "#BBBBBB", "inactive": "#FFFFFF"}
STATE_TEXT = {"trained": "white", "frozen": "#333333", "inactive": "#999999"}
DATA_TEXT = {"continue": "data: continue", "reset": "data: reset to doc 0", "fresh": "data: fresh (unread)"}


# ---------------------------------------------------------------- what is drawn
def placements_used(config: dict) -> list[str]:
    """The placements of the built runs, in registry order (mix-ln@B after mix-ln, by B)."""
    used = {config["runs"][run]["placement"] for run in built_runs(config)}
    return sorted(used, key=lambda p: (PLACEMENTS.index(p.split("@")[0]), len(p), p))


def layer_groups(placement: str, blocks: int) -> list[tuple[str, range]]:
    """Consecutive blocks of the same layer kind under `placement`: (kind, blocks) in order, e.g.
    mix-ln@2 of 4 blocks → [("post", range(0, 2)), ("pre", range(2, 4))]."""
    groups: list[tuple[str, range]] = []
    for b, kind in enumerate(layer_kinds(placement, blocks)):
        if groups and groups[-1][0] == kind:
            groups[-1] = (kind, range(groups[-1][1].start, b + 1))
        else:
            groups.append((kind, range(b, b + 1)))
    return groups


def curricula_used(config: dict) -> dict[str, list[str]]:
    """Each curriculum of the built runs → its runs: joint and grow first (the paper's Fig. 2), then
    the other curriculum roles in their order (normgrow.paper.roles), then curricula without a role
    by name."""
    runs: dict[str, list[str]] = {}
    for run in sorted(built_runs(config)):
        runs.setdefault(config["runs"][run]["curriculum"], []).append(run)

    def order(name: str) -> tuple[int, str]:
        role = curriculum_role(run_phases(config, runs[name][0]), config["student"]["blocks"])
        ranks = ("joint", "grow", *(r for r in CURRICULUM_ROLES if r not in ("joint", "grow")))
        return (ranks.index(role) if role else len(ranks), name)

    return {name: runs[name] for name in sorted(runs, key=order)}


def block_states(phase: Phase, blocks: int) -> tuple[str, ...]:
    """Each block's state in `phase`: `trained`, `frozen` (active, not trained) or `inactive`."""
    trained = set(phase.trainable_blocks)
    return tuple("inactive" if b >= phase.active_blocks else "trained" if b in trained else "frozen"
                 for b in range(blocks))


@dataclass(frozen=True)
class PhaseColumn:
    """One phase of a curriculum as Fig. 2 draws it: each block's state, the blocks it appends and
    how (the growth operator's label, None for random), the data policy, the budget (updates,
    documents, at most `max_tokens` tokens) and whether its LR schedule continues the previous one."""

    index: int
    states: tuple[str, ...]
    appended: tuple[int, ...]
    growth: str | None
    data: str
    steps: int
    documents: int
    max_tokens: int
    lr_continued: bool


def curriculum_columns(config: dict, curriculum: str) -> list[PhaseColumn]:
    """The phases of `curriculum` under this config's student and budgets (normgrow.design.curriculum)."""
    run = next(r for r, spec in config["runs"].items() if spec["curriculum"] == curriculum)
    blocks, batch, length = config["student"]["blocks"], config["train"]["batch_size"], config["data"]["max_length"]
    return [PhaseColumn(p.index, block_states(p, blocks), p.appended,
                        p.growth.label if p.appended and p.growth.operator != "random" else None, p.data, p.steps,
                        p.steps * batch, p.steps * batch * length, p.schedule_offset > 0)
            for p in run_phases(config, run)]


# ---------------------------------------------------------------- Fig. 1: placements
# Fig. 1 is drawn on one canvas in data units at a fixed scale (INCH inches per unit), so that every
# box and label keeps its size whatever the number of placements and the height of their panels.
INCH = 0.58
BOX_W, BOX_H, LINE_H, BRANCH_X, GAP = 2.0, 0.5, 0.3, 2.35, 0.3
PANEL_W, PANEL_LEFT = 6.1, 1.9  # a panel's width, and the room left of its residual stream


def _box(ax, x: float, y: float, text: str, kind: str) -> float:
    """A box centred at x whose bottom is y, one line taller per extra line of text; returns its top."""
    height = BOX_H + LINE_H * text.count("\n")
    ax.add_patch(FancyBboxPatch((x - BOX_W / 2, y), BOX_W, height, boxstyle="round,pad=0,rounding_size=0.08",
                                facecolor=COLORS[kind], edgecolor="#444444", linewidth=0.8))
    ax.text(x, y + height / 2, text, ha="center", va="center", fontsize=FONT)
    return y + height


def _arrow(ax, x0: float, y0: float, x1: float, y1: float, head: bool = True) -> None:
    ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "-|>" if head else "-", "color": "#444444",
                                                    "linewidth": 0.9, "shrinkA": 0, "shrinkB": 0,
                                                    "mutation_scale": 8})


def _math(symbol: str) -> str:
    """A norm's symbol with its subscript set as math: N_ao → N$_\\mathrm{ao}$."""
    base, _, sub = symbol.partition("_")
    return f"{base}$_\\mathrm{{{sub}}}$"


def _branch_label(layout: Layout, sublayer: str) -> str:
    """A branch box's text: Attn or MLP, and the per-head q, k, v norms inside attention (HybridNorm)."""
    return layout.branch(sublayer).replace("_qkv", "\n(q, k, v RMSNorm)")


def _layer(ax, x: float, layout: Layout, y: float) -> float:
    """One decoder layer of `layout` on the stream at x from height y; returns the height it ends at."""
    branch = x + BRANCH_X
    for sublayer in SUBLAYERS:
        ax.plot([x], [y], "o", color="#444444", markersize=3)
        _arrow(ax, x, y, branch, y, head=False)
        top = y
        before, after = layout.at(sublayer, "input"), layout.at(sublayer, "output")
        items = [(f"RMSNorm {_math(before.symbol)}", "norm")] if before else []
        items += [(_branch_label(layout, sublayer), sublayer)]
        items += [(f"RMSNorm {_math(after.symbol)}", "norm")] if after else []
        for text, kind in items:
            _arrow(ax, branch, top, branch, top + GAP)
            top = _box(ax, branch, top + GAP, text, kind)
        add = top + GAP + 0.15
        _arrow(ax, branch, top, branch, add, head=False)
        _arrow(ax, branch, add, x + 0.15, add)
        _arrow(ax, x, y, x, add - 0.15)
        if layout.scaled_residual:
            ax.text(x - 0.08, (y + add) / 2, "×α", ha="right", va="center", fontsize=FONT, color="#B00000")
        ax.add_patch(Circle((x, add), 0.15, facecolor="white", edgecolor="#444444", linewidth=0.9))
        ax.text(x, add, "+", ha="center", va="center", fontsize=FONT + 1)
        y = add + 0.15
        if norm := layout.at(sublayer, "sum"):
            _arrow(ax, x, y, x, y + GAP)
            y = _box(ax, x, y + GAP, f"RMSNorm {_math(norm.symbol)}", "norm")
        y += GAP / 2
    return y


def _span(blocks: range) -> str:
    return f"block {blocks.start}" if len(blocks) == 1 else f"blocks {blocks.start}–{blocks.stop - 1}"


def _placement_panel(ax, x: float, y: float, placement: str, blocks: int, layers: int) -> float:
    """Embedding, boundary norm, one layer per layer kind and the LM head of `placement`, the
    residual stream at x from height y; returns the top."""
    y = _box(ax, x, y, "embedding (frozen)", "io")
    if boundary(placement) == "entry":
        _arrow(ax, x, y, x, y + GAP)
        y = _box(ax, x, y + GAP, f"RMSNorm {_math('N_entry')}", "norm")
    for kind, group in layer_groups(placement, blocks):
        _arrow(ax, x, y, x, y + GAP)
        start = y + GAP
        y = _layer(ax, x, LAYOUTS[kind], start)
        ax.plot([x - 1.1, x - 1.1], [start, y], color="#777777", linewidth=1)
        ax.text(x - 1.2, (start + y) / 2, f"{kind} layer × {len(group) * layers}\n({_span(group)})", rotation=90,
                ha="right", va="center", fontsize=FONT, color="#333333")
    if boundary(placement) == "final":
        _arrow(ax, x, y, x, y + GAP)
        y = _box(ax, x, y + GAP, f"RMSNorm {_math('N_final')}", "norm")
    _arrow(ax, x, y, x, y + GAP)
    return _box(ax, x, y + GAP, "LM head", "io")


def _equations(placement: str, blocks: int) -> list[str]:
    """Each layer kind's two updates (normgrow.model.layout.Layout.equation), prefixed by its blocks where
    the placement has more than one kind."""
    groups = layer_groups(placement, blocks)
    lines = []
    for kind, group in groups:
        prefix = f"{_span(group)}: " if len(groups) > 1 else ""
        for sublayer in SUBLAYERS:
            equation = LAYOUTS[kind].equation(sublayer)
            for norm in {n.symbol for n in LAYOUTS[kind].norms}:
                equation = equation.replace(norm + "(", _math(norm) + "(")
            lines.append(prefix + equation)
    return lines


def _title(placement: str, blocks: int, layers: int) -> str:
    """A panel's title: the placement and its boundary norm, and α where a layer scales its residual."""
    title = f"{placement}\nboundary norm: {boundary(placement)}"
    if any(LAYOUTS[kind].scaled_residual for kind, _ in layer_groups(placement, blocks)):
        title += f"\nα = (2N)$^{{1/4}}$ = {residual_scale(blocks * layers):.3g} (N = K·L = {blocks * layers})"
    return title


def placement_diagrams(config: dict, directory: Path) -> list[Path]:
    """Fig. 1: one panel per placement the run builds, three to a row, with each layer kind's
    equations beneath it."""
    blocks, layers = config["student"]["blocks"], config["student"]["layers_per_block"]
    placements = placements_used(config)
    cols = min(3, len(placements))
    rows = [placements[i:i + cols] for i in range(0, len(placements), cols)]
    with plt.rc_context(SAVED):
        fig = plt.figure()
        ax = fig.add_axes((0, 0, 1, 1))
        bottom = 0.0
        for row in reversed(rows):  # bottom-up: a row's height is known once it is drawn
            lines = max(len(_equations(p, blocks)) for p in row)
            base = bottom + LINE_H * lines + 0.4
            tops = []
            for i, placement in enumerate(row):
                x = PANEL_LEFT + i * PANEL_W
                top = _placement_panel(ax, x, base, placement, blocks, layers)
                ax.text(x + 0.3, base - 0.2, "\n".join(_equations(placement, blocks)), ha="center", va="top",
                        fontsize=FONT)
                title = _title(placement, blocks, layers)
                ax.text(x + 0.3, top + 0.3, title, ha="center", va="bottom", fontsize=FONT + 1, fontweight="bold")
                tops.append(top + 0.3 + 0.35 * (title.count("\n") + 1))
            bottom = max(tops) + 0.6
        label = ITEMS["fig1_placements"].label
        ax.text(cols * PANEL_W / 2, bottom + 0.2, f"{label}: where each RMSNorm sits in one decoder layer\n"
                "(residual stream on the left, branch on the right)", ha="center", va="bottom", fontsize=FONT + 2)
        width, height = cols * PANEL_W, bottom + 1.2
        ax.set_xlim(0, width)
        ax.set_ylim(0, height)
        ax.set_aspect("equal")
        ax.axis("off")
        fig.set_size_inches(width * INCH, height * INCH)
        return save(fig, directory / "fig1_placements")


# ---------------------------------------------------------------- Fig. 2: curricula
def _amount(n: int) -> str:
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}k" if n >= 1e4 else f"{n:,}"


def _phase_label(column: PhaseColumn) -> str:
    lines = [f"phase {column.index}", f"{column.steps:,} steps",
             f"{_amount(column.documents)} docs, ≤{_amount(column.max_tokens)} tokens", DATA_TEXT[column.data]]
    return "\n".join(lines + (["LR schedule continued"] if column.lr_continued else []))


def _curriculum_panel(ax, name: str, runs: list[str], columns: list[PhaseColumn], blocks: int, width: int) -> None:
    """One curriculum: a cell per phase and block, coloured by its state and outlined where the phase
    appends the block, each phase's budget and data policy beneath its column."""
    for column in columns:
        for b, state in enumerate(column.states):
            appended = b in column.appended
            ax.add_patch(Rectangle((column.index + 0.04, b + 0.06), 0.92, 0.88, facecolor=STATE_COLORS[state],
                                   edgecolor="black" if appended else "#999999", linewidth=2.0 if appended else 0.8,
                                   linestyle="--" if state == "inactive" else "-",
                                   hatch="///" if state == "frozen" else None))
            text = state + (f"\nappended: {column.growth}" if appended and column.growth else
                            "\nappended" if appended else "")
            ax.text(column.index + 0.5, b + 0.5, text, ha="center", va="center", fontsize=FONT - 0.5,
                    color=STATE_TEXT[state], fontweight="bold" if appended else "normal",
                    bbox={"facecolor": STATE_COLORS[state], "edgecolor": "none", "pad": 0.5}
                    if state == "frozen" else None)
    ax.set_xlim(0, width)
    ax.set_ylim(0, blocks)
    ax.set_xticks([c.index + 0.5 for c in columns], [_phase_label(c) for c in columns], fontsize=FONT - 0.5)
    ax.set_yticks([b + 0.5 for b in range(blocks)], [f"block {b}" for b in range(blocks)])
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title("\n".join(textwrap.wrap(f"{name} (runs: {', '.join(runs)})", 58)), fontsize=FONT + 1, loc="left")


def curriculum_timelines(config: dict, directory: Path) -> list[Path]:
    """Fig. 2: one panel per curriculum the run builds, phases left to right, blocks bottom to top."""
    blocks, layers = config["student"]["blocks"], config["student"]["layers_per_block"]
    curricula = curricula_used(config)
    columns = {name: curriculum_columns(config, name) for name in curricula}
    width = max(len(c) for c in columns.values())
    cols = 1 if width > 4 else min(2, len(curricula))  # long curricula: one panel a row
    rows = -(-len(curricula) // cols)
    with plt.rc_context(SAVED):
        fig, axes = plt.subplots(rows, cols, figsize=(0.9 + 1.5 * width * cols, (0.42 * blocks + 1.6) * rows + 0.6),
                                 squeeze=False)
        for ax, (name, runs) in zip(axes.flat, curricula.items(), strict=False):
            _curriculum_panel(ax, name, runs, columns[name], blocks, width)
        for ax in list(axes.flat)[len(curricula):]:
            ax.set_visible(False)
        legend = [Patch(facecolor=STATE_COLORS["trained"], edgecolor="#999999", label="active, trained"),
                  Patch(facecolor=STATE_COLORS["frozen"], edgecolor="#999999", hatch="///",
                        label="active, frozen"),
                  Patch(facecolor="white", edgecolor="#999999", linestyle="--", label="inactive"),
                  Patch(facecolor="white", edgecolor="black", linewidth=2.0, label="appended this phase")]
        fig.legend(handles=legend, loc="lower center", ncol=4, frameon=False, bbox_to_anchor=(0.5, 0))
        label = ITEMS["fig2_curricula"].label
        fig.suptitle(f"{label}: curricula of K = {blocks} blocks × L = {layers} layer{'s' * (layers > 1)}\n(the "
                     "embedding stays frozen; the boundary norm and LM head train in every phase)", fontsize=FONT + 2)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        return save(fig, directory / "fig2_curricula")


def schematics(config: dict, directory: Path) -> list[Path]:
    """Fig. 1 and Fig. 2 of this run's config into `directory` (PNG and PDF each)."""
    return placement_diagrams(config, directory) + curriculum_timelines(config, directory)
