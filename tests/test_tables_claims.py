"""Table builders and claim verdicts on small fixtures whose answers are known."""

import pandas as pd
import pytest
from matplotlib.container import BarContainer

from normgrow.paper import figures
from normgrow.paper.claims import (
    AGREES,
    DISAGREES,
    INCONCLUSIVE,
    NOT_CHECKED,
    check_claims,
    describe,
    equivalence_verdict,
    sign_verdict,
    sized,
)
from normgrow.paper.reference import paper_reference as ref
from normgrow.paper.results import NotBuilt, Results
from normgrow.paper.stats import mean_ci, t975
from normgrow.paper.tables import (
    NORM_WEIGHTS,
    build_tables,
    growth_operators,
    placements_with_roles,
    table1,
    tableA2,
    tableA3,
    tableB3,
    tableG1,
    tableG2,
    tableP1,
    tableP2,
)


def phase_rows(run, placement, ces, seeds, active=None):
    rows = []
    for seed_index, seed in enumerate(seeds):
        for p, ce in enumerate(ces):
            value = ce[seed_index] if isinstance(ce, list) else ce
            blocks = (active or list(range(1, len(ces) + 1)))[p]
            rows.append({"run": run, "seed": seed, "phase": p, "placement": placement, "active_blocks": blocks,
                         "active_layers": 2 * blocks, "ce": value, "kd": value / 10, "kd_soft": value + 0.5, "ppl": 2.0,
                         "global_step": 10 * (p + 1), "run_steps": 10 * (p + 1), "run_tokens": 100 * (p + 1),
                         "run_unique_tokens": 100, "run_active_layer_tokens": 200 * (p + 1)})
    return rows


def fixture(seeds=(1, 2, 3), joint=(3.00, 3.00), grow=(2.90, 2.80), noise=0.0):
    """pre/post × joint/grow with per-seed values; `noise` spreads seeds around the means."""
    offsets = [noise * (i - 1) for i in range(len(seeds))]
    rows = []
    for placement, j, g in (("pre", joint[0], grow[0]), ("post", joint[1], grow[1])):
        rows += phase_rows(f"{placement}-joint", placement, [[j + o for o in offsets]], seeds, active=[3])
        rows += phase_rows(f"{placement}-grow", placement, [3.5, 3.2, [g + o for o in offsets]], seeds)
    return pd.DataFrame(rows)


def test_table1_pairs_differences_by_seed():
    phases = fixture(joint=(3.00, 3.01), grow=(2.90, 2.80), noise=0.05)
    t = table1(Results(phases), ref())
    frame = t.frame().set_index(["row", "column"])
    assert frame.loc[("Pre-norm", "Joint"), "mean"] == pytest.approx(3.00)
    assert frame.loc[("Δ (Post−Pre)", "Grow"), "mean"] == pytest.approx(-0.10)
    # the seed noise is shared by pre and post, so the paired difference has no spread
    assert frame.loc[("Δ (Post−Pre)", "Grow"), "std"] == pytest.approx(0.0, abs=1e-12)
    assert frame.loc[("Interaction (Δ_grow − Δ_joint)", "Grow"), "mean"] == pytest.approx(-0.11)
    assert frame.loc[("Pre-norm", "Joint"), "paper"] == pytest.approx(2.7603)
    md = t.markdown()
    assert "3.0000 ± 0.0500" in md and "-0.1000 [-0.1000, -0.1000]" in md.replace("+", "")
    assert "\\toprule" in t.latex() and "$\\Delta$" in t.latex()
    # its label from normgrow.paper.items, then its title; in LaTeX, which numbers it, the title alone
    assert md.startswith("### Table 1: placement × curriculum interaction (validation CE ↓)\n")
    assert "\\caption{Placement $\\times$ curriculum interaction (validation CE $\\downarrow$)}" in t.latex()


