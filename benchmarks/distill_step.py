"""Throughput and memory of one distillation step: normgrow's step against a naive baseline.

    python benchmarks/distill_step.py [--shapes embedded paper-shape paper] [--reps 5] [--peak-tflops X]

Shapes (one rank's share of a step):
- `embedded`: config.yaml's sizes (the small teacher it pretrains, its student, batch and length);
- `paper-shape`: the paper's layer and vocabulary shapes at reduced depth and length, which fit a
  24 GB CPU machine (hidden 4096, 32/8 heads, intermediate 12288, vocabulary 151,936, one layer
  each, 2 × ≤64 tokens);
- `paper`: configs/paper.yaml with the Qwen3-8B-Base shape (configs/teachers/qwen3-8b-base): the
  36-layer bf16 teacher, the 3 × 3-layer student, one GPU's 8 of the 64 documents of ≤8,192 tokens,
  bf16 compute, activation checkpointing. Needs one GPU with about 100 GB (H100 NVL, H200);
- `paper-docs`: `paper` on 8 documents of the paper's length mix; `paper-docs-1block`: that with the
  student of a grow run's first phase (one block of 3 layers: fits an 80 GB H100 beside the teacher);
- `docs-mix`, `tiny`: the paper's length mix at 1/8 and 1/128 of its length on small models (a CPU's
  minutes and seconds).

For each shape it runs, each in a fresh subprocess (so peak memory is its own):
- `ours`: the trainer's step (normgrow.train.trainer) in a world of one — the student as the trainer
  prepares it (normgrow.train.distributed.shard_student: FSDP2 in bf16, the plain module in fp32) with
  the config's activation checkpointing, the teacher once under inference mode, KD +
  CE chunked over positions and fused with both LM heads (normgrow.train.objective.fused_objective),
  backward, clipping, fused AdamW;
- `ours-compiled` (on request): `ours` with `train.compile`, every decoder layer compiled (the
  compile happens in the warm-up step, which is not timed);
- `ours-padding-free`, `ours-flex` (on request): `ours` with `train.padding_free` (the rank's
  documents end to end in rows of its width), and that on `flex_attention` (in one row, attention
  within each document; GPU only: FlexAttention has no backward on CPU; its compile happens in the
  warm-up step);
- `naive`: the same step written the obvious way — stock `Qwen3ForCausalLM`-style full logits for
  teacher (no_grad) and student over the whole padded micro-batch, fp32 log-softmax KL and CE, the
  default AdamW; bf16 autocast where the config computes in bf16;
- `loss-ours` / `loss-naive`: the KD + CE part alone (hidden states → loss → backward into the
  hidden states and the student head) at the shape's vocabulary, on `loss_positions` positions
  (the paper shape uses hidden 512 here, so that the logits, not the head's gradient, dominate);
- `eval-ours` / `eval-before`: the same KD + CE as evaluation runs it, under `torch.no_grad()`:
  through `fused_objective`, and as it ran before `fused_objective` detached its inputs there (the
  fused Function then formed the head's V × H gradient buffer and did the backward matmuls).

It runs on the GPU when one is visible (`CUDA_VISIBLE_DEVICES=` forces the CPU) and prints the
median step time over `--reps` repetitions after one warm-up, tokens/s, peak memory above the loaded
models (GPU: max allocated − allocated before the first step; CPU: max RSS − RSS before it), the
ratios ours/naive measured in the same run ("OOM" when a variant runs out of memory), and
MFU = FLOPs / time / peak, where

    FLOPs = 2·N_teacher·tokens + 6·N_student·tokens + 4·A·(L_teacher + 3·L_student)·Σ_rows n(n+1)/2

(N: matmul parameters incl. LM heads; tokens: non-padding tokens; A = heads × head dim; L: layers;
the last term is causal attention, scores and values, over rows of n tokens; activation
recomputation is not counted), and for the loss alone 8·V·H·positions. The peak is `--peak-tflops`,
or on a GPU the dense bf16 peak of the card, known for H100, H200 and A100.

With `--write DOC` it also writes a Markdown table (per shape: the full step, compiled if measured,
and KD + CE alone, naive against ours, with the ratios) into DOC's block marked with this command
(tools/docs_block.py), under a line naming the command, the device (GPU, or CPU cores), torch's
version, the date, the load average at the start, the wall time and the largest process's memory:

    python benchmarks/distill_step.py --shapes embedded --reps 10 --write docs/performance.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))  # the helpers the benchmarks share with the tools
import docs_block  # noqa: E402

VARIANTS = ["naive", "ours", "ours-compiled", "ours-padding-free", "ours-flex", "loss-naive", "loss-ours",
            "eval-before", "eval-ours"]
PEAK_TFLOPS = {"H100": 989.4, "H200": 989.4, "A100": 312.0}  # dense bf16 per GPU (NVIDIA datasheets)
LOSS_CHUNK = 256  # positions per chunk of the fused KD + CE alone (loss-ours)
OPTIMIZER = {"lr": 1e-4, "min_lr": 1e-6, "warmup_fraction": 0.015, "betas": (0.9, 0.95), "eps": 1e-8,
             "weight_decay": 0.0, "grad_clip": 0.5}  # the paper's (train.* of configs/paper.yaml)


def config_shape(files: list[str], teacher_config: str | None = None, **extra) -> dict:
    """One rank's share of a step of a configuration (config files merged in order, as
    `--configfile` does; teacher dimensions from `teacher_config`/config.json, or the pretrained
    teacher's)."""
    import yaml

    from normgrow.design.config import merge, rank_batch_size, validate_config

    config: dict = {}
    for name in files:
        merge(config, yaml.safe_load((REPO / name).read_text()))
    config = validate_config(config)
    if teacher_config:
        teacher = json.loads((REPO / teacher_config / "config.json").read_text())
    else:
        keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                "intermediate_size", "max_position_embeddings")
        teacher = {k: config["teacher"]["pretrain"][k] for k in keys}
        teacher["vocab_size"] = config["tokenizer"]["vocab_size"]
    train = config["train"]
    return dict(teacher=teacher, teacher_dtype=config["teacher"]["dtype"], blocks=config["student"]["blocks"],
                layers_per_block=config["student"]["layers_per_block"],
                rows=rank_batch_size(config),
                seq=config["data"]["max_length"], loss_chunk=train["loss_chunk"], precision=train["precision"],
                activation_checkpointing=train["activation_checkpointing"], **extra)


