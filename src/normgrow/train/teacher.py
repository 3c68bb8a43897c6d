"""The teacher: loaded through `AutoModelForCausalLM` whatever its origin (a hub id such as
`Qwen/Qwen3-8B-Base`, or a local directory); for the embedded default, first pretrained here as a
small Qwen3ForCausalLM on the training split."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from normgrow.design.config import check_boundary_token, check_teacher_family
from normgrow.design.curriculum import snapshot_steps
from normgrow.design.schedule import lr_at
from normgrow.model.family import PREFIXES, attention_kernel, family
from normgrow.train.data import DataPosition, DocumentIterator, TokenStore, fixed_batches
from normgrow.train.distributed import default_device
from normgrow.train.evaluate import causal_lm_ce
from normgrow.train.forward import causal_lm_logits, positions_and_labels
from normgrow.train.tracking import Tracker

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_teacher(name_or_path: str, dtype: str = "float32", attn_implementation: str = "sdpa",
                 revision: str | None = None):
    """The frozen teacher in eval mode (hub id at `revision` — teacher.revision: a commit sha, branch or
    tag; None: the hub's default branch — or local path), under `attn_implementation` as its family
    runs it (normgrow.model.family.attention_kernel: eager for Gemma 2's capped attention)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(name_or_path, revision=revision)
    teacher = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=DTYPES[dtype], revision=revision,
                                                   attn_implementation=attention_kernel(config, attn_implementation))
    teacher.eval().requires_grad_(False)
    return teacher


def check_teacher_files(config: dict) -> dict:
    """Check a named teacher (teacher.name at teacher.revision) from its config and, with tokenizer.train
    false, its tokenizer, downloading only those files (never its weights): its family is supported and
    keeps what the student needs (normgrow.model.family), its tokenizer holds data.boundary_token. Raises
    normgrow.design.config.ConfigError or ValueError naming the key; returns what it read. The first job
    that touches a hub teacher, before the corpus is read (workflow/rules/teacher.smk)."""
    import json

    from transformers import AutoConfig, AutoTokenizer
    from transformers.utils import cached_file

    name, revision = config["teacher"]["name"], config["teacher"].get("revision")
    model_type = json.loads(Path(cached_file(name, "config.json", revision=revision)).read_text()).get("model_type")
    check_teacher_family(name, model_type, PREFIXES)
    family(AutoConfig.from_pretrained(name, revision=revision))  # what a supported family sets that it cannot keep
    report = {"name": name, "revision": revision, "model_type": model_type}
    if not config["tokenizer"]["train"]:
        tokenizer = AutoTokenizer.from_pretrained(name, revision=revision)
        check_boundary_token(config, tokenizer)
        report.update(tokenizer_size=len(tokenizer),
                      boundary_id=tokenizer.convert_tokens_to_ids(config["data"]["boundary_token"]))
    return report


def pretrain_teacher(spec: dict, tokenizer, train: TokenStore, pad_id: int, seed: int, log=None,
                     tracker: Tracker | None = None, on_snapshot=None):
    """Train a fresh Qwen3ForCausalLM with next-token CE (on the GPU if there is one), logging each
    update to `tracker` (normgrow.train.tracking); returns the model. With `spec["snapshots"]` = n > 0,
    `on_snapshot(step, model)` is called after each of n evenly spaced updates, the last the final one
    (normgrow.design.curriculum.snapshot_steps; the teacher's formation along training: configs/formation.yaml)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=spec["hidden_size"],
        num_hidden_layers=spec["num_hidden_layers"], num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"], head_dim=spec["head_dim"],
        intermediate_size=spec["intermediate_size"], max_position_embeddings=spec["max_position_embeddings"],
        tie_word_embeddings=False, eos_token_id=pad_id, bos_token_id=None,
        # the padding index of nn.Embedding is a zero row that never trains (config boundary_embedding)
        pad_token_id=pad_id if spec["boundary_embedding"] == "zero" else None,
    )
    config._attn_implementation = "sdpa"
    model = Qwen3ForCausalLM(config).to(default_device())
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec["lr"], betas=(0.9, 0.95),
                                  weight_decay=spec["weight_decay"])
    batches = DocumentIterator(train, DataPosition(), len(train), spec["batch_size"], pad_id, seed)
    steps = spec["steps"]
    snapshots = set(snapshot_steps(steps, spec.get("snapshots", 0)))
    progress = tqdm(range(1, steps + 1), desc="teacher pretraining", mininterval=5, file=log)
    for t in progress:
        lr = lr_at(t, steps, spec["lr"], spec["lr"] * 0.1, spec["warmup_fraction"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = batches.next_batch().to(model.device)
        positions, labels = positions_and_labels(batch)
        loss = torch.nn.functional.cross_entropy(causal_lm_logits(model, batch, positions), labels)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        progress.set_postfix(loss=f"{loss.item():.3f}", lr=f"{lr:.2e}", refresh=False)
        if tracker is not None:
            tracker.log_update({"loss": loss.item(), "ce": loss.item(), "lr": lr, "grad_norm": grad_norm.item(),
                                "tokens": batch.tokens}, t)
        if t in snapshots and on_snapshot is not None:
            on_snapshot(t, model.eval())
            model.train()
    return model.eval()


def unigram_ce(train: TokenStore, valid: TokenStore, vocab_size: int, chunk: int = 10_000) -> float:
    """CE of the add-one-smoothed unigram distribution of the training tokens, on the validation
    next-token labels (every token but the first of each document) — the baseline a teacher
    must beat. One `bincount` per `chunk` documents, over their tokens laid end to end: per document it
    was a pass over the whole vocabulary each (≈ 125 µs a document at V = 151,936, about 20 minutes
    of the teacher check at paper scale)."""
    counts = np.ones(vocab_size, dtype=np.float64)
    for start in range(0, len(train), chunk):  # `chunk` documents in memory at a time
        tokens = np.concatenate(train.get(list(range(start, min(start + chunk, len(train))))))
        counts += np.bincount(tokens, minlength=vocab_size)
    log_p = np.log(counts / counts.sum())
    labels = np.concatenate([ids[1:] for ids in valid.get(list(range(len(valid))))])
    return float(-log_p[labels].mean())


def check_teacher(teacher, tokenizer, train: TokenStore, valid: TokenStore, pad_id: int,
                  batch_size: int, min_margin_nats: float, chunk: int = 4096) -> dict:
    """Facts about the loaded teacher that the student relies on, and its quality on validation
    (batches of `batch_size` documents, logits `chunk` positions at a time).
    `problems` lists every mismatch (vocabulary vs tokenizer, missing final norm, a teacher that does
    not beat the unigram baseline by `min_margin_nats`). The student's width and dimensions are the
    teacher's by construction (its embedding and head are copies), so they cannot mismatch."""
    config = teacher.config
    head = teacher.get_output_embeddings()
    final_norm = getattr(teacher.base_model, "norm", None)
    ce = causal_lm_ce(teacher, fixed_batches(valid, batch_size, pad_id), chunk)
    baseline = unigram_ce(train, valid, config.vocab_size)
    report = {
        "model_type": config.model_type,
        "parameters": sum(p.numel() for p in teacher.parameters()),
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": getattr(config, "head_dim", None),
        "intermediate_size": config.intermediate_size,
        "attention_bias": bool(getattr(config, "attention_bias", False)),  # for normgrow.cluster.plan's exact counts
        "mlp_bias": bool(getattr(config, "mlp_bias", False)),
        "vocab_size": config.vocab_size,
        "tokenizer_size": len(tokenizer),
        "vocab_matches_tokenizer": len(tokenizer) <= config.vocab_size,
        "head_shape": list(head.weight.shape),
        "final_norm_present": final_norm is not None,
        "validation_ce": ce,
        "validation_ppl": math.exp(ce),
        "unigram_ce": baseline,
        "margin_nats": baseline - ce,
        "min_margin_nats": min_margin_nats,
    }
    problems = []
    if not report["vocab_matches_tokenizer"]:
        problems.append(f"the tokenizer has {len(tokenizer)} tokens but the teacher's vocabulary is "
                        f"{config.vocab_size}: use the teacher's tokenizer (tokenizer.train: false) or a matching "
                        "teacher")
    if not report["final_norm_present"]:
        problems.append("teacher has no final norm (base_model.norm) to initialise the boundary norm")
    if report["margin_nats"] < min_margin_nats:
        problems.append(f"teacher CE {ce:.3f} beats the unigram baseline {baseline:.3f} by less than "
                        f"{min_margin_nats} nats")
    report["problems"] = problems
    return report


def save_teacher(model, tokenizer, out: Path) -> None:
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
