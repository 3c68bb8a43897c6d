"""`snakemake --report report.zip` on the finished CI run (conftest.ci_workdir): our index.html as the
landing page, every table and figure of results/paper one by one with its own caption, the resolved
configuration and the software versions, and a report.html that renders in headless Chromium."""

from __future__ import annotations

import html
import importlib.metadata
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO, headless_dom, snakemake_command

# The Snakemake report's names of results/paper's tables and figures (normgrow.paper.items,
# restated here); each caption opens with this name in bold.
NAMES = {"table1": "Table 1", "table2": "Table 2", "table3": "Table 3", "table4": "Table 4", "tableA1": "Table A1",
         "tableA2": "Table A2", "tableA3": "Table A3", "tableA4": "Table A4", "tableB3": "Table B3",
         "tableP1": "Table P1", "tableP2": "Table P2", "fig1_placements": "Fig. 1", "fig2_curricula": "Fig. 2",
         "fig3a_interaction": "Fig. 3a", "fig3b_crossover": "Fig. 3b",
         "fig4_boundary_rms": "Fig. 4", "fig5a_token_types": "Fig. 5a", "fig5b_grow_validation": "Fig. 5b",
         "figA1_rms_distribution": "Fig. A1", "figA2_block_removal": "Fig. A2", "figP1_placements": "Fig. P1",
         "validation_loss": "Validation loss"}
FORMATS = {"tables": ("csv", "md", "tex"), "figures": ("png", "pdf")}
TYPES = {"csv": "CSV", "md": "Markdown", "tex": "LaTeX", "png": "image (PNG)", "pdf": "vector (PDF)"}
# Injected before the report's scripts: every uncaught error or console.error, written into the DOM.
CATCH_ERRORS = """<script>window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));
const __consoleError = console.error;
console.error = (...args) => { window.__errors.push(args.map(String).join(' ')); __consoleError(...args); };
window.addEventListener('load', () => setTimeout(() => {
  document.body.setAttribute('data-errors', JSON.stringify(window.__errors));
}, 1000));
</script>"""


