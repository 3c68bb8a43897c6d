"""Throughput and memory of one distillation step: normgrow's step against a naive baseline.

    python benchmarks/distill_step.py [--shapes embedded paper-shape] [--reps 5] [--peak-tflops 0.2]

For each shape it runs, each in a fresh subprocess (so peak memory is its own):
- `ours`: the trainer's step on one rank — teacher under inference mode, student forward, KD + CE
  chunked over positions and fused with both LM heads (normgrow.forward.distillation_terms),
  backward, clip, fused AdamW (normgrow.trainer.build_optimizer); the FSDP2 wrapper the trainer
  adds for sharding is left out, as it is from the baseline;
- `naive`: the same step written the obvious way — stock `Qwen3ForCausalLM`-style full logits for
  teacher (no_grad) and student over the whole padded micro-batch, fp32 log-softmax KL and CE, the
  default AdamW;
- `loss-ours` / `loss-naive`: the KD + CE part alone (hidden states → loss → backward into the
  hidden states and the student head) at the shape's vocabulary, on `loss_positions` positions
  (the paper shape uses hidden 512 here, so that the logits, not the head's gradient, dominate).
It prints the median step time over `--reps` repetitions after one warm-up, tokens/s, peak memory
above the loaded models (max RSS − RSS before the first step), the ratio ours/naive measured in the
same run, and MFU = FLOPs / time / peak, with FLOPs = 2·N_teacher·tokens + 6·N_student·tokens
(N: matmul parameters incl. LM heads; attention scores ignored at these lengths); for the loss
alone, 8·V·H·positions.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

SHAPES = {
    # the embedded default's sizes (config.yaml): teacher 4 layers, student 3 blocks × 2 layers
    "embedded": dict(vocab=2048, hidden=128, heads=4, kv_heads=2, head_dim=32, intermediate=384,
                     teacher_layers=4, blocks=3, layers_per_block=2, batch=8, seq=128, loss_positions=1024),
    # the paper's layer and vocabulary shapes at reduced depth and length (fits 24 GB)
    "paper-shape": dict(vocab=151936, hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=12288,
                        teacher_layers=1, blocks=1, layers_per_block=1, batch=2, seq=64, teacher_dtype="bfloat16",
                        # KD + CE alone where logits dominate: vocabulary 151,936, 2,048 positions, hidden 512
                        loss_positions=2048, loss_hidden=512),
}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def matmul_params(module) -> int:
    import torch

    return sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))


def build(shape: dict):
    """Teacher (bf16 at the paper's shape, as on GPU) and student; the student's frozen embedding
    shares the teacher's tensor so that the paper shape fits this machine (both variants alike)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from normgrow.student import BlockStackStudent

    config = Qwen3Config(vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_attention_heads=shape["heads"],
                         num_key_value_heads=shape["kv_heads"], head_dim=shape["head_dim"],
                         intermediate_size=shape["intermediate"], num_hidden_layers=shape["teacher_layers"],
                         max_position_embeddings=max(512, shape["seq"]), tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    teacher = Qwen3ForCausalLM(config).eval().requires_grad_(False)
    student = BlockStackStudent.from_teacher(teacher, "pre", shape["blocks"], shape["layers_per_block"], seed=0)
    student.embed_tokens.weight = teacher.get_input_embeddings().weight
    student.set_trainable(list(range(shape["blocks"])))
    if shape.get("teacher_dtype") == "bfloat16":
        teacher.to(torch.bfloat16)
    return teacher, student


def batch_for(shape: dict):
    import numpy as np

    from normgrow.data import collate

    rng = np.random.default_rng(0)
    lengths = [shape["seq"]] + list(rng.integers(shape["seq"] // 2, shape["seq"] + 1, size=shape["batch"] - 1))
    return collate([rng.integers(1, shape["vocab"], size=int(n)) for n in lengths], pad_id=0)


def naive_terms(student, teacher, batch, objective):
    """Full logits for the whole padded micro-batch, fp32 log-softmax, then the loss positions."""
    import torch

    from normgrow.forward import positions_and_labels

    positions, labels = positions_and_labels(batch)
    with torch.no_grad():
        teacher_logits = teacher(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits.float()
    student_logits = student.lm_head(student(batch.input_ids, batch.attention_mask)).float()
    return objective(student_logits[positions], teacher_logits[positions], labels)


def run_variant(shape_name: str, variant: str, reps: int) -> dict:
    import torch

    from normgrow.forward import distillation_terms
    from normgrow.objective import Objective, fused_objective
    from normgrow.trainer import build_optimizer, clip_gradients

    shape = SHAPES[shape_name]
    objective = Objective()
    if variant.startswith("loss"):
        n, v, h = shape["loss_positions"], shape["vocab"], shape.get("loss_hidden", shape["hidden"])
        head = (torch.randn(v, h) * 0.02).requires_grad_()
        t_head = torch.randn(v, h) * 0.02
        hidden = torch.randn(n, h, requires_grad=True)
        teacher_hidden = torch.randn(n, h)
        labels = torch.randint(0, v, (n,))
        tokens, flops = n, 8 * v * h * n  # teacher head forward (2) + student head forward and backward (6)

        def step():
            if variant == "loss-ours":
                terms = fused_objective(objective, hidden, head, teacher_hidden, t_head, labels, chunk=256)
            else:
                terms = objective(hidden @ head.T, teacher_hidden @ t_head.T, labels)
            terms["total"].backward()
            hidden.grad = head.grad = None
    else:
        teacher, student = build(shape)
        batch = batch_for(shape)
        tokens = batch.tokens
        flops = (2 * matmul_params(teacher) + 6 * matmul_params(student)) * tokens
        params = [p for p in student.parameters() if p.requires_grad]
        train = {"lr": 1e-4, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.0}
        if variant == "ours":  # the trainer's optimizer and clipping
            optimizer = build_optimizer(student, train)
        else:
            optimizer = torch.optim.AdamW(params, lr=train["lr"], betas=train["betas"], weight_decay=0.0)

        def step():
            if variant == "ours":
                terms = distillation_terms(student, teacher, batch, objective, chunk=4096)
                terms["total"].backward()
                clip_gradients(params, 0.5)
            else:
                terms = naive_terms(student, teacher, batch, objective)
                terms["total"].backward()
                torch.nn.utils.clip_grad_norm_(params, 0.5)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    base = rss_mb()
    times = []
    for i in range(reps + 1):
        start = time.perf_counter()
        step()
        if i:
            times.append(time.perf_counter() - start)
    return {"shape": shape_name, "variant": variant, "seconds": statistics.median(times), "tokens": tokens,
            "peak_mb": max_rss_mb() - base, "flops": flops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--variants", nargs="+", default=["naive", "ours", "loss-naive", "loss-ours"],
                        choices=["naive", "ours", "loss-naive", "loss-ours"])
    parser.add_argument("--peak-tflops", type=float, default=0.2, help="device peak, TFLOP/s (CPU: give yours)")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # child process: one measurement, printed as JSON
        print(json.dumps(run_variant(args.shape, args.variant, args.reps)))
        return
    print(f"{'shape':12} {'variant':11} {'step s':>9} {'tokens/s':>10} {'peak MB':>9} {'MFU':>7} "
          f"{'speed ours/naive':>17} {'memory ours/naive':>18}")
    for shape in args.shapes:
        results = {}
        for variant in args.variants:
            out = subprocess.run([sys.executable, __file__, "--shape", shape, "--variant", variant,
                                  "--reps", str(args.reps)], capture_output=True, text=True, check=True)
            r = results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
            line = (f"{shape:12} {variant:11} {r['seconds']:9.4f} {r['tokens'] / r['seconds']:10.0f} "
                    f"{r['peak_mb']:9.0f} {r['flops'] / r['seconds'] / (args.peak_tflops * 1e12):7.1%}")
            baseline = results.get(variant.replace("ours", "naive"))
            if variant.endswith("ours") and baseline:
                line += (f" {baseline['seconds'] / r['seconds']:16.2f}x"
                         f" {r['peak_mb'] / max(baseline['peak_mb'], 1e-9):17.2f}x")
            print(line, flush=True)


if __name__ == "__main__":
    main()
