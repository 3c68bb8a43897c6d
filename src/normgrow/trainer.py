"""The phase trainer (paper Algorithm 1, SPEC §3): one phase of one run, from the previous phase's
checkpoint (or the seed's initial blocks) to this phase's checkpoint and metrics.

Every phase: activate its blocks, mark its trainable blocks, start a fresh AdamW and a restarted
warm-up + cosine schedule, distil for `steps` updates with gradient clipping, evaluate every
`eval_every` updates and at the end on the fixed validation set, and count tokens:
- tokens: non-padding tokens of all training batches;
- unique tokens: tokens of the documents read for the first time in this run;
- active-layer tokens: Σ over updates of (batch tokens × active decoder layers).
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from normgrow.checkpoint import atomic_write, load_student, read_json, save_student, write_json
from normgrow.config import snapshot_steps
from normgrow.data import DataState, DocumentIterator, TokenStore, fixed_batches, phase_start_state
from normgrow.evaluate import evaluate_student
from normgrow.forward import causal_lm_logits, positions_and_labels, student_logits
from normgrow.objective import Objective
from normgrow.schedule import lr_at
from normgrow.student import BlockStackStudent
from normgrow.teacher import load_teacher

COUNTERS = ("tokens", "unique_tokens", "active_layer_tokens", "steps")


def trainable_blocks(phase: dict) -> list[int]:
    """`all` active blocks, or only the `newest` one (freeze control)."""
    active = phase["active_blocks"]
    return list(range(active)) if phase["trainable"] == "all" else [active - 1]


def build_optimizer(student: BlockStackStudent, train: dict) -> torch.optim.AdamW:
    params = [p for p in student.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=train["lr"], betas=tuple(train["betas"]), eps=train["eps"],
                             weight_decay=train["weight_decay"])


def phase_lr(phase: dict, t: int, train: dict) -> float:
    return lr_at(phase["schedule_offset"] + t, phase["schedule_length"], train["lr"], train["min_lr"],
                 train["warmup_fraction"])


def write_csv(path: Path, rows: list[dict]) -> None:
    def write(tmp):
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    atomic_write(path, write)


def run_phase(spec: dict, teacher_path: str, tokens_dir: Path, previous: Path | None, out: Path,
              log=sys.stderr) -> dict:
    """Train phase `spec['phase']` of `spec['run']`; write student.safetensors, state.json,
    train.csv and eval.csv under `out`. Returns the state."""
    start_time = time.time()
    torch.set_num_threads(spec["threads"])
    seed, p = spec["seed"], spec["phase"]
    phase, train = spec["phases"][p], spec["train"]
    torch.manual_seed(seed * 1000 + p)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = json.loads((Path(tokens_dir) / "meta.json").read_text())
    pad_id = meta["boundary_id"]

    teacher = load_teacher(teacher_path, spec["teacher_dtype"], spec["student"]["attn_implementation"])
    s = spec["student"]
    student = BlockStackStudent.from_teacher(teacher, spec["placement"], s["blocks"], s["layers_per_block"],
                                             seed, s["attn_implementation"])
    if p == 0:
        before = {"data": DataState().as_dict(), "run_counters": dict.fromkeys(COUNTERS, 0), "global_step": 0}
    else:
        before = read_json(previous / "state.json")
        load_student(student, previous / "student.safetensors")
    student.active_blocks = phase["active_blocks"]
    student.set_trainable(trainable_blocks(phase))
    student.train()
    optimizer = build_optimizer(student, train)
    objective = Objective(**spec["objective"])

    store = TokenStore(Path(tokens_dir) / "train")
    valid = fixed_batches(TokenStore(Path(tokens_dir) / "valid"), train["batch_size"], pad_id)
    start_state = phase_start_state(phase["data"], DataState(**before["data"]), spec["shard_docs"])
    batches = DocumentIterator(store, start_state, spec["shard_docs"], train["batch_size"], pad_id, seed)
    layers = phase["active_blocks"] * s["layers_per_block"]
    counters = dict.fromkeys(COUNTERS, 0)
    train_rows, eval_rows = [], []
    params = [q for q in student.parameters() if q.requires_grad]
    label = f"{spec['run']} seed {seed} phase {p}"
    snapshots = set(snapshot_steps(phase["steps"], spec["snapshots"]))
    (out / "snapshots").mkdir(exist_ok=True)
    progress = tqdm(range(1, phase["steps"] + 1), desc=label, mininterval=5, file=log)
    for t in progress:
        lr = phase_lr(phase, t, train)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = batches.next_batch()
        positions, labels = positions_and_labels(batch)
        with torch.no_grad():
            teacher_logits = causal_lm_logits(teacher, batch, positions)
        terms = objective(student_logits(student, batch, positions), teacher_logits, labels)
        terms["total"].backward()
        loss = float(terms["total"].detach())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, train["grad_clip"]))
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            raise FloatingPointError(f"{label}: non-finite loss or gradient at step {t}")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        counters["steps"] += 1
        counters["tokens"] += batch.tokens
        counters["active_layer_tokens"] += batch.tokens * layers
        global_step = before["global_step"] + t
        train_rows.append({"step": t, "global_step": global_step, "loss": loss,
                           "ce": float(terms["ce"].detach()), "kd": float(terms["kd"].detach()), "lr": lr,
                           "grad_norm": grad_norm, "tokens": batch.tokens})
        progress.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.1e}", refresh=False)
        if t in snapshots and t < phase["steps"]:
            save_student(student, out / "snapshots" / f"step{global_step}.safetensors")
        if t % train["eval_every"] == 0 or t == phase["steps"]:
            metrics = evaluate_student(student, teacher, valid, objective)
            eval_rows.append({"step": t, "global_step": global_step, "ce": metrics["ce"],
                              "kd": metrics["kd"], "ppl": metrics["ppl"]})
            print(f"{label} step {t}: validation CE {metrics['ce']:.4f} KD {metrics['kd']:.4f} "
                  f"PPL {metrics['ppl']:.2f}", file=log, flush=True)
    counters["unique_tokens"] = batches.unique_tokens(start_state, batches.state)
    state = {
        "run": spec["run"], "seed": seed, "phase": p, "placement": spec["placement"],
        "active_blocks": phase["active_blocks"], "active_layers": layers, "trainable_blocks": trainable_blocks(phase),
        "data_policy": phase["data"], "global_step": before["global_step"] + phase["steps"],
        "data": batches.state.as_dict(), "phase_counters": counters,
        "run_counters": {k: before["run_counters"][k] + counters[k] for k in COUNTERS},
        "final_eval": eval_rows[-1], "wall_seconds": time.time() - start_time,
    }
    save_student(student, out / "student.safetensors")
    if phase["steps"] in snapshots:  # the phase end is a snapshot too: a hard link, no copy
        link = out / "snapshots" / f"step{state['global_step']}.safetensors"
        link.unlink(missing_ok=True)
        link.hardlink_to(out / "student.safetensors")
    write_csv(out / "train.csv", train_rows)
    write_csv(out / "eval.csv", eval_rows)
    write_json(out / "state.json", state)
    return state
