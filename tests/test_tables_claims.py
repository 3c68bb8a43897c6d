"""Table builders and claim verdicts on small fixtures whose answers are known."""

import pandas as pd
import pytest

from normgrow.claims import AGREES, DISAGREES, INCONCLUSIVE, check_claims, equivalence_verdict, sign_verdict
from normgrow.tables import Results, build_tables, table1, tableA2
from normgrow.tables import paper_reference as ref


def phase_rows(run, placement, ces, seeds, active=None):
    rows = []
    for seed_index, seed in enumerate(seeds):
        for p, ce in enumerate(ces):
            value = ce[seed_index] if isinstance(ce, list) else ce
            blocks = (active or list(range(1, len(ces) + 1)))[p]
            rows.append({"run": run, "seed": seed, "phase": p, "placement": placement, "active_blocks": blocks,
                         "active_layers": 2 * blocks, "ce": value, "kd": value / 10, "ppl": 2.0,
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


def test_tables_skip_missing_runs():
    phases = fixture()
    only_grow = phases[phases["run"].str.endswith("grow")]
    names = [t.name for t in build_tables(Results(only_grow))]
    assert "table1" not in names and "table2" in names


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


def test_inconclusive_when_seeds_disagree():
    phases = fixture(grow=(2.85, 2.85))
    # seed 1 favours post, seed 3 favours pre: the interval of Δ_grow straddles 0
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 2), "ce"] = [2.80, 2.85, 2.90]
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["Δ_grow"] == INCONCLUSIVE


def test_crossover_claim():
    phases = fixture(grow=(2.90, 2.80))
    # phase 0: pre better (post − pre = +0.1); phase 1 equal: later phases must be < 0 → inconclusive/disagree
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 0), "ce"] = 3.6
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 1), "ce"] = 3.1
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["crossover"] == AGREES
    phases.loc[(phases["run"] == "post-grow") & (phases["phase"] == 1), "ce"] = 3.3
    claims = {c.name.split(" ")[0]: c.verdict for c in check_claims(Results(phases), pd.DataFrame(), 0.01)}
    assert claims["crossover"] == DISAGREES