def script_json(page: str, name: str):
    """The JSON value the report page assigns to `var name` (in its <script id="name">)."""
    match = re.search(rf'<script id="{name.replace("_", "-")}">\s*var {name} = (.*?);\s*</script>', page, re.S)
    assert match, f"no {name} in report.html"
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def snakemake_report(ci_workdir, tmp_path_factory) -> dict:
    """The CI run's `snakemake --report report.zip`, unpacked: its folder, page and results."""
    out = tmp_path_factory.mktemp("snakemake-report")
    proc = subprocess.run(snakemake_command(ci_workdir, "--report", str(out / "report.zip")), capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with zipfile.ZipFile(out / "report.zip") as archive:
        archive.extractall(out)
    folder = out / "report"
    page = (folder / "report.html").read_text()
    return {"folder": folder, "page": page, "results": script_json(page, "results"),
            "categories": script_json(page, "categories"), "workdir": ci_workdir}


def text_of(caption: str) -> str:
    """A caption's text, without its HTML tags."""
    return re.sub(r"<[^>]+>", "", caption)


def captions(report: dict) -> dict[str, str]:
    return {path: result["caption"] for path, result in report["results"].items()}


@pytest.mark.slow
def test_every_table_and_figure_is_a_report_item_with_its_caption(snakemake_report):
    results = snakemake_report["results"]
    paper = snakemake_report["workdir"] / "results" / "paper"
    files = sorted(p for kind, formats in FORMATS.items() for p in (paper / kind).iterdir() if p.suffix[1:] in formats
                   and (kind != "tables" or p.stem.isalnum()))
    assert len(files) == 11 * 3 + 11 * 2  # the CI config builds every table and figure
    # a table's bare tabular (NAME_tabular.tex) and the headline macros are files for one's own paper, not items
    own_paper = sorted((paper / "tables").glob("*_*.tex"))
    assert len(own_paper) == 11 + 1 and not any(str(p.relative_to(snakemake_report["workdir"])) in results
                                                 for p in own_paper)
    for path in files:
        key = str(path.relative_to(snakemake_report["workdir"]))
        assert key in results, key
        result = results[key]
        name = path.stem
        assert name in NAMES, f"{name}: a table or figure the report does not name (normgrow.paper.items)"
        labels = result["labels"]
        assert labels == {"item": NAMES[name], "shows": labels["shows"], "type": TYPES[path.suffix[1:]]}, labels
        assert labels["shows"], name
        assert result["job_properties"]["rule"] == "paper"
        caption = result["caption"]
        assert f"<strong>{NAMES[name]} — " in caption or f"<strong>{NAMES[name]} " in caption, (name, caption)
        assert "no caption yet" not in caption, (name, caption)
        assert "This file:" in caption
        if path.suffix == ".md":  # the table itself, in the caption (Snakemake shows no Markdown)
            assert html.escape(path.read_text().splitlines()[2], quote=False) in caption, caption
        # the report carries the file itself, byte for byte
        assert (snakemake_report["folder"] / result["data_uri"]).read_bytes() == path.read_bytes(), key
    tables = [f for f in files if f.parent.name == "tables"]
    figures = [f for f in files if f.parent.name == "figures"]
    categories = snakemake_report["categories"]
    assert sorted(p for paths in categories["Tables"].values() for p in paths) == sorted(
        str(f.relative_to(snakemake_report["workdir"])) for f in tables)
    assert sorted(p for paths in categories["Figures"].values() for p in paths) == sorted(
        str(f.relative_to(snakemake_report["workdir"])) for f in figures)
    assert {"Main text", "Appendix", "Beyond the paper"} == set(categories["Tables"]) == set(categories["Figures"])


@pytest.mark.slow
def test_our_index_html_is_the_landing_page_with_its_files(snakemake_report):
    result = snakemake_report["results"]["results/paper/index.html"]
    assert result["name"] == "paper.html" and result["mime_type"] == "text/html"
    assert "The normgrow report" in result["caption"]
    landing = snakemake_report["folder"] / result["data_uri"]
    paper = snakemake_report["workdir"] / "results" / "paper"
    assert landing.read_bytes() == (paper / "index.html").read_bytes()
    for name in ("report.md", "tables/table1.md", "figures/fig3a_interaction.png"):  # the directory travels along
        assert (landing.parent / name).read_bytes() == (paper / name).read_bytes(), name


@pytest.mark.slow
def test_the_run_config_and_software_versions_are_in_the_report(snakemake_report):
    results, folder = snakemake_report["results"], snakemake_report["folder"]
    config = results["results/provenance/config.yaml"]
    assert "Resolved configuration" in config["caption"] and "--configfile config.yaml" in text_of(config["caption"])
    resolved = yaml.safe_load((folder / config["data_uri"]).read_text())
    ci = yaml.safe_load((REPO / "configs" / "ci.yaml").read_text())
    assert resolved["train"]["phase_steps"] == ci["train"]["phase_steps"]  # the CI overlay, merged
    assert resolved["student"]["layers_per_block"] == ci["student"]["layers_per_block"]
    assert set(resolved["runs"]) == set(yaml.safe_load((REPO / "config.yaml").read_text())["runs"])

    versions = results["results/provenance/versions.tsv"]
    assert "Software versions" in versions["caption"]
    rows = [line.split("\t") for line in (folder / versions["data_uri"]).read_text().splitlines()[1:]]
    packages = {name: version for kind, name, version in rows if kind == "package"}
    for name in ("torch", "transformers", "snakemake", "pandas"):
        assert packages[name] == importlib.metadata.version(name), name
    system = {name: value for kind, name, value in rows if kind == "system"}
    assert re.match(r"[0-9a-f]{40}", system["workflow git commit"])

    page = results["results/provenance/provenance.html"]
    assert page["mime_type"] == "text/html" and "Provenance of this run" in page["caption"]
    text = (folder / page["data_uri"]).read_text()
    assert f"<td>torch</td><td>{packages['torch']}</td>" in text and "phase_steps: 12" in text
    for result in (config, versions, page):
        assert result["job_properties"]["rule"] == "provenance"


@pytest.mark.slow
def test_captions_and_description_render_without_errors(snakemake_report):
    description = script_json(snakemake_report["page"], "workflow_desc")
    assert "normgrow: post-norm under curriculum depth growing" in description
    assert "3 blocks × 1" in description  # the CI config, through the Jinja template
    categories = snakemake_report["categories"]
    for text in [description, *captions(snakemake_report).values()]:
        assert "System Message" not in text and "Unknown target name" not in text, text
        # links to report panels: only to categories that exist (show_panel is gone from Snakemake's app)
        assert "show_panel" not in text, text
        for category in re.findall(r"app\.showCategory\('([^']*)'\)", text):
            assert category in categories, category


@pytest.mark.slow
def test_report_renders_in_chromium(snakemake_report, tmp_path, chromium):
    folder: Path = snakemake_report["folder"]
    page = folder / "checked.html"
    page.write_text(snakemake_report["page"].replace("<head>", "<head>" + CATCH_ERRORS, 1))
    dom = headless_dom(chromium, page, tmp_path / "profile", 10000, 180)
    errors = re.search(r"data-errors=\"([^\"]*)\"", dom)
    assert errors, dom[-2000:]
    assert json.loads(errors.group(1).replace("&quot;", '"')) == []
    # the React app rendered: the menu lists our categories, the workflow description is shown
    for text in ("Tables", "Figures", "Provenance", "post-norm under curriculum depth growing"):
        assert text in dom, text
