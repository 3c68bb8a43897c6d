"""The report of an end-to-end CI run: every table in three formats, every figure in two, and a
page that renders in headless Chromium with every image loaded."""

import json
import re

import pytest
from conftest import headless_dom, latex_errors

TABLES = ["table1", "table2", "table3", "table4", "tableA1", "tableA2", "tableA3", "tableA4", "tableB3", "tableP1",
          "tableP2"]
FIGURES = ["fig1_placements", "fig2_curricula", "validation_loss", "fig3a_interaction", "fig3b_crossover",
           "fig4_boundary_rms", "fig5a_token_types", "fig5b_grow_validation", "figA1_rms_distribution",
           "figA2_block_removal", "figP1_placements"]
CHECK_IMAGES = """<script>window.addEventListener('load', () => {
  const broken = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).length;
  document.body.setAttribute('data-images', document.images.length);
  document.body.setAttribute('data-broken', broken);
});</script>"""


@pytest.mark.slow
def test_every_table_and_figure_is_written(ci_workdir):
    paper = ci_workdir / "results" / "paper"
    for name in TABLES:
        for ext in ("csv", "md", "tex"):
            assert (paper / "tables" / f"{name}.{ext}").stat().st_size > 0, (name, ext)
    for name in FIGURES:
        for ext in ("png", "pdf"):
            assert (paper / "figures" / f"{name}.{ext}").stat().st_size > 1000, (name, ext)
    report = (paper / "report.md").read_text()
    assert "## Claims" in report and "Warning" in report and "## Regime" in report
    # the preconditions beside the conditions, and no "in regime" while one is absent or unmeasured
    assert "| precondition | paper | this run | threshold | status |" in report
    assert ("ABSENT" in report or "not measured" in report) and "In the paper's regime" not in report
    verdict = r"\*\*(agrees|disagrees|inconclusive)( \(1 seed\))? \((not in regime|regime not shown)\)\*\*"
    assert re.search(verdict, report)
    assert "git commit" in report and "text SHA-256" in report


@pytest.mark.slow
def test_the_tables_equal_an_independent_recomputation_from_the_raw_outputs(ci_workdir):
    """tests/recompute_tables.py, which imports nothing of normgrow, finds each value it recomputes
    from the phases' eval.csv and train.csv in the tables."""
    from recompute_tables import not_in_tables, seed_means

    assert len(seed_means(ci_workdir)) > 30 and not_in_tables(ci_workdir) == []


@pytest.mark.slow
def test_report_renders_in_chromium(ci_workdir, tmp_path, chromium):
    page = tmp_path / "index.html"
    page.write_text((ci_workdir / "results" / "paper" / "index.html").read_text().replace("</body>",
                                                                                         CHECK_IMAGES + "</body>"))
    dom = headless_dom(chromium, page, tmp_path / "profile", 5000, 120)
    images = re.search(r'data-images="(\d+)"', dom)
    broken = re.search(r'data-broken="(\d+)"', dom)
    assert images and broken, dom[-2000:]
    assert int(images.group(1)) == len(FIGURES)
    assert int(broken.group(1)) == 0


@pytest.mark.slow
def test_every_tex_table_of_the_run_compiles(ci_workdir, tmp_path, pdflatex):
    """Every `.tex` table the CI run wrote compiles with pdflatex, booktabs and graphicx and fits the text
    width of a one-column article (tests/test_latex.py compiles every table builder's output on
    synthetic results in the fast tier)."""
    tables = sorted((ci_workdir / "results" / "paper" / "tables").glob("*.tex"))
    assert {p.stem for p in tables} >= set(TABLES)
    assert latex_errors(pdflatex, tables, tmp_path) == {}


@pytest.mark.slow
def test_renaming_every_run_changes_no_table_or_verdict(ci_workdir, tmp_path):
    """Tables, claims and figures find runs by role (normgrow.paper.roles): the CI run's results rebuilt
    under other run names give byte-identical tables and the same claim verdicts."""
    import json
    from pathlib import Path

    import pandas as pd
    from conftest import REPO

    from normgrow.cli import read_configs
    from normgrow.design.config import science_config
    from normgrow.paper.report import build_paper

    config = science_config(read_configs([REPO / "config.yaml", REPO / "configs" / "ci.yaml"]))
    results = ci_workdir / "results"
    names = {run: f"x{i}-{run[::-1]}" for i, run in enumerate(config["runs"])}

    def build(out: Path, rename: dict) -> Path:
        renamed = json.loads(json.dumps(config))
        renamed["runs"] = {rename.get(run, run): spec for run, spec in config["runs"].items()}
        renamed["diagnostics"]["runs"] = [rename.get(run, run) for run in config["diagnostics"]["runs"]]
        if renamed.get("build"):
            renamed["build"] = [rename.get(run, run) for run in renamed["build"]]
        metrics = {}
        for name in ("evals", "phases", "transitions", "boundary_rms", "block_removal"):
            frame = pd.read_csv(results / "metrics" / f"{name}.csv")
            if "run" in frame:
                frame["run"] = frame["run"].map(lambda run: rename.get(run, run))
            metrics[name] = out / f"{name}.csv"
            frame.to_csv(metrics[name], index=False)
        diagnostics = []
        for path in sorted((results / "diagnostics").rglob("*.json")):
            report = json.loads(path.read_text())
            for checkpoint in report["checkpoints"]:
                checkpoint["run"] = rename.get(checkpoint["run"], checkpoint["run"])
            diagnostics.append(out / f"diag{len(diagnostics)}.json")
            diagnostics[-1].write_text(json.dumps(report))
        build_paper(out / "paper", metrics, diagnostics, json.loads((results / "teacher" / "check.json").read_text()),
                    json.loads((results / "teacher" / "probe.json").read_text()),
                    json.loads((results / "data" / "tokens" / "meta.json").read_text()), renamed,
                    results / "provenance" / "versions.tsv")
        return out / "paper"

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    original, renamed = build(tmp_path / "a", {}), build(tmp_path / "b", names)
    tables = sorted(p.name for p in (original / "tables").iterdir())
    assert len(tables) >= 27 and tables == sorted(p.name for p in (renamed / "tables").iterdir())
    for name in tables:
        assert (original / "tables" / name).read_bytes() == (renamed / "tables" / name).read_bytes(), name

    def claims(paper: Path) -> str:
        report = (paper / "report.md").read_text()
        return report[report.index("## Claims"):].split("\n## ", 1)[0]

    assert "agrees" in claims(original) or "disagrees" in claims(original)
    assert claims(original) == claims(renamed)
    assert sorted(p.name for p in (original / "figures").iterdir()) == sorted(
        p.name for p in (renamed / "figures").iterdir())


