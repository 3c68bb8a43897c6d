"""What the paper's claims presuppose, measured on this run: its starting point and the phenomenon its
mechanism is about.

The regime (normgrow.paper.regime) holds the conditions a miniature keeps by its sizes; they are
necessary, not sufficient. These preconditions decide whether the run starts where the paper starts
and whether the mechanism the paper names can show in it at all. Each has a threshold, and why:

- baseline parity: the paper's headline is a difference of differences that starts from a tie
  (|Δ_joint| 0.0004 against an interaction of 0.0332: paper Table 1). Judged by the one parity rule
  (normgrow.paper.claims.parity): Δ_joint's 95% seed interval inside ± the equivalence margin (a number
  of nats set from the paper, not from this run's estimate) with at least three seeds is present;
  entirely outside, absent; otherwise — one or two seeds, or an interval across a bound — not shown;
- structural tokens present: every document of the training, validation and diagnostic splits holds
  its document-boundary token (the token metadata's counts; `data.boundary_position` says where). The
  mechanism is scale on structural tokens; a boundary position that cuts the boundary away leaves none;
- kurtosis reachable: the Pearson kurtosis of n values is at most n − 2 + 1/(n − 1); held when that bound
  over the diagnostic batch's real tokens exceeds the paper's > 2,400 (Fig. A1), so the claim can be met;
- massive activations in the teacher (normgrow.train.probe): the largest max/median token RMS over the
  teacher's layers at least `MIN_MASSIVE` (a real 135M decoder reaches far more on its first token:
  docs/miniature.md). The paper does not report its teacher's; a student distilled from a
  teacher without any outlier has no scale to inherit at structural tokens. The threshold stays on the
  per-token measure, the one it was set against (docs/miniature.md's probe tables); the largest
  max/median |scalar| (Sun et al.'s single-activation measure) is stated beside it, "not measured" for
  a probe from before it. Whether the paper needs it in the teacher, or a pre-norm student forms its own
  scale without it, is what the formation study (docs/miniature.md, "Formation study") was to decide; at
  this size neither the teacher (×4 training, higher LR or weight decay, width 128) nor the pre-norm student
  (7× a phase) formed it, so the measurement could not move the precondition, and it stays on the teacher;
- a common start: pre- and post-norm's training CE at their first update (each run's phase 0, paired by
  seed) apart by at most `START_GAP_FACTOR` (100) × the paper's largest effect (its largest |Δ_joint|,
  |Δ_grow| or |interaction| in Table 1: 0.0332 nats, so ≈ 3.3 nats), under joint and under grow. The
  paper's effects are differences at the end of 50,000 updates a phase; a start two orders of magnitude
  apart (a Gemma 3 teacher's pre-norm students start near CE 500, its post-norm ones near 12: issue 46)
  is what a short budget measures, not the placements (3.3 nats: a perplexity ratio of ≈ 27 at the start).
  Not shown without the four runs or for phases collected before the first update's CE was recorded.
"""

from __future__ import annotations

import pandas as pd

from normgrow.paper.claims import ABSENT, MIN_PARITY_SEEDS, NOT_SHOWN, PAPER_KURTOSIS, SHOWN, parity
from normgrow.paper.reference import paper_reference
from normgrow.paper.regime import Property
from normgrow.paper.results import Results
from normgrow.paper.stats import delta, effects, mean_ci

MIN_MASSIVE = 10.0
START_GAP_FACTOR = 100  # × the paper's largest effect: the widest start gap a common start allows
SCALAR = "scalar_max_over_median"  # normgrow.train.diagnostics.scalar_outlier
SPLITS = ("train", "valid", "diag")


def kurtosis_bound(n: int) -> float:
    """The largest Pearson kurtosis n values can have (n − 2 + 1/(n − 1))."""
    return n - 2 + 1 / (n - 1) if n > 1 else float("nan")


