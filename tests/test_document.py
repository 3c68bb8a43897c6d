"""The analysis package: one document model rendered to Markdown and HTML, no torch, package data
found through the package."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
from conftest import REPO

from normgrow.paper.document import Code, Figure, Grid, Heading, Items, Paragraph, to_html, to_markdown

DOC = [Heading("Report", 1), Paragraph("Small run.", "warning", "Warning."),
       Grid(["claim", "verdict"], [["|a − b| ≤ m", "agrees"], ["x < y", "–"]], ["agrees", None]),
       Items([("git commit", "abc", True), ("torch", "2.13.0", False)]), Code("a: 1\n", "yaml"),
       Paragraph("a note", "note")]


def test_markdown_rendering():
    md = to_markdown(DOC)
    assert md.startswith("# Report\n")
    assert "> **Warning.** Small run." in md
    lines = md.splitlines()
    header = lines.index("| claim | verdict |")
    assert lines[header + 1] == "|---|---|"
    # a "|" inside a cell is escaped, so the row keeps its two cells; the status cell is bold
    assert lines[header + 2] == "| \\|a − b\\| ≤ m | **agrees** |"
    assert lines[header + 3] == "| x < y | – |"
    assert "- git commit: `abc`" in md and "- torch: 2.13.0" in md
    assert "```yaml\na: 1\n```" in md and "*a note*" in md


def test_html_rendering_escapes_and_embeds(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "fig.png").write_bytes(b"\x89PNG fake")
    page = to_html([*DOC, Figure(Path("figures/fig.png"), "Fig. 1 <b>")], "t", tmp_path)
    assert "<td>x &lt; y</td>" in page and "<td class='agrees'>agrees</td>" in page
    assert "<strong>Warning.</strong> Small run." in page and "<code>abc</code>" in page
    assert "data:image/png;base64,iVBORyBmYWtl" in page and "Fig. 1 &lt;b&gt;" in page


def test_grid_from_frame_keeps_row_labels():
    grid = Grid.from_frame(pd.DataFrame({"CE": ["1.0"]}, index=["Pre"]))
    assert grid.columns == ["", "CE"] and grid.rows == [["Pre", "1.0"]]



def test_the_wheel_carries_its_package_data(tmp_path):
    """An installed package finds the schema and the paper's numbers through importlib.resources."""
    source = tmp_path / "source"  # a copy: building in the checkout would leave build/ behind
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(source)], check=True, capture_output=True)
    names = zipfile.ZipFile(next(tmp_path.glob("normgrow-*.whl"))).namelist()
    assert "normgrow/design/config.schema.yaml" in names and "normgrow/paper/reference.yaml" in names
    assert "normgrow/paper/report.py" in names