def test_budget_table_from_logged_counts():
    t = tableA2(Results(fixture(seeds=(1,))), ref())
    frame = t.frame().set_index(["row", "column"])
    assert frame.loc[("pre-grow", "active layers"), "text"] == "2→4→6"
    assert frame.loc[("pre-grow", "total tokens"), "mean"] == 300
    assert frame.loc[("pre-joint", "phases"), "text"] == "1"
    assert frame.loc[("pre-grow", "unique tokens"), "paper"] == "3.11B"  # the paper's grow-3x50k
    assert frame.loc[("pre-grow", "active layers"), "paper"] == "3→6→9"
    assert frame.loc[("post-joint", "total tokens"), "paper"] == "3.11B"  # joint-50k
    assert pd.isna(frame.loc[("pre-grow", "steps"), "paper"])
    assert ("pre-grow", "CE at update 1") not in frame.index  # phases collected before the first update's CE


def test_the_budget_table_states_each_runs_start():
    """Each run's training CE at its first update: its phase 0's, not a later phase's."""
    phases = fixture(seeds=(1, 2))
    phases["first_update_ce"] = phases["phase"].map({0: 500.0, 1: 9.0, 2: 8.0}).where(
        phases["placement"] == "pre", phases["phase"].map({0: 12.0, 1: 9.0, 2: 8.0}))
    t = tableA2(Results(phases), ref())
    frame = t.frame().set_index(["row", "column"])
    assert frame.loc[("pre-grow", "CE at update 1"), "mean"] == 500.0
    assert frame.loc[("post-joint", "CE at update 1"), "mean"] == 12.0
    assert "500.00 ± 0.00" in t.markdown()


def test_tables_skip_missing_runs():
    phases = fixture()
    only_grow = phases[phases["run"].str.endswith("grow")]
    tables, not_built = build_tables(Results(only_grow))
    names = [t.name for t in tables]
    assert "table1" not in names and "table2" in names
    assert not_built["table1"] == "needs the runs pre-joint, post-joint"
    assert not_built["tableA1"] == "no configuration given"
    claims = {c.name: c for c in check_claims(Results(only_grow), pd.DataFrame(), 0.01)}
    joint = claims["Δ_joint, Δ_grow and their interaction"]
    assert joint.verdict == NOT_CHECKED and joint.ours == "needs the runs pre-joint, post-joint"
    crossover = next(c for name, c in claims.items() if name.startswith("crossover after phase 0"))
    assert crossover.verdict != NOT_CHECKED


@pytest.mark.parametrize("df,quantile", [(1, 12.706), (30, 2.042), (31, 2.040), (100, 1.984)])
def test_the_t_quantile_of_the_95_percent_interval(df, quantile):
    assert t975(df) == pytest.approx(quantile, abs=5e-4)


def test_the_interval_of_31_seeds_uses_the_t_quantile_not_the_normal():
    """32 values 0, 2, 0, 2, ...: mean 1, sample std √(32/31), half width t_{0.975, 31}·√(32/31)/√32."""
    mean, low, high = mean_ci(pd.Series([0.0, 2.0] * 16))
    assert mean == 1.0 and high - mean == pytest.approx(2.0395 / 31 ** 0.5, abs=1e-4) and mean - low == high - mean


def test_two_seeds_have_an_interval_one_seed_has_none():
    """Two values 1 and 3: mean 2, sample std √2, half width t_{0.975, 1}·√2/√2 = 12.706; one value (a
    missing seed dropped): low = high = mean."""
    mean, low, high = mean_ci(pd.Series([1.0, 3.0]))
    assert mean == 2.0 and high - mean == pytest.approx(12.706, abs=5e-4) and mean - low == high - mean
    assert mean_ci(pd.Series([1.5, None])) == (1.5, 1.5, 1.5)


def test_sign_and_equivalence_verdicts():
    assert sign_verdict(pd.Series([-0.1, -0.12, -0.11])) == AGREES
    assert sign_verdict(pd.Series([0.1, 0.12, 0.11])) == DISAGREES
    assert sign_verdict(pd.Series([-0.1, 0.12, 0.01])) == INCONCLUSIVE
    assert sign_verdict(pd.Series([-0.01])) == AGREES  # one seed: the sign decides
    assert equivalence_verdict(pd.Series([0.001, -0.002, 0.0]), margin=0.01) == AGREES
    assert equivalence_verdict(pd.Series([0.2, 0.21, 0.19]), margin=0.01) == DISAGREES
    assert equivalence_verdict(pd.Series([0.0, 0.05, -0.05]), margin=0.01) == INCONCLUSIVE