def baseline_parity(results: Results, paper: str, margin: float) -> Property:
    name = "baseline parity: Δ_joint within the margin (the parity rule)"
    if not results.has("pre-joint", "post-joint", "pre-grow", "post-grow"):
        return Property(name, paper, "needs pre-/post-joint and pre-/post-grow", None)
    of_post = effects(results.final_ce())
    d_joint, interaction = of_post["delta_joint"].dropna(), of_post["interaction"]
    mean, low, high = mean_ci(d_joint)
    shown = f"Δ_joint {mean:+.4f}" + (f" [{low:+.4f}, {high:+.4f}]" if len(d_joint) > 1 else "")
    verdict = parity(low, high, len(d_joint), margin)
    seeds = f"{len(d_joint)} seed{'s' if len(d_joint) > 1 else ''}"
    return Property(name, paper, f"{shown} ({seeds}) against |interaction| {abs(interaction.mean()):.4f}",
                    {SHOWN: True, ABSENT: False, NOT_SHOWN: None}[verdict],
                    f"95% interval inside ±{margin:g} nats, ≥ {MIN_PARITY_SEEDS} seeds")


def structural_tokens(data: dict, paper: str) -> Property:
    splits = data["splits"]
    name = "structural tokens present: documents holding their boundary token"
    if any("documents_with_boundary" not in splits[s] for s in SPLITS):
        return Property(name, paper, "not counted (token metadata from before the count; rerun tokenize_corpus)", None)
    position = data.get("boundary_position", "truncated-end")
    held = {s: (splits[s]["documents_with_boundary"], splits[s]["documents"]) for s in SPLITS}
    ours = ", ".join(f"{s} {k:,}/{n:,}" for s, (k, n) in held.items())
    return Property(name, paper, f"{ours} (boundary_position {position}; at the start of "
                    f"{splits['diag']['boundary_at_start']:,}, at the end of {splits['diag']['boundary_at_end']:,} "
                    "diagnostic documents)", all(k == n for k, n in held.values()), "every document")


def kurtosis_reachable(data: dict, paper: str) -> Property:
    n = data["splits"]["diag"]["tokens"]
    bound = kurtosis_bound(n)
    return Property("kurtosis reachable on the diagnostic batch (its bound n − 2 + 1/(n − 1))", paper,
                    f"{data['splits']['diag']['documents']} documents, {n:,} real tokens: at most {bound:,.0f}",
                    bool(bound > PAPER_KURTOSIS), f"> {PAPER_KURTOSIS:,}")


def largest_scalar(layers: pd.DataFrame) -> str:
    """The largest max/median |scalar| over the probed layers, where it sits, or that it was not measured."""
    if SCALAR not in layers or layers[SCALAR].isna().all():
        return "max/median |scalar| not measured (a probe from before it)"
    top = layers.loc[layers[SCALAR].idxmax()]
    return (f"max/median |scalar| {top[SCALAR]:,.1f}× (layer {int(top['layer'])}, dimension "
            f"{int(top['scalar_dimension'])}, position {int(top['scalar_position'])})")


def teacher_massive(probe: dict, paper: str) -> Property:
    layers = pd.DataFrame(probe["layers"])
    top = layers.loc[layers["max_over_median"].idxmax()]
    return Property("massive activations in the teacher: largest max/median token RMS over its layers", paper,
                    f"{top['max_over_median']:.1f}× (layer {int(top['layer'])}); {largest_scalar(layers)}; "
                    "structural/regular up to "
                    f"{layers['structural_over_regular'].max():.2f}×; attention on structural tokens up to "
                    f"{layers['attention_on_structural'].max():.2f}",
                    bool(top["max_over_median"] >= MIN_MASSIVE), f"≥ {MIN_MASSIVE:g}×")


def paper_largest_effect(table1: dict) -> float:
    """The paper's largest effect in nats: the largest of |Δ_joint|, |Δ_grow| and |interaction| in its
    Table 1 (`table1`: the reference's; 0.0332, the interaction)."""
    return max(abs(table1[key]) for key in ("delta_joint", "delta_grow", "interaction"))


