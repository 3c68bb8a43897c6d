"""The teacher check's measures on inputs with known answers: chunked validation CE equals the CE of
full logits, and the unigram baseline is the smoothed unigram CE however many documents are read
at a time."""

import math

import numpy as np
import pytest
import torch
from conftest import make_teacher

from normgrow.train.data import TokenStore, collate, save_tokens
from normgrow.train.evaluate import causal_lm_ce
from normgrow.train.objective import loss_positions, next_token_labels
from normgrow.train.teacher import unigram_ce


def test_chunked_teacher_ce_equals_the_ce_of_full_logits():
    model = make_teacher().eval().requires_grad_(False)
    rng = np.random.default_rng(0)
    batches = [collate([rng.integers(1, 64, size=n) for n in sizes], pad_id=0) for sizes in ([7, 3, 5], [4, 6])]
    total, count = 0.0, 0
    for batch in batches:
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        positions = loss_positions(batch.attention_mask)
        labels = next_token_labels(batch.input_ids, positions)
        total += float(torch.nn.functional.cross_entropy(logits[positions], labels, reduction="sum"))
        count += len(labels)
    assert count == 6 + 2 + 4 + 3 + 5
    for chunk in (1, 3, 4096):
        assert math.isclose(causal_lm_ce(model, batches, chunk), total / count, rel_tol=1e-5)


def test_unigram_baseline_is_the_add_one_smoothed_unigram_ce(tmp_path):
    save_tokens([[1, 1, 2], [2, 3], [1]], tmp_path / "train")  # counts 1:3 2:2 3:1
    save_tokens([[3, 1, 2]], tmp_path / "valid")                # labels 1, 2
    train, valid = TokenStore(tmp_path / "train"), TokenStore(tmp_path / "valid")
    p = np.array([1, 4, 3, 2]) / 10                              # vocabulary 4, add-one
    expected = -(math.log(p[1]) + math.log(p[2])) / 2
    for chunk in (1, 2, 10_000):
        assert math.isclose(unigram_ce(train, valid, vocab_size=4, chunk=chunk), expected)


def per_document_unigram_ce(train: TokenStore, valid: TokenStore, vocab_size: int) -> float:
    """The baseline as it was computed before issue 58: one bincount over the vocabulary per document."""
    counts = np.ones(vocab_size, dtype=np.float64)
    for ids in train.get(list(range(len(train)))):
        counts += np.bincount(ids, minlength=vocab_size)
    labels = np.concatenate([ids[1:] for ids in valid.get(list(range(len(valid))))])
    return float(-np.log(counts / counts.sum())[labels].mean())


def test_the_unigram_baseline_counts_each_chunk_of_documents_at_once(tmp_path, monkeypatch):
    """One bincount per chunk of documents (over their tokens end to end), and exactly the per-document
    baseline's value, at a Qwen3-sized vocabulary."""
    rng = np.random.default_rng(0)
    vocab_size = 151_936
    docs = [rng.zipf(1.3, size=int(n)).clip(max=vocab_size - 1).tolist() for n in rng.integers(1, 200, size=300)]
    save_tokens(docs, tmp_path / "train")
    save_tokens(docs[:20], tmp_path / "valid")
    train, valid = TokenStore(tmp_path / "train"), TokenStore(tmp_path / "valid")
    want = per_document_unigram_ce(train, valid, vocab_size)
    calls = []
    bincount = np.bincount
    monkeypatch.setattr(np, "bincount", lambda *a, **k: calls.append(1) or bincount(*a, **k))
    assert unigram_ce(train, valid, vocab_size, chunk=128) == want
    assert len(calls) == 3  # 300 documents in chunks of 128


def test_the_boundary_embedding_trains_unless_it_is_the_padding_index(tmp_path):
    """teacher.pretrain.boundary_embedding: `trained` gives the boundary token (id 0, also the padding) an
    embedding that trains like any other; `zero` makes it nn.Embedding's padding row, zero for good."""
    import io

    from normgrow.train.teacher import pretrain_teacher

    rng = np.random.default_rng(0)
    save_tokens([[0, *rng.integers(1, 16, size=7)] for _ in range(8)], tmp_path / "train")
    spec = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 8, "intermediate_size": 32, "max_position_embeddings": 16, "steps": 3, "batch_size": 4,
            "lr": 1e-2, "weight_decay": 0.0, "warmup_fraction": 0.0}
    tokenizer = [None] * 16  # only its length is read
    rows = {}
    for kind in ("trained", "zero"):
        model = pretrain_teacher({**spec, "boundary_embedding": kind}, tokenizer, TokenStore(tmp_path / "train"),
                                 pad_id=0, seed=0, log=io.StringIO())
        rows[kind] = model.get_input_embeddings().weight[0].detach()
    assert rows["zero"].abs().max() == 0
    assert rows["trained"].abs().max() > 0