@pytest.mark.parametrize(("grow", "joint", "expected"), [
    ((2.90, 2.80), (3.00, 3.00), {"Δ_joint": AGREES, "Δ_grow": AGREES, "interaction": AGREES}),
    ((2.80, 2.90), (3.00, 3.00), {"Δ_joint": AGREES, "Δ_grow": DISAGREES, "interaction": DISAGREES}),
    ((2.80, 2.90), (3.00, 3.20), {"Δ_joint": DISAGREES, "Δ_grow": DISAGREES, "interaction": AGREES}),
])
def test_claim_verdicts_on_fixtures(grow, joint, expected):
    claims = check_claims(Results(fixture(grow=grow, joint=joint, noise=0.01)), pd.DataFrame(), margin=0.01)
    verdicts = {c.name.split(" ")[0]: c.verdict for c in claims}
    for key, verdict in expected.items():
        assert verdicts[key] == verdict, (key, claims)


def test_a_clear_difference_on_either_side_disagrees_with_equivalence():
    """Δ_joint ≈ 0 is refuted by a difference clearly below −m as well as above +m."""
    assert equivalence_verdict(pd.Series([-0.2, -0.21, -0.19]), margin=0.01) == DISAGREES
    for joint in ((3.00, 2.80), (2.80, 3.00)):  # post-norm far ahead, then far behind
        claims = check_claims(Results(fixture(joint=joint, noise=0.01)), pd.DataFrame(), margin=0.01)
        assert next(c for c in claims if c.name.startswith("Δ_joint")).verdict == DISAGREES, joint


def test_inconclusive_when_seeds_disagree():
    phases = fixture(grow=(2.85, 2.85))
    # seed 1 favours post, seed 3 favours pre: the interval of Δ_grow straddles 0
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 2), "ce"] = [2.80, 2.85, 2.90]
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["Δ_grow"] == INCONCLUSIVE


def test_crossover_claim():
    phases = fixture(grow=(2.90, 2.80))
    # phase 0: near the paper's tie (post − pre = +0.004); then post ahead (agrees), or behind (disagrees)
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 0), "ce"] = 3.504
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 1), "ce"] = 3.1
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["crossover"] == AGREES
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 1), "ce"] = 3.3
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["crossover"] == DISAGREES


@pytest.mark.parametrize("phase0", [-0.005, 0.0, 0.005])
def test_crossover_accepts_a_phase0_difference_within_the_margin(phase0):
    """Phase 0 has to leave the placements within the margin of the paper's Δ_0 (+0.0044), on either side."""
    phases = fixture(grow=(2.90, 2.80))
    pre0 = phases.loc[(phases["run"] == "pre-grow") & (phases["phase"] == 0), "ce"].iloc[0]
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 0), "ce"] = pre0 + phase0
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 1), "ce"] = 3.1
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["crossover"] == AGREES
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 0), "ce"] = pre0 - 0.05  # post ahead already
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["crossover"] == DISAGREES
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 0), "ce"] = pre0 + 0.0283  # far behind: no tie
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["crossover"] == DISAGREES


def test_the_crossover_judges_phase_0_around_the_papers_delta_0_not_around_zero():
    """A phase-0 Δ of +0.013 is within ±0.01 of the paper's +0.0044 (post − pre, Table 2), though not of 0
    nor of −0.0044."""
    phases = fixture(grow=(2.90, 2.80))
    pre0 = phases.loc[(phases["run"] == "pre-grow") & (phases["phase"] == 0), "ce"].iloc[0]
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 0), "ce"] = pre0 + 0.013
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 1), "ce"] = 3.1
    claim = next(c for c in check_claims(Results(phases), pd.DataFrame(), 0.01) if c.name.startswith("crossover"))
    assert claim.verdict == AGREES and "the paper's +0.0044" in claim.name