def start_gap(results: Results, paper: str, largest_effect: float) -> Property:
    """Pre- and post-norm's CE at their first update, under joint and grow: present when no curriculum's
    gap (post − pre, paired by seed, its mean) exceeds START_GAP_FACTOR × `largest_effect` (module
    docstring); not shown without the four runs or their first update's CE."""
    name = "a common start: pre- and post-norm's CE at their first update"
    if not results.has("pre-joint", "post-joint", "pre-grow", "post-grow"):
        return Property(name, paper, "needs pre-/post-joint and pre-/post-grow", None)
    starts = {run: results.first_update_ce(run) for run in ("pre-joint", "post-joint", "pre-grow", "post-grow")}
    if any(ce.empty for ce in starts.values()):
        return Property(name, paper, "not recorded (phases collected before the first update's CE: rerun "
                        "collect_metrics)", None)
    gaps = {c: delta(starts, c).dropna().mean() for c in ("joint", "grow")}  # post − pre at the start
    threshold = START_GAP_FACTOR * largest_effect
    widest = max(abs(gap) for gap in gaps.values())
    ours = "; ".join(f"{c}: pre {starts[f'pre-{c}'].mean():.2f}, post {starts[f'post-{c}'].mean():.2f} "
                     f"(gap {gap:+.2f})" for c, gap in gaps.items())
    return Property(name, paper, f"{ours}: the widest {widest / largest_effect:,.0f}× the paper's largest effect",
                    bool(widest <= threshold),
                    f"|gap| ≤ {START_GAP_FACTOR}× {largest_effect:.4f} = {threshold:.2f} nats")


def preconditions(results: Results, data: dict, probe: dict, paper: dict, margin: float) -> list[Property]:
    """The preconditions of this run (module docstring); `paper` is the reference's `preconditions`,
    `margin` the equivalence margin in nats."""
    largest = paper_largest_effect(paper_reference()["table1"])
    return [baseline_parity(results, paper["parity"], margin), structural_tokens(data, paper["structural"]),
            kurtosis_reachable(data, paper["kurtosis"]), teacher_massive(probe, paper["massive"]),
            start_gap(results, paper["start"], largest)]


def massive_activations_table(probe: dict, rms: pd.DataFrame) -> pd.DataFrame:
    """Per layer of the teacher (the probe) and per block boundary of each diagnosed run at its last
    snapshot (the mean over seeds): max/median token RMS, max/median |scalar| (NaN where not measured:
    files from before it), structural/regular RMS, and the teacher's attention on structural tokens."""
    rows = [{"model": "teacher", "layer or boundary": f"layer {r['layer']}",
             "max/median RMS": r["max_over_median"], "max/median |scalar|": r.get(SCALAR, float("nan")),
             "structural/regular RMS": r["structural_over_regular"],
             "attention on structural": r["attention_on_structural"]} for r in probe["layers"]]
    if not rms.empty and "median" in rms:
        last = rms[rms["global_step"] == rms.groupby(["run", "seed"])["global_step"].transform("max")]
        values = [c for c in ("mean", "max", "median", SCALAR) if c in rms]
        wide = last.pivot_table(index=["run", "seed", "boundary"], columns="tokens", values=values)
        stats = pd.DataFrame({"max/median RMS": wide[("max", "all")] / wide[("median", "all")],
                              "max/median |scalar|": wide.get((SCALAR, "all"), float("nan")),
                              "structural/regular RMS": wide[("mean", "structural")] / wide[("mean", "regular")]})
        for (run, boundary), group in stats.groupby(level=["run", "boundary"]):
            rows.append({"model": run, "layer or boundary": f"after block {boundary - 1}" if boundary else "entry",
                         **group.mean().to_dict(), "attention on structural": float("nan")})
    return pd.DataFrame(rows)
