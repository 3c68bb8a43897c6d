"""CITATION.cff and LICENSE agree with pyproject.toml."""

import tomllib

import yaml
from conftest import REPO


def test_citation_and_license_match_the_project():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert citation["version"] == project["version"] and citation["license"] == project["license"] == "MIT"
    paper = citation["references"][0]
    assert paper["type"] == "article" and paper["year"] == 2026
    assert paper["title"] == "Rethinking Normalization Placement for LLMs: Post-Norm under Curriculum Depth Growing"
    assert len(paper["authors"]) == 10
    assert (REPO / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2026 normgrow contributors")
