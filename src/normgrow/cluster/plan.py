"""Resource plan of a configuration: parameter counts, per-GPU memory and tokens per phase.

Parameter counts are exact for the layers of every supported teacher family (q/k/v/o projections,
SwiGLU MLP, the layer's norms, the q/k RMSNorms of Qwen3, Gemma 3 and OLMo 2, the family's biases), for
a pre/post-norm student.
Memory is an estimate per GPU for FSDP2 over `gpus` ranks, for a job of `students` phases (a group
on one teacher forward per batch, `resources.train.group_size`; one is a phase alone), whose
students step one after the other on the same batch:
- student trainable parameters (decoder blocks, boundary norm, LM head), sharded: fp32 weights
  (4 B), fp32 gradients (4 B) and AdamW moments (8 B) per parameter, divided by the ranks;
- student embedding (frozen), sharded in fp32 (4 B per parameter, divided by the ranks);
- the group's other students: their weights, AdamW moments and embedding, sharded (12 B per
  trainable parameter and 4 B per embedding parameter, divided by the ranks); no gradients (each
  optimizer step drops its student's) and no gathered weights (each backward reshards them);
- weights gathered for compute, in the compute precision (`train.precision`; C = 2 B for bf16, 4 B
  for fp32): the root unit (embedding, head, boundary norm) for the whole step, and two decoder
  layers (the one computing and the one prefetched); none for one fp32 process (plain module);
- teacher, replicated in `teacher.dtype` (T = 2 B per parameter in bf16, on every rank: inference
  only, no all-gathers);
- in a group, the teacher's final hidden states at the N loss positions, T × N × H: computed once
  per batch and kept until every student of the job has stepped (a phase alone computes them inside
  its step and frees them with the loss, before backward: the KD + CE stage below);
- the working set of the step's largest stage (they never coexist, so the peak takes the largest):
  - teacher forward: one layer's transients, T × tokens × (3·I + 4·H) (inference mode frees each
    layer's activations once the next has consumed them, and no KV cache is kept);
  - the fused KD + CE, after the student's forward, before backward: the saved layer inputs (below),
    two (N × H) hidden-state tensors at the N loss positions (the student's and its gradient; and the
    teacher's, for a phase alone), 6 fp32 tensors of chunk × V and the LM head's fp32 gradient
    accumulator (V × H × 4 B), instead of (N × V) logits;
  - backward: the saved activations and the head's gradient (C × V × H). With activation
    checkpointing (`train.activation_checkpointing`) the saved layer inputs are C × tokens × H per
    layer, plus one recomputed layer's backward working set, C × tokens × (18·H + 6·I): its inputs of
    every projection and norm, RMSNorm's fp32 intermediates, SwiGLU's gate/up/product and their
    gradients. Without, every layer keeps C × tokens × (16·H + 5·I) (the same, less the gradients),
    and backward's temporaries stay within what it frees.
The memory trace (normgrow.cluster.trace) checks the coefficients: `python -m normgrow.cli trace
config.yaml configs/paper.yaml` prints the plan beside the traced peak (docs/cluster.md, several shapes).
Tokens per phase are an upper bound: steps × batch × max length (documents are usually shorter).
"""

from __future__ import annotations

import copy

from normgrow.design.execution import shares_teacher_forward

GB = 1e9
WRITE_GB_PER_S = 1.0  # an assumed file system rate, for the resume state's save time only


# Norms on the residual stream of one teacher layer where a family has other than pre-norm's two
# (Gemma 2 and 3: sandwich; normgrow.model.family); a pre/post-norm student layer has two.
LAYER_NORMS = {"gemma2": 4, "gemma3_text": 4}


def sublayer_parameters(c) -> int:
    """One decoder layer's attention and MLP of the teacher's family (normgrow.model.family), the norms
    inside attention included: q/k/v/o projections (Phi-3's fused qkv_proj has as many weights),
    SwiGLU MLP; Qwen3's and Gemma 3's per-head q/k RMSNorms, OLMo 2's over the full q and k widths;
    biases where the family has them (Qwen2's q/k/v always; `attention_bias` on q/k/v/o and Llama's
    `mlp_bias` where the config sets them)."""
    h, i = c.hidden_size, c.intermediate_size
    hd = getattr(c, "head_dim", None) or h // c.num_attention_heads
    q, kv = c.num_attention_heads * hd, c.num_key_value_heads * hd
    model_type = getattr(c, "model_type", "qwen3")
    attention = h * q + 2 * h * kv + q * h
    if model_type in ("qwen3", "gemma3_text"):
        attention += 2 * hd
    elif model_type == "olmo2":
        attention += q + kv
    if model_type == "qwen2":
        attention += q + 2 * kv
    elif getattr(c, "attention_bias", False):
        attention += q + 2 * kv + h
    mlp = 3 * h * i + (2 * i + h if getattr(c, "mlp_bias", False) else 0)
    return attention + mlp


