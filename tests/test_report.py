"""The report of an end-to-end CI run: every table in three formats, every figure in two, and a
page that renders in headless Chromium with every image loaded."""

import os
import re
import shutil
import subprocess

import pytest

TABLES = ["table1", "table2", "table3", "table4", "tableA1", "tableA2", "tableA3", "tableA4", "tableB3"]
FIGURES = ["validation_loss", "fig3a_interaction", "fig3b_crossover", "fig4_boundary_rms", "fig5a_token_types",
           "fig5b_grow_validation", "figA1_rms_distribution", "figA2_block_removal"]
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
    assert re.search(r"\*\*(agrees|disagrees|inconclusive)( \(1 seed\))?( \(outside the regime\))?\*\*", report)
    assert "git commit" in report and "text SHA-256" in report


@pytest.mark.slow
def test_report_renders_in_chromium(ci_workdir, tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("NORMGROW_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is required (apt-get install chromium)")
        pytest.skip("chromium is not installed")
    page = tmp_path / "index.html"
    page.write_text((ci_workdir / "results" / "paper" / "index.html").read_text().replace("</body>",
                                                                                         CHECK_IMAGES + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    images = re.search(r'data-images="(\d+)"', dom)
    broken = re.search(r'data-broken="(\d+)"', dom)
    assert images and broken, dom[-2000:]
    assert int(images.group(1)) == len(FIGURES)
    assert int(broken.group(1)) == 0
