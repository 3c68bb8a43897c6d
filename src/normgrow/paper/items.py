"""Every table and figure of results/paper by file name: its label, where the paper has it, what it
shows and its caption. One registry for the three places that name them: the Snakemake report
(workflow/rules/common.smk's labels and sections, workflow/report/tables.rst and figures.rst render
the caption), report.md and index.html (normgrow.paper.report). Torch- and pandas-free: the DAG
imports it."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Item:
    label: str  # "Table 1", "Fig. 3a": the name a reader cites
    section: str  # where the paper has it: Main text, Appendix, Beyond the paper
    shows: str  # what it shows, in a few words (its title in the Snakemake report)
    caption: str  # plain text (no markup: rendered as RST, Markdown and HTML)

    def heading(self) -> str:
        return f"{self.label} — {self.shows}"


ITEMS = {
    "table1": Item(
        "Table 1", "Main text", "placement × curriculum interaction (validation CE ↓)",
        "(paper Table 1, the main result). Final validation cross-entropy (CE, nats per token, lower is "
        "better) of the pre-norm and post-norm students, each trained jointly (all blocks from the first "
        "step, one phase) and with curriculum depth growing (one block more per phase, the earlier blocks"
        " kept). Δ = post − pre per curriculum, paired by seed; the interaction is Δ_grow − Δ_joint. In "
        "the paper, placement does not matter when trained jointly (Δ_joint ≈ 0) and post-norm profits "
        "from growth (Δ_grow and the interaction negative)."),
    "table2": Item(
        "Table 2", "Main text", "single-block control, phase 0 of grow (↓)",
        "(paper Table 2). The phase-0 checkpoint of pre-grow and post-grow, when only the first block is "
        "active: validation CE, the distillation term (KD as the soft cross-entropy, the paper-comparable"
        " column, and the KL the objective weights) and perplexity exp(CE). In the paper, with a single "
        "block post-norm is no better, so its advantage in Table 1 comes from growing."),
    "table3": Item(
        "Table 3", "Main text", "post-joint budget controls (validation CE ↓)",
        "(paper Table 3). Final validation CE of post-joint trained longer, with an LR restart between "
        "50k-step phases on fresh data: post-joint-long matches grow's active-layer token budget, post-"
        "joint-longer its total tokens; post-grow beside them. In the paper, more joint training does not"
        " catch up with growing."),
    "table4": Item(
        "Table 4", "Main text", "block removal at the final checkpoint (diagnostic batch)",
        "(paper Table 4). At the final checkpoint of pre/post × joint/grow, each block l is bypassed on "
        "the fixed diagnostic batch: ΔCE_l = CE(without block l) − CE(full), and the block's angular "
        "distance, the mean over tokens of arccos(cos(h_in, h_out))/π. In the paper, the last pre-grow "
        "block is nearly the identity while the last post-grow block still matters."),
    "tableA1": Item(
        "Table A1", "Appendix", "hyper-parameters",
        "(paper App. C). The configuration this run actually used, beside the paper's: teacher, K blocks "
        "× L layers, batch, sequence length, steps per phase, AdamW and schedule settings, the "
        "objective's α, γ and τ, evaluation cadence and seeds."),
    "tableA2": Item(
        "Table A2", "Appendix", "training budgets from the logged token counts, and each run's start",
        "(paper Table A2). For every run, summed over its phases from the logged token counters: phases, "
        "active layers per phase, steps, total tokens, unique tokens (documents read for the first time) "
        "and active-layer tokens (tokens × active layers). In the paper, grow reads three times joint's "
        "tokens but no more unique ones. Beside them, not in the paper, each run's training CE at its first "
        "update (its start; the precondition \"a common start\" compares pre- and post-norm's)."),
    "tableA3": Item(
        "Table A3", "Appendix", "freeze control (validation CE ↓)",
        "(paper App. B.1). Grow where each phase trains only the newest block (with the boundary norm and"
        " the LM head), against ordinary grow, for both placements; Δ = post − pre per curriculum. In the"
        " paper, Δ_freeze ≈ Δ_grow: post-norm keeps its advantage when the earlier blocks are frozen."),
    "tableA4": Item(
        "Table A4", "Appendix", "training loss at block-appending transitions (grow)",
        "(paper Table A4). The grow runs' training loss at every block-appending step: the jump over the "
        "loss just before the transition, the excess loss over the first 2% and 10% of a phase (the "
        "paper's 1k and 5k of 50k steps; the mean is the paper-comparable AUC, the area is given beside "
        "it) and the steps until a smoothed loss is back at the baseline (recovery, in paper-equivalent "
        "steps). In the paper, post-norm's loss jumps far more at a transition and takes far longer to "
        "recover."),
    "tableB3": Item(
        "Table B3", "Appendix", "grow with iterator reset (validation CE ↓)",
        "(paper App. B.3). Grow with the document iterator rewound to the start of the shard at every "
        "phase, against grow that continues it, for both placements. The paper gives no numbers, only "
        "that reset ≈ grow with the same ranking."),
    "tableP1": Item(
        "Table P1", "Beyond the paper", "every placement against pre-norm (validation CE ↓, Δ = placement − pre)",
        "(beyond the paper). Final validation CE under joint and grow of each further normalisation "
        "placement, Δ = placement − pre per curriculum, paired by seed, and the interaction Δ_grow − "
        "Δ_joint (the paper's Eq. 6 with that placement for post-norm), with each placement's norm "
        "weights per layer."),
    "tableP2": Item(
        "Table P2", "Beyond the paper", "boundary RMS and block removal of every diagnosed grow run (final checkpoint)",
        "(beyond the paper). At the final checkpoint of every diagnosed grow run: the mean per-token RMS "
        "of the residual stream at each block boundary and the block-removal ΔCE of each block — the "
        "paper's Fig. 4 and Table 4 diagnostics for any placement."),
    "tableG1": Item(
        "Table G1", "Beyond the paper", "growth operators × placements (validation CE ↓; Δ = post − pre)",
        "(beyond the paper; docs/growth.md). Final validation CE of the pre- and post-norm grow runs "
        "under each way of starting the appended block (random — the paper's —, zero, copy, ramp), and "
        "Δ_grow = post − pre per operator, paired by seed."),
    "tableG2": Item(
        "Table G2", "Beyond the paper", "training loss at block-appending transitions, per growth operator",
        "(beyond the paper). Jump, AUC and recovery of the training loss at every block-appending "
        "transition (the Table A4 definitions) for each operator and placement."),
    "figG1_growth_operators": Item(
        "Fig. G1", "Beyond the paper", "final CE and Δ_grow under each growth operator",
        "(beyond the paper; docs/growth.md). Left: final validation CE of the pre- and post-norm grow "
        "runs under each way of starting the appended block (mean, bars the seed range). Right: Δ_grow = "
        "post − pre per operator, paired by seed."),
    "fig1_placements": Item(
        "Fig. 1", "Main text", "where each placement's RMSNorms sit in one decoder layer",
        "(paper Fig. 1). One decoder layer of every placement this run builds — the residual stream on "
        "the left, the attention and MLP branches on the right — with each RMSNorm where it sits relative"
        " to the residual adds: on a branch's input (pre-norm), on its output before the add (sandwich), "
        "or on the sum (post-norm; DeepNorm with the residual up-weighted by α); HybridNorm also "
        "normalises q, k and v inside attention, and Mix-LN has post-norm layers in its first blocks and "
        "pre-norm layers after them. The model-boundary norm is on the embedding output (entry) or after "
        "the last active layer (final). Drawn from the placement's layout (src/normgrow/model/layout.py),"
        " which the tests check against each layer's forward."),
    "fig2_curricula": Item(
        "Fig. 2", "Main text", "curricula: trained, frozen and inactive blocks per phase",
        "(paper Fig. 2). Every curriculum this run builds, phases left to right and blocks bottom to top:"
        " the blocks a phase trains, keeps frozen (trainable: newest) or has not activated, the blocks it"
        " appends (with the growth operator unless random), its budget (updates, documents and at most "
        "that many tokens) and where the data iterator starts (continue, reset to the first document, "
        "fresh unread documents). Joint training trains all K blocks from the start; growth appends one "
        "block per phase. The embedding stays frozen; the boundary norm and LM head train in every phase."),
    "fig3a_interaction": Item(
        "Fig. 3a", "Main text", "placement × curriculum interaction plot",
        "(paper Fig. 3a). Final validation CE (nats per token) of pre-norm and post-norm under the joint "
        "and the grow curriculum, mean over seeds with their range. Parallel lines would mean no "
        "interaction; in the paper the lines meet under joint training and post-norm drops below pre-norm"
        " under growth (Table 1)."),
    "fig3b_crossover": Item(
        "Fig. 3b", "Main text", "phase-wise pre/post crossover under growth",
        "(paper Fig. 3b). Left: the validation CE of pre-grow and post-grow at the end of each phase "
        "(phase p has p + 1 active blocks). Right: Δ = post − pre per phase; below zero favours post-"
        "norm. The paper: post-norm is slightly behind with one block (Table 2) and ahead after phase 0."),
    "fig4_boundary_rms": Item(
        "Fig. 4", "Main text", "block-boundary RMS across growth",
        "(paper Fig. 4). On the fixed diagnostic batch at every saved checkpoint of each diagnosed grow "
        "run (pre-grow and post-grow as in the paper, then any other placement's): the per-token RMS of "
        "the residual stream at each block boundary, its mean (top) and standard deviation across tokens "
        "(bottom), log scale; dotted lines mark the appended blocks. In the paper, pre-norm's per-token "
        "RMS spread after block 0 grows several-fold across growth while post-norm's stays small "
        "(report.md's scale-drift claims set the numbers side by side; Table P2 has the final values of "
        "every diagnosed placement)."),
    "fig5a_token_types": Item(
        "Fig. 5a", "Main text", "token-type attribution of the scale drift",
        "(paper Fig. 5a). The mean per-token RMS after block 0 of structural tokens (document boundary "
        "and special tokens) and of regular tokens, across growth, for pre-grow and post-grow. In the "
        "paper, pre-norm's scale drift sits on the structural tokens, far above the regular ones, while "
        "post-norm keeps both small."),
    "fig5b_grow_validation": Item(
        "Fig. 5b", "Main text", "validation loss of grow with block-appending markers",
        "(paper Fig. 5b). Validation CE of pre-grow and post-grow against the training step, with a "
        "dotted line where a block is appended."),
    "figA1_rms_distribution": Item(
        "Fig. A1", "Appendix", "final per-token RMS distributions and kurtosis",
        "(paper Fig. A1). At the final checkpoint of pre-grow and post-grow, the distribution of the per-"
        "token RMS at every block boundary, with each boundary's (Pearson) kurtosis. In the paper, pre-"
        "norm's kurtosis is in the thousands — a few tokens carry enormous scale."),
    "figA2_block_removal": Item(
        "Fig. A2", "Appendix", "block removal: ΔCE and angular distance",
        "(paper Fig. A2, the numbers of Table 4). For the final checkpoints of pre/post × joint/grow: the"
        " CE increase when each block is bypassed (left) and the block's angular distance from input to "
        "output (right). A block with small values is close to the identity — in the paper, the last pre-"
        "grow block."),
    "figP1_placements": Item(
        "Fig. P1", "Beyond the paper", "every placement against pre-norm",
        "(beyond the paper, Table P1 drawn). For every further placement: Δ_joint, Δ_grow (placement − "
        "pre, paired by seed) and the interaction, mean with the seed range; below zero favours the "
        "placement."),
    "validation_loss": Item(
        "Validation loss", "Beyond the paper", "validation CE of every run",
        "(beyond the paper; Fig. 5b for all runs). Validation CE against the global training step, one "
        "panel per curriculum (joint, grow, freeze, grow-reset, the longer joint controls), with dotted "
        "lines at the phase boundaries (a block appended or the LR restarted)."),
}


def report_items() -> dict[str, dict[str, str]]:
    """ITEMS as plain values, for the report captions' templates (rule paper's params)."""
    return {name: asdict(item) | {"heading": item.heading()} for name, item in ITEMS.items()}