def layer_parameters(c) -> int:
    """One decoder layer of the teacher: its attention and MLP (sublayer_parameters) and its own norms
    (two RMSNorms; four for Gemma 2 and 3)."""
    return sublayer_parameters(c) + LAYER_NORMS.get(getattr(c, "model_type", "qwen3"), 2) * c.hidden_size


def student_parameters(teacher_config, blocks: int, layers_per_block: int) -> dict[str, int]:
    """A pre/post-norm student's parameters: the teacher's sub-layers and two norms per layer."""
    h, v = teacher_config.hidden_size, teacher_config.vocab_size
    decoder = blocks * layers_per_block * (sublayer_parameters(teacher_config) + 2 * h)
    return {"embedding": v * h, "decoder": decoder, "boundary_norm": h, "head": v * h,
            "total": 2 * v * h + decoder + h, "trainable": v * h + decoder + h}


def teacher_parameters(c) -> int:
    h, v = c.hidden_size, c.vocab_size
    head = 0 if c.tie_word_embeddings else v * h
    return v * h + c.num_hidden_layers * layer_parameters(c) + h + head


def plan(config: dict, teacher_config, gpus: int, gpu_gb: float, activation_checkpointing: bool | None = None,
         students: int | None = None) -> dict:
    """The plan of a validated `config` on `gpus` GPUs of `gpu_gb` GB for a job of `students` phases
    (default: `resources.train.group_size`); `activation_checkpointing` overrides
    `train.activation_checkpointing`."""
    s, t = config["student"], config["train"]
    if activation_checkpointing is None:
        activation_checkpointing = t["activation_checkpointing"]
    if students is None:
        students = config["resources"]["train"]["group_size"]
    compute = 2 if t["precision"] == "bfloat16" else 4  # bytes of a gathered weight and of an activation
    teacher_bytes = 4 if config["teacher"]["dtype"] == "float32" else 2
    counts = student_parameters(teacher_config, s["blocks"], s["layers_per_block"])
    layers = s["blocks"] * s["layers_per_block"]
    h, i, v = teacher_config.hidden_size, teacher_config.intermediate_size, teacher_config.vocab_size
    tokens = max(1, t["batch_size"] // gpus) * config["data"]["max_length"]
    positions = tokens  # an upper bound: every position but each document's last
    if activation_checkpointing:  # layer inputs saved; backward recomputes one layer at a time
        saved, recomputed = compute * tokens * h * layers, compute * tokens * (18 * h + 6 * i)
    else:  # every layer's activations saved; backward's temporaries stay within them
        saved, recomputed = compute * tokens * (16 * h + 5 * i) * layers, 0
    chunk = min(t["loss_chunk"], positions)
    # one fp32 process keeps the plain module: nothing is gathered (normgrow.train.distributed.shard_student)
    gathered = 0 if gpus == 1 and compute == 4 else compute * (counts["embedding"] + counts["head"] + h
                                                                 + 2 * counts["decoder"] // layers)
    shared = shares_teacher_forward(students)  # the teacher's hidden states held through every backward
    stages = {
        "teacher forward (one layer, inference)": teacher_bytes * tokens * (3 * i + 4 * h),
        "KD + CE (saved inputs, fused loss)": saved + (2 + (not shared)) * compute * positions * h
        + 6 * 4 * chunk * v + 4 * v * h,
        "backward (saved inputs, one layer)": saved + compute * v * h + recomputed,
    }
    largest = max(stages, key=stages.get)
    others = {f"other students × {students - 1} (weights, AdamW, sharded)": (students - 1) * (
        12 * counts["trainable"] + 4 * counts["embedding"]) / gpus} if students > 1 else {}
    memory = {
        "student weights, grads, AdamW (sharded)": 16 * counts["trainable"] / gpus,
        "student embedding (fp32, sharded)": 4 * counts["embedding"] / gpus,
        **others,
        f"gathered {t['precision']} weights (root unit, 2 layers)": gathered,
        f"teacher ({config['teacher']['dtype']}, replicated)": teacher_bytes * teacher_parameters(teacher_config),
        **({"teacher hidden states (loss positions)": teacher_bytes * positions * h} if shared else {}),
        "largest stage of the step (below)": stages[largest],
    }
    total = sum(memory.values())
    return {"parameters": {**counts, "teacher": teacher_parameters(teacher_config)},
            "memory_gb": {k: m / GB for k, m in memory.items()}, "total_gb": total / GB,
            "stages_gb": {k: m / GB for k, m in stages.items()},
            "gpus": gpus, "gpu_gb": gpu_gb, "students": students, "fits": total <= 0.9 * gpu_gb * GB,
            "micro_batch_tokens": tokens, "tokens_per_phase_max": t["phase_steps"] * t["batch_size"]
            * config["data"]["max_length"], "naive_logits_gb": 4 * tokens * v / GB,
            # a resume state (normgrow.train.resume): fp32 weights (the frozen embedding too) and AdamW's two moments
            "resume_state_gb": students * (4 * counts["total"] + 8 * counts["trainable"]) / GB,
            "warning_seconds": config["resources"]["train"]["warning_seconds"],
            "shutdown_timeout": config["resources"]["train"]["shutdown_timeout"]}


def what_fits(config: dict, teacher_config, gpus: int, gpu_gb: float, activation_checkpointing: bool | None = None,
              students: int | None = None) -> str:
    """For a plan that does not fit: the largest micro-batch (documents per rank) that fits on `gpus` GPUs,
    and the fewest GPUs (dividing train.batch_size) on which the configured batch fits, each with the key
    to set; or why neither does (the replicated teacher alone, say)."""
    batch, rows = config["train"]["batch_size"], max(1, config["train"]["batch_size"] // gpus)

    def fits(batch_size: int, ranks: int) -> bool:
        changed = copy.deepcopy(config)
        changed["train"]["batch_size"] = batch_size
        return plan(changed, teacher_config, ranks, gpu_gb, activation_checkpointing, students)["fits"]

    fewer = next((r for r in range(rows - 1, 0, -1) if fits(r * gpus, gpus)), None)
    more = next((g for g in range(gpus + 1, batch + 1) if batch % g == 0 and fits(batch, g)), None)
    lines = [f"  on {gpus} GPUs, at most {fewer} documents per rank fit (train.batch_size: {fewer * gpus}, a "
             f"micro-batch of {fewer * config['data']['max_length']:,} tokens)" if fewer else
             f"  on {gpus} GPUs, not even one document per rank fits"]
    lines.append(f"  train.batch_size {batch} fits on {more} GPUs (resources.train.gpus × nodes)" if more else
                 f"  train.batch_size {batch} fits on no number of GPUs up to {batch} (the teacher is replicated "
                 "on every rank): lower data.max_length or use GPUs with more memory")
    return "\n".join(lines)


def format_plan(p: dict) -> str:
    counts = p["parameters"]
    lines = [f"parameters: student {counts['total'] / 1e9:.2f}B ({counts['trainable'] / 1e9:.2f}B trainable; "
             f"decoder {counts['decoder'] / 1e9:.2f}B, head {counts['head'] / 1e9:.2f}B, embedding "
             f"{counts['embedding'] / 1e9:.2f}B), teacher {counts['teacher'] / 1e9:.2f}B",
             f"per GPU ({p['gpus']} × {p['gpu_gb']:g} GB), micro-batch {p['micro_batch_tokens']:,} tokens, "
             + ("one phase:" if p["students"] == 1 else f"a group of {p['students']} students on one teacher forward:")]
    lines += [f"  {name:48} {gb:8.1f} GB" for name, gb in p["memory_gb"].items()]
    largest = max(p["stages_gb"].values())
    lines += [f"    {name:46} {gb:8.1f} GB" + ("  ← largest" if gb == largest else "")
              for name, gb in p["stages_gb"].items()]
    lines += [f"  {'total':48} {p['total_gb']:8.1f} GB  → {'fits' if p['fits'] else 'does NOT fit'} "
              f"(≤ 90% of {p['gpu_gb']:g} GB)",
              f"  (full fp32 logits of one micro-batch would be {p['naive_logits_gb']:.1f} GB)",
              f"tokens per phase: at most {p['tokens_per_phase_max']:,}",
              f"resume state: {p['resume_state_gb']:.1f} GB ({p['resume_state_gb'] / p['gpus']:.1f} GB written per "
              f"rank, then read back and hashed by that rank for the SHA-256 manifest) — "
              f"{2 * p['resume_state_gb'] / WRITE_GB_PER_S:.0f} s to write and read at {WRITE_GB_PER_S:g} GB/s "
              f"(assumed: time a save on your file system); resources.train.warning_seconds ({p['warning_seconds']}) "
              f"must cover one update and one save, resources.train.shutdown_timeout ({p['shutdown_timeout']}: "
              "torchrun's grace after a SIGTERM) and the cluster's KillWait (preemption, scancel) one save"]
    return "\n".join(lines)
