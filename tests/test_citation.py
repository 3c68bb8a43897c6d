"""CITATION.cff and LICENSE agree with pyproject.toml, and cffconvert reads the citation back."""

import json
import subprocess
import tomllib

import yaml
from conftest import REPO

PAPER = "Rethinking Normalization Placement for LLMs: Post-Norm under Curriculum Depth Growing"


def test_citation_and_license_match_the_project():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["type"] == "software"
    assert citation["version"] == project["version"] and citation["license"] == project["license"] == "MIT"
    paper = citation["preferred-citation"]
    assert paper["type"] == "article" and paper["year"] == 2026 and paper["title"] == PAPER
    assert len(paper["authors"]) == 10 and citation["references"] == [paper]
    assert (REPO / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2026 normgrow contributors")


# run by cffconvert's own interpreter: the citation validated against the CFF 1.2.0 schema, then the
# software (the root) and the paper (preferred-citation, which cffconvert's CLI does not convert) as BibTeX
READ_BACK = """
import json
from cffconvert import Citation
from cffconvert.behavior_1_2_x.bibtex_object import BibtexObject
citation = Citation(open("CITATION.cff").read())
citation.validate()
paper = {"cff-version": citation.cffversion, **citation.cffobj["preferred-citation"]}
print(json.dumps({"software": citation.as_bibtex("normgrow"), "paper": BibtexObject(paper).as_string("paper"),
                  "year": paper["year"]}))
"""


def test_cffconvert_validates_the_citation_and_writes_the_paper_as_bibtex(cffconvert_python):
    """cffconvert validates CITATION.cff and writes the paper's BibTeX entry with its title and its ten
    authors (family name first), beside the software's; the paper's year as cffconvert reads it is 2026
    (cffconvert 2.0.0 puts a year in BibTeX only from a date-released, which the paper does not have)."""
    proc = subprocess.run([cffconvert_python, "-c", READ_BACK], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    read = json.loads(proc.stdout)
    assert f"title = {{{PAPER}}}" in read["paper"] and read["year"] == 2026
    assert "author = {Ren, Sheng and Wang, Yadong and " in read["paper"] and read["paper"].count(" and ") == 9
    assert "title = {normgrow: " in read["software"]