def test_delta_grow_and_the_interaction_are_each_set_beside_their_own_papers_value():
    """Δ_grow's interval [−0.0330, −0.0326] holds the paper's Δ_grow (−0.0328) but not its interaction
    (−0.0332): the claims say so, each against its own value (Δ_joint 0 here, so both intervals are one)."""
    phases = fixture(grow=(2.90, 2.90 - 0.0328))
    final = (phases["run"] == "post-grow") & (phases["phase"] == 2)
    phases.loc[final, "ce"] += phases.loc[final, "seed"].map({1: -0.0001, 2: 0.0, 3: 0.0001})
    claims = {c.name.split(" ")[0]: c for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["Δ_grow"].ours.endswith("; paper's value inside"), claims["Δ_grow"].ours
    assert claims["interaction"].ours.endswith("; paper's value outside"), claims["interaction"].ours


def test_one_seed_is_described_without_saying_whether_the_papers_value_is_inside():
    assert sized(pd.Series([-0.0328]), -0.0328) == describe(pd.Series([-0.0328])) == "-0.0328"
    assert sized(pd.Series([-0.0329, -0.0327]), -0.0328).endswith("; paper's value inside")


@pytest.mark.parametrize(("gap", "verdict"), [(0.02, AGREES), (-0.02, DISAGREES)])
def test_the_budget_controls_agree_when_they_end_above_post_grow_as_in_the_paper(gap, verdict):
    """The paper's controls end above post-grow (Table 3: +0.0188 and +0.0098 nats): controls `gap` nats above
    post-grow's final CE (seed by seed, apart by 0.001 per seed) agree, `gap` below disagree."""
    phases = fixture(grow=(2.90, 2.80), noise=0.01)
    post_grow = phases[(phases["run"] == "post-grow") & (phases["phase"] == 2)].set_index("seed")["ce"]
    controls = [phase_rows(run, "post", [[post_grow[s] + gap + 0.001 * s for s in (1, 2, 3)]], (1, 2, 3), active=[3])
                for run in ("post-joint-long", "post-joint-longer")]
    phases = pd.concat([phases, pd.DataFrame(controls[0] + controls[1])], ignore_index=True)
    claim = next(c for c in check_claims(Results(phases), pd.DataFrame(), 0.01) if c.name.startswith("budget"))
    assert claim.verdict == verdict


def removal_rows(pre: tuple[float, float], post: tuple[float, float], seeds=(1, 2, 3)) -> pd.DataFrame:
    """Block removal at the final checkpoint: the last block's (angular distance, ΔCE) per grow run;
    earlier blocks and checkpoints with large values that the claim must not read."""
    rows = []
    for run, (angle, dce) in (("pre-grow", pre), ("post-grow", post)):
        for seed in seeds:
            common = {"run": run, "seed": seed}
            rows += [{**common, "global_step": 10, "block": 2, "angular_distance": 9.0, "delta_ce": 9.0},
                     {**common, "global_step": 30, "block": 0, "angular_distance": 9.0, "delta_ce": 9.0},
                     {**common, "global_step": 30, "block": 2, "angular_distance": angle + 0.001 * seed,
                      "delta_ce": dce + 0.001 * seed}]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("angle,dce,verdict", [(0.3, 0.3, AGREES), (0.6, 0.3, DISAGREES), (0.3, 0.6, DISAGREES)])
def test_identity_block_claim_needs_under_half_of_post_norms(angle, dce, verdict):
    """The final pre-grow block is near identity when its angle and its ΔCE are each under half of
    post-grow's (`angle`, `dce`: pre's as a fraction of post's)."""
    removal = removal_rows(pre=(0.4 * angle, 2.0 * dce), post=(0.4, 2.0))
    claims = check_claims(Results(fixture(), removal=removal), pd.DataFrame(), 0.01)
    claim = next(c for c in claims if c.name.startswith("final pre-grow block"))
    assert claim.verdict == verdict


def with_controls(phases: pd.DataFrame, freeze=(3.00, 2.95), reset=(2.905, 2.795)) -> pd.DataFrame:
    """`phases` plus the freeze and grow-reset controls, with final CEs (pre, post)."""
    rows = []
    for curriculum, (pre, post) in (("freeze", freeze), ("grow-reset", reset)):
        for placement, ce in (("pre", pre), ("post", post)):
            rows += phase_rows(f"{placement}-{curriculum}", placement, [3.5, 3.2, ce], sorted(phases["seed"].unique()))
    return pd.concat([phases, pd.DataFrame(rows)], ignore_index=True)


def test_freeze_table_prints_the_difference_of_the_gaps():
    frame = tableA3(Results(with_controls(fixture())), ref()).frame().set_index(["row", "column"])
    # Δ_freeze = 2.95 − 3.00 = −0.05; Δ_grow = 2.80 − 2.90 = −0.10
    assert frame.loc[("Δ_freeze − Δ_grow", "Freeze"), "mean"] == pytest.approx(0.05)
    assert frame.loc[("Δ_freeze − Δ_grow", "Freeze"), "paper"] == pytest.approx(-0.0004)


def test_reset_table_and_claim():
    phases = with_controls(fixture())
    frame = tableB3(Results(phases), ref()).frame().set_index(["row", "column"])
    assert frame.loc[("Δ reset − grow (pre)", "Grow-reset"), "mean"] == pytest.approx(0.005)
    assert frame.loc[("Δ (Post−Pre)", "Grow-reset"), "mean"] == pytest.approx(-0.11)
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["grow"] == AGREES
    far = with_controls(fixture(), reset=(2.95, 2.795))  # pre's reset 0.05 above its grow: not ≈
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(far), pd.DataFrame(), 0.01)}
    assert claims["grow"] == DISAGREES