def test_the_report_shows_each_hub_source_with_its_revision_or_unpinned(tmp_path):
    """The teacher (and its tokenizer) and the dataset read from the hub, at teacher.revision and
    data.source.revision; a teacher pretrained here or in a local directory, a corpus file: none."""
    from normgrow.paper.provenance import hub_sources

    sha = "49e3418fbbbca6ecbdf9608b4d22e5a407081db4"
    config = {"teacher": {"name": "Qwen/Qwen3-8B-Base", "revision": sha}, "tokenizer": {"train": False},
              "data": {"source": {"loader": "datasets", "path": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT"}}}
    assert hub_sources(config) == {"teacher and tokenizer: Qwen/Qwen3-8B-Base": sha,
                                   "dataset: HuggingFaceFW/fineweb-edu (sample-10BT)":
                                       "unpinned (the default branch when it was read; pin a commit sha)"}
    config["teacher"]["revision"] = "main"
    assert "a branch or tag: can move" in hub_sources(config)["teacher and tokenizer: Qwen/Qwen3-8B-Base"]
    config["teacher"]["name"] = str(tmp_path)
    config["data"]["source"] = {"loader": "datasets", "path": "json", "data_files": "corpus.jsonl"}
    assert hub_sources(config) == {}
    assert hub_sources({**config, "teacher": {"name": None}, "data": {"source": {"loader": "package"}}}) == {}


@pytest.mark.parametrize(("steps", "teacher", "far"), [
    (1_000, "Qwen/Qwen3-8B-Base", True),   # short phases, the paper's teacher
    (50_000, None, True),                  # the paper's phase length, a teacher pretrained here
    (1_000, None, True),
    (50_000, "Qwen/Qwen3-8B-Base", False),  # configs/paper.yaml
])
def test_a_run_is_far_from_the_paper_when_its_phases_are_short_or_its_teacher_pretrained_here(steps, teacher, far):
    """Either condition alone puts the scale warning on the report (report.is_far_from_paper)."""
    from normgrow.paper.report import is_far_from_paper

    assert is_far_from_paper({"train": {"phase_steps": steps}, "teacher": {"name": teacher}}) is far


def test_the_rms_distributions_show_each_grow_run_at_its_latest_checkpoint(tmp_path):
    """Fig. A1 (figures.rms_distributions) reads, of pre-grow and post-grow, the diagnostics of the latest
    checkpoint over every diagnostics file (the first seed at a tie), pre-grow first; other roles not at all."""
    from normgrow.paper.report import final_reports
    from normgrow.paper.roles import Role

    def report(run: str, seed: int, step: int) -> dict:
        return {"run": run, "seed": seed, "global_step": step}

    roles = {"a": Role("pre", "grow"), "b": Role("post", "grow"), "c": Role("pre", "joint")}
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps({"checkpoints": [report("b", 2, 40), report("b", 1, 10), report("b", 1, 40),
                                                 report("a", 1, 20)]}))
    second.write_text(json.dumps({"checkpoints": [report("a", 1, 30), report("a", 1, 5), report("c", 1, 99)]}))
    chosen = final_reports([first, second], roles)
    assert list(chosen) == ["pre-grow", "post-grow"]
    assert chosen["pre-grow"] == report("a", 1, 30) and chosen["post-grow"] == report("b", 1, 40)


@pytest.mark.parametrize(("seeds", "warning"), [(1, "One seed: "), (2, "2 seeds: "), (3, None)])
def test_the_report_warns_under_three_seeds_that_it_cannot_show_parity(seeds, warning):
    """Parity and the interaction need an interval over at least MIN_PARITY_SEEDS (3) paired seeds: one or two
    seeds put the warning at the top of the report, three do not."""
    import pandas as pd

    from normgrow.paper.document import Paragraph
    from normgrow.paper.reference import paper_reference
    from normgrow.paper.report import report_document

    context = {"far": False, "scale": dict.fromkeys(paper_reference()["scale"], "-"), "regime": [],
               "preconditions": [], "massive": pd.DataFrame(columns=["model"]), "outside": [], "unmeasured": [],
               "claims": [], "margin": 0.01, "tables": [], "seeds": seeds, "not_built": {}, "schematics": [],
               "figures": [], "config": {},
               "provenance": {"git commit": "abc", "packages": {}, "data": {}, "hub": {}, "code": [],
                              "current code": {"digest": "x", "torch": "t", "transformers": "t"}, "code warning": ""}}
    warnings = [b.text for b in report_document(context) if isinstance(b, Paragraph) and b.kind == "warning"]
    few = [w for w in warnings if "cannot show parity" in w]
    assert (few == []) if warning is None else (len(few) == 1 and few[0].startswith(warning)), warnings
