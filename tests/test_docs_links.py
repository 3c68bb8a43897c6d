"""Every relative link in README.md, CONTRIBUTING.md and docs/*.md reaches a file of the repository and,
with `#anchor`, a heading of that file (GitHub's anchors: the heading lowercased, punctuation dropped,
spaces as hyphens)."""

import re

from conftest import REPO

DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(text: str) -> set[str]:
    """GitHub's anchor of every Markdown heading of `text` (outside code blocks)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", prose, flags=re.MULTILINE)}


def broken(doc) -> list[str]:
    wrong = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            wrong.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            wrong.append(f"{target}: no heading #{anchor} in {file.name}")
    return wrong


def test_every_relative_link_reaches_a_file_and_its_heading():
    wrong = {doc.name: found for doc in DOCS if (found := broken(doc))}
    assert not wrong, wrong