def rms_rows(run: str, seed: int, step: int, structural: float, regular: float, kurtosis: float) -> list[dict]:
    placement = run.split("-")[0]
    common = {"run": run, "seed": seed, "phase": 0, "global_step": step, "placement": placement, "std": 1.0}
    return [{**common, "boundary": 1, "tokens": "structural", "mean": structural, "kurtosis": 3.0},
            {**common, "boundary": 1, "tokens": "regular", "mean": regular, "kurtosis": 3.0},
            {**common, "boundary": 1, "tokens": "all", "mean": regular, "kurtosis": kurtosis},
            {**common, "boundary": 2, "tokens": "all", "mean": regular, "kurtosis": kurtosis / 2}]


def test_kurtosis_and_structural_token_claims():
    """The paper's pattern (pre-norm: heavy-tailed RMS, structural tokens far above regular ones and
    rising; post-norm: both alike) agrees; its mirror image disagrees."""
    phases = fixture(seeds=(1,))

    def claims_for(pre, post):
        rms = pd.DataFrame(rms_rows("pre-grow", 1, 10, *pre[0]) + rms_rows("pre-grow", 1, 30, *pre[1])
                           + rms_rows("post-grow", 1, 10, *post[0]) + rms_rows("post-grow", 1, 30, *post[1]))
        return {c.name.split(" ")[0]: c for c in check_claims(Results(phases), rms, 0.01)}

    paper_like = claims_for(pre=[(119, 7.1, 900), (425, 11.5, 2500)], post=[(2.4, 2.3, 5), (2.45, 2.40, 4)])
    assert paper_like["pre-norm"].verdict == AGREES and paper_like["pre-norm"].ours == "pre 2500.0, post 4.0"
    assert paper_like["scale"].verdict == AGREES
    mirrored = claims_for(pre=[(2.4, 2.3, 5), (2.45, 2.40, 4)], post=[(119, 7.1, 900), (425, 11.5, 2500)])
    assert mirrored["pre-norm"].verdict == DISAGREES and mirrored["scale"].verdict == DISAGREES
    # heavier-tailed, but only 5× post-norm's kurtosis: short of the claim's 10×
    five_times = claims_for(pre=[(119, 7.1, 900), (425, 11.5, 20)], post=[(2.4, 2.3, 5), (2.45, 2.40, 4)])
    assert five_times["pre-norm"].verdict == DISAGREES
    # the right direction at a fraction of the paper's magnitude (the embedded default before
    # 2026-12-02: structural/regular 1.19, kurtosis 5 against post's 0.4): judged by magnitude, not sign
    trace = claims_for(pre=[(0.11, 0.10, 4.0), (0.121, 0.102, 5.1)], post=[(1.0, 1.0, 0.4), (1.0, 1.0, 0.4)])
    assert trace["pre-norm"].verdict == DISAGREES and trace["scale"].verdict == DISAGREES
    # a quarter of the paper's magnitude and more agrees
    quarter = claims_for(pre=[(40, 4.0, 100), (99, 10.0, 650)], post=[(1.0, 1.0, 5), (1.0, 1.0, 5)])
    assert quarter["pre-norm"].verdict == AGREES and quarter["scale"].verdict == AGREES