def shape(name: str) -> dict:
    if name == "embedded":
        return config_shape(["config.yaml"], loss_positions=1024)
    if name == "paper":
        return config_shape(["config.yaml", "configs/paper.yaml"], "configs/teachers/qwen3-8b-base",
                            loss_positions=8192, needs_gpu=True)
    if name == "paper-docs":  # the paper step on a micro-batch of the paper's document lengths
        return {**shape("paper"), "lengths": "documents"}
    if name == "paper-docs-1block":  # that with a grow run's first student (its trainable state fits 80 GB)
        return {**shape("paper-docs"), "blocks": 1}
    if name == "docs-mix":
        # the paper's document-length mix at 1/8 of its length and a reduced width, for a CPU: 8 documents
        # of a capped log-normal with Table A2's mean tokens per document / 8 (σ 1.0), at most 1,024 tokens
        teacher = dict(vocab_size=4096, hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                       intermediate_size=768, num_hidden_layers=6, max_position_embeddings=1024)
        return dict(teacher=teacher, teacher_dtype="float32", blocks=3, layers_per_block=1, rows=8, seq=1024,
                    loss_chunk=4096, precision="float32", activation_checkpointing=False, loss_positions=1024,
                    lengths="documents")
    if name == "tiny":  # the paper's length mix at 1/128 of its length on a model of a few layers: a CPU's seconds
        teacher = dict(vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       intermediate_size=128, num_hidden_layers=2, max_position_embeddings=64)
        return dict(teacher=teacher, teacher_dtype="float32", blocks=2, layers_per_block=1, rows=8, seq=64,
                    loss_chunk=128, precision="float32", activation_checkpointing=False, loss_positions=256,
                    lengths="documents")
    # the paper's layer and vocabulary shapes at reduced depth and length (fits 24 GB); KD + CE alone
    # where logits dominate: vocabulary 151,936, 2,048 positions, hidden 512
    teacher = dict(vocab_size=151936, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                   intermediate_size=12288, num_hidden_layers=1, max_position_embeddings=512)
    return dict(teacher=teacher, teacher_dtype="bfloat16", blocks=1, layers_per_block=1, rows=2, seq=64,
                loss_chunk=4096, precision="float32", activation_checkpointing=False, loss_positions=2048,
                loss_hidden=512)


