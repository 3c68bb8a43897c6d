"""The registry of placements and where each puts its RMSNorms, as data: the registered names, the
layer kind of every block, the model-boundary norm, and a declarative layout of each layer kind.
Torch-free, so that the config check and the report (normgrow.paper.schematics draws the paper's
Fig. 1 from it) read it without loading a model. It is where each placement is described, once:
normgrow.model.student.DecoderLayer builds a layer of each kind from its layout and follows it in its
forward (tests/test_student.py checks every placement's forward against the equations written out by
hand, tests/test_schematics.py the equations `Layout.equation` writes).

A decoder layer is two residual sub-layers, attention then MLP; each adds a branch F to the
residual stream h. An RMSNorm sits at one of three positions of a sub-layer:

    input    on the branch's input                    h ← h + F(N(h))     (pre-norm)
    output   on the branch's output, before the add   h ← h + N(F(h))     (sandwich's second norm)
    sum      on the residual sum                      h ← N(h + F(h))     (post-norm)

DeepNorm up-weights the residual term to α·h; HybridNorm also normalises every head's queries, keys
and values inside attention (`qkv_norm`). The model-boundary norm is `final` (after the last active
layer) or `entry` (on the embedding output).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SUBLAYERS = ("attn", "mlp")
BRANCHES = {"attn": "Attn", "mlp": "MLP"}  # how the equations name each sub-layer's branch


@dataclass(frozen=True)
class NormSite:
    """One RMSNorm of a layer: the layer's attribute holding it (`module`: a parameter name in the saved
    weights, so it names the norm, not always its sub-layer: HybridNorm's), its sub-layer (`attn`, `mlp`)
    and its position there (`input`, `output`, `sum`)."""

    module: str
    sublayer: str
    position: str

    @property
    def symbol(self) -> str:
        """The norm as the equations write it: attn_layernorm → N_a,
        mlp_out_layernorm → N_mo."""
        return "N_" + "".join(word[0] for word in self.module.removesuffix("_layernorm").split("_"))


@dataclass(frozen=True)
class Layout:
    """One layer kind: its norms, the model-boundary norm it takes (`final` or `entry`), whether
    the residual term is α·h (DeepNorm: `residual_scale`) and whether attention normalises q, k, v."""

    norms: tuple[NormSite, ...]
    boundary: str
    scaled_residual: bool = False
    qkv_norm: bool = False

    def at(self, sublayer: str, position: str) -> NormSite | None:
        """The norm at `position` of `sublayer`, or None."""
        return next((n for n in self.norms if (n.sublayer, n.position) == (sublayer, position)), None)

    def branch(self, sublayer: str) -> str:
        """The sub-layer's branch name: Attn, Attn_qkv (q, k, v normalised) or MLP."""
        return BRANCHES[sublayer] + ("_qkv" if sublayer == "attn" and self.qkv_norm else "")

    def equation(self, sublayer: str) -> str:
        """The sub-layer's update as an equation, e.g. `h ← N_a(h + Attn(h))`."""
        x = "h"
        if norm := self.at(sublayer, "input"):
            x = f"{norm.symbol}({x})"
        out = f"{self.branch(sublayer)}({x})"
        if norm := self.at(sublayer, "output"):
            out = f"{norm.symbol}({out})"
        total = ("α·h" if self.scaled_residual else "h") + f" + {out}"
        if norm := self.at(sublayer, "sum"):
            total = f"{norm.symbol}({total})"
        return f"h ← {total}"


def _norms(*sites: tuple[str, str, str]) -> tuple[NormSite, ...]:
    return tuple(NormSite(*site) for site in sites)


_POST = _norms(("attn_layernorm", "attn", "sum"), ("mlp_layernorm", "mlp", "sum"))
LAYOUTS: dict[str, Layout] = {
    "pre": Layout(_norms(("attn_layernorm", "attn", "input"), ("mlp_layernorm", "mlp", "input")), "final"),
    "post": Layout(_POST, "entry"),
    "sandwich": Layout(_norms(("attn_layernorm", "attn", "input"), ("attn_out_layernorm", "attn", "output"),
                              ("mlp_layernorm", "mlp", "input"), ("mlp_out_layernorm", "mlp", "output")), "final"),
    "deepnorm": Layout(_POST, "entry", scaled_residual=True),
    # HybridNorm's one norm sits on the attention sum, h ← N_m(h + Attn_qkv(h)), whose output is the MLP's input
    # (the norm pre-norm's MLP reads): hence its attribute `mlp_layernorm`, a parameter name in every
    # HybridNorm student's weights (blocks.b.i.mlp_layernorm.weight), kept so that saved weights still load.
    "hybridnorm": Layout(_norms(("mlp_layernorm", "attn", "sum")), "final", qkv_norm=True),
}
MIX = re.compile(r"mix-ln(?:@(\d+))?")
PLACEMENTS = (*LAYOUTS, "mix-ln")  # the registered names; mix-ln also as mix-ln@B
PATTERN = "^(" + "|".join(LAYOUTS) + r"|mix-ln(@[1-9][0-9]*)?)$"  # the config schema's


def residual_scale(depth: int) -> float:
    """DeepNorm's α = (2N)^¼ for a decoder-only stack of N = `depth` layers."""
    return (2 * depth) ** 0.25


def layer_kinds(placement: str, blocks: int) -> list[str]:
    """The layer kind (a key of LAYOUTS) of each of `blocks` blocks under `placement`, with a clear
    error for unknown names."""
    if placement in LAYOUTS:
        return [placement] * blocks
    mix = MIX.fullmatch(placement)
    if mix:  # Mix-LN (Li et al. 2024): post-norm in the first blocks, pre-norm after them
        post_blocks = int(mix.group(1) or 1)
        return ["post" if b < post_blocks else "pre" for b in range(blocks)]
    raise ValueError(f"unknown placement {placement!r}; registered placements: {', '.join(PLACEMENTS)} "
                     "(mix-ln@B: post-norm in the first B blocks)")


def boundary(placement: str) -> str:
    """The model-boundary norm of `placement`: "final" or "entry" (Mix-LN ends in pre layers: final)."""
    return LAYOUTS[placement].boundary if placement in LAYOUTS else "final"
