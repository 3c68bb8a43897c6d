"""Where a document's boundary token sits (data.boundary_position): every position keeps the cap, the
boundary is never cut away except under truncated-end, and the token metadata counts where it sits."""

import pytest

from normgrow.train.data import BOUNDARY_POSITIONS, place_boundary, tokenize_corpus

B = 0
TEXT = [5, 6, 7, 8, 9]


@pytest.mark.parametrize(("position", "cap", "expected", "cut"), [
    ("start", 10, [B, 5, 6, 7, 8, 9], False),
    ("start", 4, [B, 5, 6, 7], True),
    ("end", 10, [5, 6, 7, 8, 9, B], False),
    ("end", 4, [5, 6, 7, B], True),
    ("both", 10, [B, 5, 6, 7, 8, 9, B], False),
    ("both", 4, [B, 5, 6, B], True),
    ("truncated-end", 10, [5, 6, 7, 8, 9, B], False),
    ("truncated-end", 4, [5, 6, 7, 8], True),   # the boundary is lost at the cap
    ("truncated-end", 6, [5, 6, 7, 8, 9, B], False),
])
def test_layouts(position, cap, expected, cut):
    assert place_boundary(TEXT, B, cap, position) == (expected, cut)


@pytest.mark.parametrize(("position", "boundaries"), [("start", 1), ("end", 1), ("both", 2), ("truncated-end", 1)])
def test_a_document_exactly_as_long_as_its_room_is_not_cut(position, boundaries):
    """The room is the cap less the boundary tokens: a text that fills it is kept whole and not counted
    as truncated; one token more is cut."""
    cap = len(TEXT) + boundaries
    placed, cut = place_boundary(TEXT, B, cap, position)
    assert not cut and len(placed) == cap and [t for t in placed if t != B] == TEXT
    placed, cut = place_boundary(TEXT, B, cap - 1, position)
    assert cut and len(placed) == cap - 1


def test_a_cap_with_no_room_for_text_is_refused_by_name():
    with pytest.raises(ValueError, match="boundary_position 'both'"):
        place_boundary(TEXT, B, 2, "both")


def test_the_schema_offers_exactly_the_layouts():
    import yaml

    from normgrow.design.config import SCHEMA

    data = yaml.safe_load(SCHEMA.read_text())["properties"]["data"]["properties"]
    assert tuple(data["boundary_position"]["enum"]) == BOUNDARY_POSITIONS


class Tokenizer:
    def __call__(self, texts, add_special_tokens):
        return {"input_ids": [[len(t) + 10] * len(t) for t in texts]}


@pytest.mark.parametrize(("position", "start", "end", "held"), [
    ("start", 3, 0, 3), ("end", 0, 3, 3), ("both", 3, 3, 6), ("truncated-end", 0, 2, 2)])
def test_the_metadata_counts_where_the_boundary_sits(position, start, end, held):
    summary = {}
    sequences = list(tokenize_corpus(Tokenizer(), ["ab", "abcdefghij", "abc"], B, 6, summary, position=position))
    assert summary["boundary_at_start"] == start and summary["boundary_at_end"] == end
    assert summary["boundary_tokens"] == held == sum(s.count(B) for s in sequences)
    assert summary["documents_with_boundary"] == (2 if position == "truncated-end" else 3)
    assert summary["truncated_documents"] == 1 and all(len(s) <= 6 for s in sequences)