SHAPES = ["embedded", "paper-shape", "paper", "docs-mix", "paper-docs", "paper-docs-1block", "tiny"]


def build(s: dict, device, attention: str = "sdpa"):
    """The teacher (built on the device in its dtype) and the student (built on the CPU from the
    teacher, as the trainer does), both computing attention with `attention`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from normgrow.model.student import BlockStackStudent
    from normgrow.train.teacher import DTYPES

    config = Qwen3Config(**{**s["teacher"], "tie_word_embeddings": False})
    config._attn_implementation = attention
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(DTYPES[s["teacher_dtype"]])
    try:
        with torch.device(device):
            teacher = Qwen3ForCausalLM(config).eval().requires_grad_(False)
    finally:
        torch.set_default_dtype(default)
    student = BlockStackStudent.from_teacher(teacher, "pre", s["blocks"], s["layers_per_block"], seed=0,
                                             attn_implementation=attention)
    student.set_trainable(list(range(s["blocks"])))
    return teacher, student


def batch_for(s: dict, seed: int = 0):
    """`rows` documents: one of `seq` tokens and the others between seq/2 and seq, or (`lengths:
    documents`) drawn from the capped log-normal of benchmarks/paper_cost.py with the paper's mean
    tokens per document (Table A2) scaled by seq / 8,192, σ 1.0 (the draw with `seed` of the first
    `rows`)."""
    import numpy as np

    from normgrow.train.data import collate

    rng = np.random.default_rng(seed)
    if s.get("lengths") == "documents":
        from normgrow.cluster.budget import PAPER_TOKENS_PER_DOCUMENT, capped_lognormal_mu

        mu = capped_lognormal_mu(PAPER_TOKENS_PER_DOCUMENT * s["seq"] / 8192, 1.0, s["seq"])
        lengths = np.clip(np.rint(rng.lognormal(mu, 1.0, s["rows"])), 2, s["seq"]).astype(int).tolist()
    else:
        lengths = [s["seq"]] + list(rng.integers(s["seq"] // 2, s["seq"] + 1, size=s["rows"] - 1))
    return collate([rng.integers(1, s["teacher"]["vocab_size"], size=int(n)) for n in lengths], pad_id=0)


def matmul_params(module) -> int:
    """Parameters of a module's linear layers (LM heads included): 2 FLOPs each per token forward."""
    import torch

    return sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))