def test_scale_drift_is_the_rms_spread_at_the_last_checkpoint_over_the_first():
    """Pre-grow's per-token RMS std after block 0 growing ×4 against post-grow's ×1.5 agrees with
    the claim; the same spread shrinking ×4 disagrees, and so does growing by far less than the paper's."""

    def drift(pre: tuple[float, float], post: tuple[float, float]):  # the std at the first, the last checkpoint
        rows = [{**row, "std": std} for run, stds in (("pre-grow", pre), ("post-grow", post))
                for step, std in zip((10, 30), stds, strict=True) for row in rms_rows(run, 1, step, 10.0, 5.0, 9.0)]
        claims = check_claims(Results(fixture(seeds=(1,))), pd.DataFrame(rows), 0.01)
        return next(c for c in claims if c.name.startswith("scale drift"))

    grows = drift(pre=(1.0, 4.0), post=(1.0, 1.5))
    assert grows.ours == "pre ×4.00, post ×1.50" and grows.verdict == AGREES
    assert drift(pre=(4.0, 1.0), post=(1.0, 1.5)).verdict == DISAGREES
    # the right direction at a fraction of the paper's ×3.4: pre ×1.2 against post ×1.0 is too small to agree
    assert drift(pre=(1.0, 1.2), post=(1.0, 1.0)).verdict == DISAGREES


def test_placements_table_and_figure_against_pre_norm(tmp_path, monkeypatch):
    """Known answers: sandwich ties pre-norm under joint and beats it by 0.2 under grow (interaction
    −0.2); deepnorm is 0.1 worse under both (interaction 0); pairing by seed removes the seed noise. Fig. P1
    draws the same effects: a bar per effect and placement, its height the mean."""
    rows = fixture(noise=0.05).to_dict("records")
    for placement, (j, g) in {"sandwich": (3.00, 2.70), "deepnorm": (3.10, 3.00)}.items():
        for seed, offset in zip((1, 2, 3), (-0.05, 0.0, 0.05), strict=True):
            rows += phase_rows(f"{placement}-joint", placement, [[j + offset]], [seed], active=[3])
            rows += phase_rows(f"{placement}-grow", placement, [3.5, 3.2, [g + offset]], [seed])
    results = Results(pd.DataFrame(rows))
    frame = tableP1(results, ref()).frame().set_index(["row", "column"])
    assert frame.loc[("Δ sandwich − pre", "Joint"), "mean"] == pytest.approx(0.0, abs=1e-12)
    assert frame.loc[("Δ sandwich − pre", "Grow"), "mean"] == pytest.approx(-0.2)
    assert frame.loc[("Δ sandwich − pre", "Interaction (Δ_grow − Δ_joint)"), "mean"] == pytest.approx(-0.2)
    assert frame.loc[("Δ sandwich − pre", "Grow"), "std"] == pytest.approx(0.0, abs=1e-12)
    assert frame.loc[("Δ deepnorm − pre", "Interaction (Δ_grow − Δ_joint)"), "mean"] == pytest.approx(0.0, abs=1e-12)
    assert frame.loc[("Δ post − pre", "Grow"), "mean"] == pytest.approx(-0.1)
    assert frame.loc[("sandwich", "norm weights / layer"), "text"] == "4·H"
    paths = figures.placements(results.final, placements_with_roles(results), tmp_path)
    assert [p.suffix for p in paths] == [".png", ".pdf"] and paths[0].stat().st_size > 1000
    bars = {}

    def record(fig, path, **options):
        (ax,) = fig.axes
        names = [label.get_text() for label in ax.get_xticklabels()]
        for container in ax.containers:
            if isinstance(container, BarContainer):  # not the error bars
                bars[container.get_label()] = dict(zip(names, (bar.get_height() for bar in container), strict=True))
        return []

    monkeypatch.setattr(figures, "save", record)
    figures.placements(results.final, placements_with_roles(results), tmp_path)
    expected = {"sandwich": (0.0, -0.2, -0.2), "deepnorm": (0.1, 0.1, 0.0), "post": (0.0, -0.1, -0.1)}
    for placement, values in expected.items():
        drawn = tuple(bars[effect][placement] for effect in ("Δ_joint", "Δ_grow", "interaction"))
        assert drawn == pytest.approx(values, abs=1e-9), placement
    with pytest.raises(NotBuilt, match="placement other than pre-norm"):
        tableP1(Results(fixture().query("run.str.startswith('pre')")), ref())


