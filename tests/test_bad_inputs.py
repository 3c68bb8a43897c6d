"""Bad input → one clear error naming the file or key, a non-zero exit, and no declared output."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import torch
from conftest import make_teacher, snakemake_command, split_in_memory

from normgrow.model.student import BlockStackStudent
from normgrow.train.data import save_tokens
from normgrow.train.outputs import WeightsError, load_student, save_student
from normgrow.train.teacher import check_teacher


def run_workflow(workdir, config_text: str, *targets: str) -> subprocess.CompletedProcess:
    config = workdir / "bad.yaml"
    config.write_text(config_text)
    command = snakemake_command(workdir, "--cores", "1", "--configfile", str(workdir / "ci.yaml"), str(config),
                                "--", *targets)
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


@pytest.fixture
def workdir(tmp_path):
    from conftest import REPO

    (tmp_path / "ci.yaml").write_text((REPO / "configs" / "ci.yaml").read_text())
    return tmp_path


def test_corpus_with_another_checksum_fails_before_any_output(workdir):
    sha = "'" + "0" * 64 + "'"
    proc = run_workflow(workdir, f"data:\n  source:\n    sha256: {sha}\n", "results/data/corpus/manifest.json")
    assert proc.returncode != 0
    assert "summaries_en-us.json: SHA-256" in proc.stdout and "differs from data.source.sha256" in proc.stdout
    assert not list(workdir.glob("results/data/corpus/*"))


def test_budgets_needing_more_documents_than_the_corpus_holds(workdir):
    # post-joint-longer reads three shards of 12 × 4 documents; give the corpus only 100
    proc = run_workflow(workdir, "data:\n  train_docs: 100\n", "results/data/corpus/manifest.json")
    assert proc.returncode != 0
    assert "the corpus yields 100 training documents, but the runs built read 144" in proc.stdout
    assert not (workdir / "results" / "data" / "corpus" / "manifest.json").exists()
    assert proc.stdout.count("the corpus yields 100 training documents") == 1  # a certain error is not retried


def test_teacher_whose_vocabulary_does_not_match_the_tokenizer(tmp_path):
    teacher = make_teacher(vocab_size=64)
    save_tokens([[1, 2, 3, 0], [4, 5, 0]], tmp_path / "tokens")
    from normgrow.train.data import TokenStore

    store = TokenStore(tmp_path / "tokens")

    class Tokenizer:  # only its length matters here
        def __len__(self):
            return 100

    report = check_teacher(teacher, Tokenizer(), store, store, pad_id=0, batch_size=2, min_margin_nats=0.0)
    assert any("the tokenizer has 100 tokens but the teacher's vocabulary is 64" in p for p in report["problems"])


def test_missing_truncated_and_mismatched_weights(tmp_path, teacher):
    student = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=0)
    with pytest.raises(WeightsError, match="weights missing; rerun the phase"):
        load_student(student, tmp_path / "absent.safetensors")
    path = tmp_path / "student.safetensors"
    save_student(student, path)
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(WeightsError, match="unreadable or truncated weights"):
        load_student(student, truncated)
    deeper = BlockStackStudent.from_teacher(teacher, "pre", 3, 1, seed=0)
    with pytest.raises(WeightsError, match="does not fit this student"):
        load_student(deeper, path)
    # the good weights load and round-trips exactly
    other = BlockStackStudent.from_teacher(teacher, "pre", 2, 1, seed=1)
    load_student(other, path)
    for (name, a), b in zip(student.state_dict().items(), other.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_empty_and_overlong_documents_are_counted():
    from datasets import Dataset

    from normgrow.train.data import tokenize_documents

    corpus = Dataset.from_dict({"text": ["a b", "   ", "", "c d e", "f"]})
    splits, counts = split_in_memory(corpus, seed=0, valid_docs=1, diag_docs=1, train_docs=None)
    assert counts["empty_documents_dropped"] == 2 and sum(map(len, splits.values())) == 3

    class Tokenizer:
        def __call__(self, texts, add_special_tokens):
            return {"input_ids": [list(range(1, len(t) + 1)) for t in texts]}

    sequences, truncated = tokenize_documents(Tokenizer(), ["abcdefgh", "ab"], boundary=0, max_length=5)
    assert truncated == 1 and sequences == [[1, 2, 3, 4, 5], [1, 2, 0]]
    assert np.all([len(s) <= 5 for s in sequences])


@pytest.mark.slow
def test_a_killed_driver_leaves_a_lock_that_unlock_clears(workdir):
    """kill -9 of the Snakemake driver mid-run: the next run stops with Snakemake's "cannot be
    locked"; the documented `--unlock` (same target and config) clears it and the run completes."""
    import os
    import signal
    import time

    target = "results/data/tokens"
    command = snakemake_command(workdir, "--cores", "1", "--configfile", str(workdir / "ci.yaml"), "--", target)
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    locks = workdir / ".snakemake" / "locks"
    deadline = time.time() + 120
    while not (locks.is_dir() and any(locks.iterdir())) and time.time() < deadline:
        time.sleep(0.2)
    os.kill(driver.pid, signal.SIGKILL)  # the driver only: its lock stays behind
    driver.wait()
    time.sleep(1)
    again = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert again.returncode != 0 and "cannot be locked" in again.stdout, again.stdout[-2000:]
    unlock = snakemake_command(workdir, "--unlock", "--configfile", str(workdir / "ci.yaml"), "--", target)
    assert subprocess.run(unlock, capture_output=True, timeout=300).returncode == 0
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:]