def test_the_teacher_is_loaded_at_its_revision(tmp_path, monkeypatch):
    """teacher.revision reaches from_pretrained (a hub snapshot; none: the default branch)."""
    import transformers

    from normgrow.train.teacher import load_teacher

    make_teacher().save_pretrained(tmp_path)
    asked = []
    load = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *args, **kw: asked.append(kw["revision"]) or load(*args, **kw))
    assert not load_teacher(str(tmp_path), revision="0123abc").training
    load_teacher(str(tmp_path))
    assert asked == ["0123abc", None]


def test_pretraining_snapshots_are_the_model_at_evenly_spaced_updates(tmp_path):
    """teacher.pretrain.snapshots = 2 of 4 updates: the callback sees the model after updates 2 and 4, the
    last the returned teacher itself; the snapshot at 2 differs from the final weights, and training goes on
    after it as it would without snapshots (the same final weights)."""
    import io

    from normgrow.train.teacher import pretrain_teacher

    rng = np.random.default_rng(0)
    save_tokens([[0, *rng.integers(1, 16, size=7)] for _ in range(8)], tmp_path / "train")
    spec = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 8, "intermediate_size": 32, "max_position_embeddings": 16, "steps": 4, "batch_size": 4,
            "lr": 1e-2, "weight_decay": 0.0, "warmup_fraction": 0.0, "boundary_embedding": "trained"}
    seen = {}

    def snapshot(step, model):
        seen[step] = model.lm_head.weight.detach().clone()

    model = pretrain_teacher({**spec, "snapshots": 2}, [None] * 16, TokenStore(tmp_path / "train"), pad_id=0,
                             seed=0, log=io.StringIO(), on_snapshot=snapshot)
    plain = pretrain_teacher(spec, [None] * 16, TokenStore(tmp_path / "train"), pad_id=0, seed=0, log=io.StringIO())
    assert sorted(seen) == [2, 4]
    assert torch.equal(seen[4], model.lm_head.weight) and not torch.equal(seen[2], seen[4])
    assert torch.equal(model.lm_head.weight, plain.lm_head.weight)


# ---------------------------------------------------------------- the first job that touches a named teacher
TINY = {"hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 1}


def named_teacher(folder, config, tokens: list[str] | None = None):
    """A teacher directory of config.json (a transformers config saved as it is) and, with `tokens`, a
    word-level tokenizer of that vocabulary (its EOS the last token): all that check_teacher_files reads."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    config.save_pretrained(folder)
    if tokens is not None:
        tokenizer = Tokenizer(models.WordLevel({token: i for i, token in enumerate(tokens)}, unk_token=tokens[0]))
        PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token=tokens[0], eos_token=tokens[-1]).save_pretrained(
            folder)
    return str(folder)


def files_config(name: str, boundary: str = "<eos>", teacher_tokenizer: bool = True) -> dict:
    return {"teacher": {"name": name}, "tokenizer": {"train": not teacher_tokenizer},
            "data": {"boundary_token": boundary}}


def test_the_files_check_reads_a_supported_teacher_and_its_boundary_token(tmp_path):
    from transformers import LlamaConfig

    from normgrow.train.teacher import check_teacher_files

    name = named_teacher(tmp_path, LlamaConfig(**TINY), ["<unk>", "a", "<eos>"])
    assert check_teacher_files(files_config(name)) == {"name": name, "revision": None, "model_type": "llama",
                                                       "tokenizer_size": 3, "boundary_id": 2}
    assert "boundary_id" not in check_teacher_files(files_config(name, "<|endoftext|>", teacher_tokenizer=False))


def test_the_files_check_refuses_an_unsupported_family_naming_teacher_name(tmp_path):
    from transformers import GraniteConfig

    from normgrow.design.config import ConfigError
    from normgrow.train.teacher import check_teacher_files

    name = named_teacher(tmp_path, GraniteConfig(**TINY))
    with pytest.raises(ConfigError, match=r"^teacher\.name: .* is a 'granite' model .*qwen3, qwen2, llama"):
        check_teacher_files(files_config(name))


def test_the_files_check_refuses_what_a_supported_family_cannot_keep(tmp_path):
    from transformers import Gemma2Config

    from normgrow.train.teacher import check_teacher_files

    name = named_teacher(tmp_path, Gemma2Config(**TINY, final_logit_softcapping=30.0))
    with pytest.raises(ValueError, match="final_logit_softcapping=30.0 is not supported"):
        check_teacher_files(files_config(name, teacher_tokenizer=False))


def test_the_files_check_refuses_a_boundary_token_outside_the_teachers_tokenizer(tmp_path):
    from transformers import Qwen3Config

    from normgrow.design.config import ConfigError
    from normgrow.train.teacher import check_teacher_files

    name = named_teacher(tmp_path, Qwen3Config(**TINY), ["<unk>", "a", "<eos>"])
    with pytest.raises(ConfigError, match=r"^data\.boundary_token: '<\|endoftext\|>' .*'<eos>'"):
        check_teacher_files(files_config(name, "<|endoftext|>"))