def test_norm_weights_match_the_layers():
    """tables.NORM_WEIGHTS (torch-free text) counts the RMSNorm weights of each placement's layer."""
    from transformers import Qwen3Config

    from normgrow.model.layout import LAYOUTS, PLACEMENTS
    from normgrow.model.student import DecoderLayer

    config = Qwen3Config(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, num_hidden_layers=1, vocab_size=32)
    h, d = config.hidden_size, config.head_dim
    assert set(NORM_WEIGHTS) == set(PLACEMENTS)
    for name in LAYOUTS:
        layer = DecoderLayer(config, 0, 1, name)
        weights = sum(p.numel() for n, p in layer.named_parameters() if n.endswith("norm.weight")) - 2 * d
        assert weights == eval(NORM_WEIGHTS[name].replace("·", "*"), {"H": h, "head_dim": d}), name


def test_diagnostics_of_every_diagnosed_placement_at_the_final_checkpoint():
    """Table P2 takes each grow run's last checkpoint (not an earlier one), all-token RMS per
    boundary and ΔCE per block, for any placement; a joint run is left out."""
    rms, removal = [], []
    for run, scale in (("pre-grow", 2.0), ("sandwich-grow", 1.0), ("pre-joint", 9.0)):
        for seed in (1, 2):
            for step, factor in ((10, 100.0), (20, 1.0)):  # step 10: an earlier checkpoint
                key = {"run": run, "seed": seed, "phase": 2, "global_step": step, "placement": run.split("-")[0]}
                for b in range(3):
                    for tokens, extra in (("all", 0.0), ("structural", 50.0)):
                        rms.append({**key, "boundary": b, "tokens": tokens, "mean": factor * scale * (b + 1) + extra,
                                    "std": 1.0})
                for block in range(2):
                    removal.append({**key, "block": block, "delta_ce": factor * scale * 0.1 * (block + 1),
                                    "angular_distance": 0.1})
    results = Results(fixture(), removal=pd.DataFrame(removal), rms=pd.DataFrame(rms))
    frame = tableP2(results, ref()).frame().set_index(["row", "column"])
    assert frame.loc[("pre", "RMS boundary 2"), "mean"] == pytest.approx(6.0)
    assert frame.loc[("sandwich", "RMS boundary 0"), "mean"] == pytest.approx(1.0)
    assert frame.loc[("sandwich", "ΔCE without block 1"), "mean"] == pytest.approx(0.2)
    assert frame.loc[("pre", "RMS boundary 0"), "seeds"] == 2
    assert "pre-joint" not in {row for row, _ in frame.index} and "pre" in {row for row, _ in frame.index}
    with pytest.raises(NotBuilt, match="diagnostics"):
        tableP2(Results(fixture()), ref())


