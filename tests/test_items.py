"""normgrow.paper.items names every table and figure the paper's code writes, once: the names the
figure and table code saves are exactly its keys, and its captions are plain text (rendered as RST by
the Snakemake report, as Markdown and HTML by report.md and index.html)."""

import ast
import re

from conftest import REPO

from normgrow.paper.items import ITEMS

PAPER = REPO / "src" / "normgrow" / "paper"


def saved_names() -> set[str]:
    """Every name passed to figures.save(fig, directory / NAME) or Table(NAME) in the paper's code."""
    names = set()
    for path in PAPER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("save", "Table")
                    and node.args):
                name = node.args[0] if node.func.id == "Table" else node.args[-1]
                name = name.right if isinstance(name, ast.BinOp) and isinstance(name.op, ast.Div) else name
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    names.add(name.value)
    return names


def test_the_registry_names_exactly_what_the_paper_writes():
    assert saved_names() == set(ITEMS)


def test_every_caption_is_plain_text_with_its_label_and_section():
    for name, item in ITEMS.items():
        assert item.section in ("Main text", "Appendix", "Beyond the paper"), name
        assert item.label and item.shows and item.caption, name
        assert not re.search(r"[*`|]|\w_(\s|$)", item.caption), (name, "markup in the caption")