def attention_flops(width: int, layers: int, lengths: list[int]) -> int:
    """Causal attention's scores and values, forward, over rows of `lengths` tokens: 4·A·L·Σ n(n+1)/2
    (A = heads × head dim)."""
    return 4 * width * layers * sum(n * (n + 1) // 2 for n in lengths)


def step_flops(s: dict, teacher, student, batch) -> int:
    """Useful FLOPs of one step (see the module docstring): the teacher's forward (2·N·tokens +
    attention) and the student's forward and backward (3× that)."""
    lengths = batch.attention_mask.sum(dim=1).tolist()
    width = s["teacher"]["num_attention_heads"] * s["teacher"]["head_dim"]
    teacher_part = 2 * matmul_params(teacher) * batch.tokens + attention_flops(width, s["teacher"]["num_hidden_layers"],
                                                                               lengths)
    student_layers = s["blocks"] * s["layers_per_block"]
    return teacher_part + 3 * (2 * matmul_params(student) * batch.tokens + attention_flops(width, student_layers,
                                                                                           lengths))


def naive_terms(student, teacher, batch, objective, precision):
    """Full logits for the whole padded micro-batch, fp32 log-softmax, then the loss positions."""
    import torch

    from normgrow.model.student import at_positions
    from normgrow.train.forward import positions_and_labels

    positions, labels = positions_and_labels(batch)
    with torch.no_grad():
        teacher_logits = teacher(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits.float()
    with torch.autocast(batch.input_ids.device.type, torch.bfloat16, enabled=precision == "bfloat16"):
        student_logits = student.lm_head(student(batch.input_ids, batch.attention_mask)).float()
    return objective(at_positions(student_logits, positions), at_positions(teacher_logits, positions), labels)


def loss_step(s: dict, variant: str, device):
    """KD + CE alone on random hidden states: (step, tokens, flops). `loss-*`: forward and backward;
    `eval-*`: forward under `torch.no_grad()` as evaluation runs it, the student head requiring
    gradients as in training — `eval-ours` through `fused_objective`, `eval-before` the fused Function
    applied to the inputs as they are, as `fused_objective` did before it detached them under no_grad
    (the Function then formed the head's gradient buffer and the backward matmuls, for nothing)."""
    import torch

    from normgrow.train.objective import FusedDistillationLoss, Objective, fused_objective

    n, v, h = s["loss_positions"], s["teacher"]["vocab_size"], s.get("loss_hidden", s["teacher"]["hidden_size"])
    head = (torch.randn(v, h, device=device) * 0.02).requires_grad_()
    t_head = torch.randn(v, h, device=device) * 0.02
    hidden = torch.randn(n, h, device=device, requires_grad=True)
    teacher_hidden = torch.randn(n, h, device=device)
    labels = torch.randint(0, v, (n,), device=device)
    objective = Objective()

    if variant.startswith("eval"):
        def evaluation(_):
            with torch.no_grad():
                if variant == "eval-ours":
                    return fused_objective(objective, hidden, head, teacher_hidden, t_head, labels, chunk=LOSS_CHUNK)
                return FusedDistillationLoss.apply(hidden, head, teacher_hidden, t_head, labels, objective,
                                                   LOSS_CHUNK, n)

        return evaluation, n, 4 * v * h * n  # teacher and student head forwards

    def step(_):
        if variant == "loss-ours":
            terms = fused_objective(objective, hidden, head, teacher_hidden, t_head, labels, chunk=LOSS_CHUNK)
        else:
            terms = objective(hidden @ head.T, teacher_hidden @ t_head.T, labels)
        terms["total"].backward()
        hidden.grad = head.grad = None

    return step, n, 8 * v * h * n  # teacher head forward (2) + student head forward and backward (6)


def full_step(s: dict, variant: str, ranks, seeds: list[int]):
    """Training updates, the trainer's way (`ours`, `ours-compiled`: with `train.compile`;
    `ours-padding-free`: with `train.padding_free`; `ours-flex`: that on `flex_attention`, GPU only) or
    the obvious way (`naive`), update i on the batch drawn with seeds[i]: (step(i), tokens of each
    update, flops of each update, the losses of the updates made)."""
    import torch

    from normgrow.design.curriculum import Training
    from normgrow.model.student import at_positions
    from normgrow.train.distributed import shard_student
    from normgrow.train.forward import positions_and_labels, teacher_hidden_states
    from normgrow.train.objective import Objective, fused_objective, loss_positions
    from normgrow.train.trainer import build_optimizer

    attention = "flex_attention" if variant == "ours-flex" else "sdpa"
    teacher, student = build(s, ranks.device, attention)
    global_batches = [batch_for(s, seed) for seed in seeds]
    batches = [ranks.rows(batch, pad_id=0) for batch in global_batches]
    flops = [step_flops(s, teacher, student, batch) for batch in batches]  # useful FLOPs: the documents, any layout
    rows = [batch.packed_or_padded(0, variant in ("ours-padding-free", "ours-flex"), attention) for batch in batches]
    objective = Objective()
    if variant.startswith("ours"):
        student.activation_checkpointing = s["activation_checkpointing"]
        if variant == "ours-compiled":
            student.compile_layers()
        shard_student(student, ranks, s["precision"])
        optimizer = build_optimizer(student, Training(batch_size=s["rows"], eval_every=1, precision=s["precision"],
                                                      **OPTIMIZER))
    else:
        student.to(ranks.device)
        optimizer = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=OPTIMIZER["lr"],
                                      betas=OPTIMIZER["betas"], weight_decay=OPTIMIZER["weight_decay"])
    params = [p for p in student.parameters() if p.requires_grad]

    normalizers = [int(loss_positions(batch.attention_mask).sum()) for batch in global_batches]
    losses: list[float] = []

    def step(i: int):
        if variant.startswith("ours"):
            positions, labels = positions_and_labels(rows[i])  # as Trainer.train_step: forward, loss, backward
            teacher_hidden = teacher_hidden_states(teacher, rows[i], positions)
            hidden = student(rows[i].input_ids, rows[i].attention_mask, rows[i].position_ids)
            terms = fused_objective(objective, at_positions(hidden, positions), student.lm_head.weight, teacher_hidden,
                                    teacher.get_output_embeddings().weight, labels, chunk=s["loss_chunk"],
                                    normalizer=normalizers[i])
            del hidden, teacher_hidden
            (terms["total"] * ranks.world).backward()
        else:
            terms = naive_terms(student, teacher, batches[i], objective, s["precision"])
            terms["total"].backward()
        torch.nn.utils.clip_grad_norm_(params, OPTIMIZER["grad_clip"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(terms["total"]))

    return step, [batch.tokens for batch in batches], flops, losses


class Memory:
    """Peak memory of the steps above what is allocated before them: CUDA allocator or process RSS."""

    def __init__(self, device):
        import torch

        self.cuda = device.type == "cuda"
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated() / 2**20
        else:
            with open("/proc/self/statm") as f:
                self.base = int(f.read().split()[1]) * resource.getpagesize() / 2**20

    def sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def peak_mb(self) -> float:
        import torch

        if self.cuda:
            return torch.cuda.max_memory_allocated() / 2**20 - self.base
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - self.base

    def reserved_mb(self) -> float | None:
        """The CUDA allocator's peak reserved memory (what the card must hold), None on a CPU."""
        import torch

        return torch.cuda.max_memory_reserved() / 2**20 if self.cuda else None


def compiled_graphs() -> int:
    """Graphs Dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def run_variant(shape_name: str, variant: str, reps: int, vary: bool = False) -> dict:
    """One variant's measurement: the median step time over `reps` updates after a warm-up on one batch,
    or with `vary` the mean over updates each on a batch of its own (another draw of the shape's
    lengths: new widths, as training sees them); tokens and FLOPs per update, peak memory, the
    losses, and the graphs Dynamo compiled in the warm-up and in the timed updates (recompiles)."""
    import torch

    from normgrow.train.distributed import process_group

    s = shape(shape_name)
    seeds = list(range(reps + 1)) if vary else [0] * (reps + 1)
    with process_group() as ranks:  # a world of one, on the GPU if one is visible
        if s.get("needs_gpu") and ranks.device.type != "cuda":
            raise SystemExit(f"shape {shape_name!r} needs a GPU (with CUDA_VISIBLE_DEVICES unset)")
        result = {"shape": shape_name, "variant": variant, "device": ranks.device.type}
        losses: list[float] = []
        try:
            if variant.startswith(("loss", "eval")):
                step, tokens, flops = loss_step(s, variant, ranks.device)
                tokens, flops = [tokens] * len(seeds), [flops] * len(seeds)
            else:
                step, tokens, flops, losses = full_step(s, variant, ranks, seeds)
            graphs = [compiled_graphs()]  # before the memory's baseline: the first call imports torch._dynamo
            memory, times = Memory(ranks.device), []
            for i in range(reps + 1):
                start = time.perf_counter()
                step(i)
                memory.sync()
                if i:
                    times.append(time.perf_counter() - start)
                else:
                    graphs.append(compiled_graphs())
        except torch.OutOfMemoryError:
            return {**result, "oom": True}
        seconds = statistics.fmean(times) if vary else statistics.median(times)
        return {**result, "seconds": seconds, "tokens": statistics.fmean(tokens[1:]),
                "flops": statistics.fmean(flops[1:]), "peak_mb": memory.peak_mb(), "reserved_mb": memory.reserved_mb(),
                "losses": losses, "graphs_warmup": graphs[1] - graphs[0], "graphs_timed": compiled_graphs() - graphs[1]}


def peak_tflops(device: str, given: float | None) -> float | None:
    """`--peak-tflops`, else the card's dense bf16 peak if known; None: MFU is not printed."""
    if given:
        return given
    return next((peak for card, peak in PEAK_TFLOPS.items() if card in device), None)


def row(r: dict, peak: float | None, baseline: dict | None) -> str:
    head = f"{r['shape']:12} {r['variant']:13}"
    if r.get("oom"):
        return f"{head} {'out of memory':>9}"
    mfu = f"{r['flops'] / r['seconds'] / (peak * 1e12):7.1%}" if peak else f"{'-':>7}"
    line = f"{head} {r['seconds']:9.4f} {r['tokens'] / r['seconds']:10.0f} {r['peak_mb']:9.0f} {mfu}"
    if baseline and baseline.get("oom"):
        line += f" {'naive OOM':>17} {'naive OOM':>18}"
    elif baseline:
        line += f" {baseline['seconds'] / r['seconds']:16.2f}x {r['peak_mb'] / max(baseline['peak_mb'], 1e-9):17.2f}x"
    return line


PARTS = [("full step", "naive", "ours"), ("full step, `train.compile: true`", "naive", "ours-compiled"),
         ("full step, `train.padding_free: true` (in the naive column: ours, padded)", "ours", "ours-padding-free"),
         ("full step, `train.padding_free: true` on `flex_attention`, one row (in the naive column: ours, padded)",
          "ours", "ours-flex"),
         ("KD + CE alone", "loss-naive", "loss-ours"),
         ("evaluation's KD + CE (no_grad; naive: before the fix, a head gradient formed)", "eval-before", "eval-ours")]
BASELINE = {ours: naive for _, naive, ours in PARTS}


def cell(r: dict | None, peak: float | None) -> str:
    """A variant's measurement in the Markdown table."""
    if r is None:
        return "–"
    if r.get("oom"):
        return "out of memory"
    mfu = f", MFU {r['flops'] / r['seconds'] / (peak * 1e12):.1%}" if peak else ""
    return f"{r['seconds']:.4g} s, {r['tokens'] / r['seconds']:,.0f} tok/s, {r['peak_mb']:,.0f} MB{mfu}"


def ratios(naive: dict | None, ours: dict | None) -> list[str]:
    """Speed ours/naive (naive time ÷ ours) and peak memory ours/naive."""
    if naive is None or ours is None:
        return ["–", "–"]
    if naive.get("oom") or ours.get("oom"):
        return ["naive out of memory" if naive.get("oom") else "out of memory"] * 2
    return [f"{naive['seconds'] / ours['seconds']:.2f}×", f"{ours['peak_mb'] / max(naive['peak_mb'], 1e-9):.2f}×"]


def markdown(results: dict[str, dict[str, dict]], peak: float | None) -> list[str]:
    """The table of `results` (shape → variant → measurement): a row per part measured."""
    lines = ["| shape | part | naive | ours | speed ours/naive | peak memory ours/naive |", "|---|---|---|---|---|---|"]
    for name, measured in results.items():
        for part, naive, ours in PARTS:
            if ours not in measured and (naive not in measured or ours in ("ours-compiled", "ours-padding-free",
                                                                           "ours-flex")):
                continue  # the naive step is shown with `ours`; `ours-compiled` has its own row
            if naive.startswith(("loss", "eval")):
                s = shape(name)
                part += (f", {s['loss_positions']:,} positions × vocabulary {s['teacher']['vocab_size']:,}, "
                         f"hidden {s.get('loss_hidden', s['teacher']['hidden_size']):,}, chunks of {LOSS_CHUNK}")
            row_cells = [name, part, cell(measured.get(naive), peak), cell(measured.get(ours), peak),
                         *ratios(measured.get(naive), measured.get(ours))]
            lines.append("| " + " | ".join(row_cells) + " |")
    return lines


def duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["embedded", "paper-shape"], choices=SHAPES)
    parser.add_argument("--reps", type=int, default=5)
    on_request = ("ours-compiled", "ours-flex")
    parser.add_argument("--variants", nargs="+", default=[v for v in VARIANTS if v not in on_request],
                        choices=VARIANTS, help="ours-compiled: ours with train.compile (slow to compile on CPU); "
                                               "ours-flex: GPU only")
    parser.add_argument("--peak-tflops", type=float,
                        help="the device's peak, TFLOP/s (default: known GPUs' dense bf16 peak; no MFU on CPU)")
    docs_block.add_write_option(parser, "Markdown table")
    parser.add_argument("--vary-batch", action="store_true",
                        help="each update on a batch of its own (new widths), the mean time; default: one batch, "
                             "the median")
    parser.add_argument("--json", type=Path, help="also write every measurement (JSON) to this file")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # child process: one measurement, printed as JSON
        result = run_variant(args.shape, args.variant, args.reps, args.vary_batch)
        print(json.dumps({**result, "process_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}))
        return
    command = docs_block.checked_command(parser, args, __file__, sys.argv[1:])  # before measuring
    start, load = time.perf_counter(), os.getloadavg()[0]
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    peak = peak_tflops(device, args.peak_tflops)
    if device == "cpu" and any(shape(name).get("needs_gpu") for name in args.shapes):
        parser.error("shape 'paper' needs a GPU (none is visible)")
    if device == "cpu" and "ours-flex" in args.variants:
        parser.error("variant 'ours-flex' needs a GPU (FlexAttention has no backward on CPU)")
    print(f"device: {device}; " + (f"MFU against {peak} TFLOP/s" if peak else "no MFU (give --peak-tflops)"))
    print(f"{'shape':12} {'variant':13} {'step s':>9} {'tokens/s':>10} {'peak MB':>9} {'MFU':>7} "
          f"{'speed ours/naive':>17} {'memory ours/naive':>18}", flush=True)
    measured = {}
    for name in args.shapes:
        results = measured[name] = {}
        for variant in args.variants:
            out = subprocess.run([sys.executable, __file__, "--shape", name, "--variant", variant,
                                  "--reps", str(args.reps), *(["--vary-batch"] if args.vary_batch else [])],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{name} {variant} failed:\n{out.stderr[-3000:]}")
            r = results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
            baseline = results.get(BASELINE[variant]) if variant in BASELINE else None
            print(row(r, peak, baseline), flush=True)
    if args.json:
        args.json.write_text(json.dumps(measured, indent=1))
    if args.write:
        # each child's own peak (RUSAGE_CHILDREN would also count processes before this one in a shell chain)
        largest_gb = max(r["process_gb"] for results in measured.values() for r in results.values())
        lead = (f"`{command}` on {docs_block.conditions(None if device == 'cpu' else device)}: median of "
                f"{args.reps} steps after a warm-up, each variant in its own process; load average {load:.1f} at the "
                f"start; {duration(time.perf_counter() - start)} in all, largest process {largest_gb:.1f} GB"
                + (f"; MFU against {peak} TFLOP/s" if peak else "") + ":")
        changed = docs_block.write(args.write, command, "\n".join([lead, "", *markdown(measured, peak)]))
        print(f"{'wrote' if changed else 'unchanged:'} the block of `{command}` in {args.write}")


if __name__ == "__main__":
    main()
