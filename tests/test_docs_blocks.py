"""Result tables in the docs are written by the commands they name (tools/docs_block.py): a block is
replaced between its markers only, rewriting it is idempotent, a missing, duplicated or unterminated
block is refused with the file and the marker named, and every block in docs/*.md names a benchmark
(benchmarks/) or a tool (tools/) that has `--write` and writes into that very file."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import docs_block  # noqa: E402

COMMAND = "python benchmarks/trace_vs_plan.py configs/mid.yaml configs/teachers/qwen3-0.6b-base"
MARKER = f"<!-- written by: {COMMAND} --write docs/cluster.md -->"
OTHER = "<!-- written by: python benchmarks/trace_vs_plan.py configs/paper.yaml x --write docs/cluster.md -->"
DOC = f"""# Title

Before.

{MARKER}

| old | table |
|---|---|
| 1 | 2 |

{docs_block.END}

Between.

{OTHER}

kept

{docs_block.END}

After.
"""


def load(name: str, folder: str = "benchmarks"):
    spec = importlib.util.spec_from_file_location(name, REPO / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_the_text_between_the_markers_is_replaced():
    new = docs_block.replace(DOC, COMMAND, "| new |\n|---|\n| 3 |\n")
    assert new == DOC.replace("| old | table |\n|---|---|\n| 1 | 2 |", "| new |\n|---|\n| 3 |")
    assert "kept" in new and "old" not in new


def test_the_block_is_found_without_its_write_argument():
    # written into a copy elsewhere, or with --write=…: the same block
    same = docs_block.replace(DOC, f"{COMMAND} --write /tmp/copy.md", "x")
    assert same == docs_block.replace(DOC, COMMAND, "x")
    assert docs_block.invocation("/anywhere/benchmarks/trace_vs_plan.py", [
        "configs/mid.yaml", "--write=/tmp/c.md", "configs/teachers/qwen3-0.6b-base"]) == COMMAND


def test_rewriting_is_idempotent(tmp_path):
    doc = tmp_path / "cluster.md"
    doc.write_text(DOC)
    assert docs_block.write(doc, COMMAND, "| new |\n|---|\n")
    once = doc.read_text()
    assert not docs_block.write(doc, COMMAND, "| new |\n|---|\n")
    assert doc.read_text() == once
    assert docs_block.replace(once, COMMAND, "\n\n| new |\n|---|\n\n\n") == once  # surrounding blank lines too


@pytest.mark.parametrize(("text", "message"), [
    (DOC.replace(MARKER, MARKER.replace("mid.yaml", "ci.yaml")),
     "no block marked '<!-- written by: python benchmarks/trace_vs_plan"),
    (DOC + f"\n{MARKER}\n\n{docs_block.END}\n", "2 blocks marked '<!-- written by: python benchmarks/trace_vs_plan"),
    (DOC.replace(docs_block.END, "", 1), "has no '<!-- end of written block -->' before the next marker"),
    (DOC.replace(OTHER, ""), "1 '<!-- end of written block -->' without a"),
])
def test_a_missing_duplicated_or_unterminated_block_is_refused_naming_the_file(tmp_path, text, message):
    doc = tmp_path / "cluster.md"
    doc.write_text(text)
    with pytest.raises(docs_block.BlockError, match=f"^{doc}: .*") as error:
        docs_block.write(doc, COMMAND, "new")
    assert message in str(error.value)
    assert doc.read_text() == text  # nothing written


def test_a_misspelt_command_is_refused_before_measuring(tmp_path):
    doc = tmp_path / "cluster.md"
    doc.write_text(DOC)
    with pytest.raises(docs_block.BlockError, match="blocks of benchmarks/trace_vs_plan.py there") as error:
        docs_block.check(doc, COMMAND.replace("mid", "mdi"))
    assert "configs/mdi.yaml" in str(error.value)


def written_blocks():
    return [(doc.name, command) for doc in sorted((REPO / "docs").glob("*.md"))
            for command, _, _ in docs_block.blocks(doc.read_text(), str(doc))]


def test_every_block_in_the_docs_names_the_benchmark_command_that_writes_it():
    found = written_blocks()
    assert {"performance.md", "cluster.md"} <= {doc for doc, _ in found}
    for doc, command in found:
        words = shlex.split(command)
        assert words[:1] == ["python"] and words[1].split("/")[0] in ("benchmarks", "tools"), (doc, command)
        script = REPO / words[1]
        assert script.is_file(), f"{doc}: {command}: no {words[1]}"
        text = script.read_text()
        assert "docs_block.add_write_option(" in text or "kept_results.parser(" in text, \
            f"{doc}: {command}: {words[1]} has no --write"
        assert words[words.index("--write") + 1] == f"docs/{doc}", f"{doc}: {command} writes elsewhere"
        docs_block.check(REPO / "docs" / doc, docs_block.invocation(words[1], words[2:]))  # run as written, finds it
    assert len({(doc, tuple(docs_block.without_write(c))) for doc, c in found}) == len(found)  # one block each


def test_a_written_block_holds_only_what_its_command_writes():
    """Every block in docs/*.md is empty (not written yet) or opens, as every benchmark's output does,
    with the command that wrote it: nothing copied by hand sits between the markers."""
    for doc in sorted((REPO / "docs").glob("*.md")):
        text = doc.read_text()
        for command, start, end in docs_block.blocks(text, str(doc)):
            body = text[start:end].strip()
            words = shlex.split(command)
            lead = f"`{docs_block.invocation(words[1], words[2:])}`"
            assert not body or body.startswith(lead), f"{doc.name}: the block of {command} opens with {body[:80]!r}"


def test_the_benchmark_tables_are_built_from_the_measurements():
    bench = load("distill_step")
    naive = {"seconds": 2.0, "tokens": 100, "peak_mb": 200.0, "flops": 4e12}
    ours = {"seconds": 1.0, "tokens": 100, "peak_mb": 50.0, "flops": 4e12}
    lines = bench.markdown({"embedded": {"naive": naive, "ours": ours, "loss-naive": {"oom": True},
                                         "loss-ours": ours}}, peak=None)
    assert lines[2] == "| embedded | full step | 2 s, 50 tok/s, 200 MB | 1 s, 100 tok/s, 50 MB | 2.00× | 0.25× |"
    assert lines[3].startswith("| embedded | KD + CE alone, 1,024 positions × vocabulary")
    assert lines[3].endswith("| out of memory | 1 s, 100 tok/s, 50 MB | naive out of memory | naive out of memory |")
    assert len(lines) == 4  # no compiled row unless ours-compiled was measured
    assert "MFU 200.0%" in bench.markdown({"paper-shape": {"ours": ours}}, peak=2.0)[2]

    trace = load("trace_vs_plan")
    rows = [dict(checkpointing=c, gpus=g, rows=r, traced=10.0, planned=p)
            for c, g, r, p in [(True, 8, 1, 9.7), (True, 1, 4, 10.8), (False, 1, 1, 11.3), (False, 8, 2, 10.2)]]
    assert trace.summary(rows, setting=False) == [
        "| checkpointing | plan ÷ trace | farthest from 1 |", "|---|---|---|",
        "| off (the config's setting) | 1.02–1.13 | 1.13 (1 GPU, 1 document per rank) |",
        "| on | 0.97–1.08 | 1.08 (1 GPU, 4 documents per rank) |"]


def test_the_suite_time_alternates_the_commits_and_divides_by_the_first():
    suite = load("suite_time", "tools")
    assert suite.alternating(["ci", "fast", "fast"], ["a", "b"]) == [
        ("ci", "a"), ("ci", "b"), ("fast", "b"), ("fast", "a"), ("fast", "a"), ("fast", "b")]
    table = suite.table_of({(0, "a"): 400, (0, "b"): 200, (1, "a"): 61, (1, "b"): 122}, ["ci", "fast"], ["a", "b"])
    assert table.splitlines()[2:] == ["| `ci` | 6 min 40 s | 3 min 20 s | 0.50 |",
                                      "| `fast` | 1 min 01 s | 2 min 02 s | 2.00 |"]


def test_a_regenerator_writes_its_block_or_only_keeps_a_runs_files(tmp_path, capsys):
    """tools/kept_results.py, the regenerators' command line: `--write DOC` puts the rendered block into DOC;
    `--keep RUN` copies the run's files and renders nothing."""
    import kept_results

    doc = tmp_path / "miniature.md"
    marker = "<!-- written by: python tools/formation.py --write docs/miniature.md -->"
    doc.write_text(f"{marker}\n\nold\n\n{docs_block.END}\n")
    parser = kept_results.parser("The study's block.\n", "study", REPO / "docs" / "results" / "formation")
    kept = []
    kept_results.main(parser, "/anywhere/tools/formation.py", kept.append, lambda args: "new", ["--write", str(doc)])
    assert doc.read_text().splitlines()[2] == "new" and not kept
    kept_results.main(parser, "/anywhere/tools/formation.py", kept.append, lambda args: "never", ["--keep", "run"])
    assert kept == [Path("run")] and "never" not in doc.read_text() + capsys.readouterr().out