def test_fig4_has_a_column_per_diagnosed_grow_run(tmp_path, monkeypatch):
    """Fig. 4 draws pre-grow and post-grow first, then every other diagnosed grow run; no joint run."""
    key = {"seed": 1, "phase": 0, "global_step": 10, "tokens": "all", "boundary": 0, "mean": 1.0, "std": 0.1}
    rms = pd.DataFrame([{**key, "run": run, "placement": run.split("-")[0]}
                        for run in ("sandwich-grow", "post-grow", "pre-grow", "pre-joint")])
    titles = []

    def record(fig, path, **options):
        titles.extend(ax.get_title() for ax in fig.axes if ax.get_title())
        return []

    monkeypatch.setattr(figures, "save", record)
    figures.boundary_rms(rms, fixture(), tmp_path)
    assert titles == ["pre-grow", "post-grow", "sandwich-grow"]


def test_fig3b_draws_post_minus_pre_at_each_phase_end(tmp_path, monkeypatch):
    """Fig. 3b's right panel: a bar per phase, its height the mean over seeds of post-grow − pre-grow."""
    phases = fixture(grow=(2.90, 2.80))
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 1), "ce"] = 3.05
    heights = {}

    def record(fig, path, **options):
        (bars,) = (c for c in fig.axes[1].containers if isinstance(c, BarContainer))
        heights.update((round(bar.get_x() + bar.get_width() / 2), bar.get_height()) for bar in bars)
        return []

    monkeypatch.setattr(figures, "save", record)
    figures.crossover(Results(phases).phases, tmp_path)
    assert heights == pytest.approx({0: 0.0, 1: -0.15, 2: -0.10})


def test_growth_operator_tables_set_each_operator_against_the_papers(tmp_path):
    """Known answers: under zero, post-norm beats pre-norm by 0.1 (Δ_grow −0.1) where under random
    it trails by 0.1; the transition rows are found per operator and placement."""
    rows = fixture(grow=(2.90, 3.00)).to_dict("records")
    for placement, final in (("pre", 2.95), ("post", 2.85)):
        rows += phase_rows(f"{placement}-grow+zero", placement, [3.5, 3.2, final], [1, 2, 3])
    results = Results(pd.DataFrame(rows))
    frame = tableG1(results, ref()).frame().set_index(["row", "column"])
    assert frame.loc[("Δ_grow (Post−Pre)", "random"), "mean"] == pytest.approx(0.1)
    assert frame.loc[("Δ_grow (Post−Pre)", "zero"), "mean"] == pytest.approx(-0.1)
    assert frame.loc[("Post-norm", "zero"), "seeds"] == 3
    with pytest.raises(NotBuilt, match="growth operator other than random"):
        tableG1(Results(fixture()), ref())
    transitions = pd.DataFrame([{"run": run, "seed": seed, "phase": p, "placement": run.split("-")[0], "jump": jump,
                                 "auc_1k": 0.1, "auc_5k": 0.05, "recovery_paper_steps": 1000.0}
                                for run, jump in (("pre-grow", 0.5), ("post-grow", 0.4), ("pre-grow+zero", 0.0),
                                                  ("post-grow+zero", 0.2))
                                for seed in (1, 2, 3) for p in (1, 2)])
    paths = figures.growth_operators(results.final, growth_operators(results), tmp_path)
    assert growth_operators(results) == ["random", "zero"] and paths[0].stat().st_size > 1000
    g2 = tableG2(Results(pd.DataFrame(rows), transitions), ref()).frame().set_index(["row", "column"])
    assert g2.loc[("phase 1 · zero · pre", "jump"), "mean"] == 0.0
    assert g2.loc[("phase 2 · random · post", "jump"), "mean"] == pytest.approx(0.4)
