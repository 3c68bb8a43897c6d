"""How deep one training update runs in normgrow's own code, and how much of it: a measurement for the
trainer's readability (issue 61, "one update on one screen").

It trains a tiny phase alone, and a group of two phases on one teacher forward, through the function the
rule's script calls (normgrow.cluster.launch.launch_phases, in this process), and profiles one update (the
second: the first pays for lazy initialisation) with `sys.setprofile`:

- calls to the optimizer step: the normgrow frames on the stack when `torch.optim.Optimizer.step` is
  entered, from launch_phases down (launch_phases counted, the optimizer's own frames not);
- calls to the loss kernel: the same for the loss's chunk function (`--kernel`, by default
  normgrow.train.objective._chunk_terms, the fused KD + CE of one chunk of positions);
- functions per update: the distinct normgrow functions (module and qualified name; comprehensions and
  generator expressions not counted) called from the start of the update (its batch drawn) to the start of
  the next one, and the modules they live in.

Run it from the repository's root with the sources to measure first on the path:

    PYTHONPATH=src python tools/update_calls.py [--verbose]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

UPDATE = 2  # the update measured: not the first (lazy initialisation, AdamW's state)
ENTRY = "launch_phases"  # what workflow/scripts/train_phase.py calls
OPTIMIZER_STEP = "Optimizer.step"
COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def tiny_config() -> dict:
    """A freeze run of a 2-block student, four updates per phase, evaluated and saved at the end only
    (so that the update measured is a plain one)."""
    return {
        "threads": 1,
        "teacher": {"dtype": "float32"},
        "student": {"blocks": 2, "layers_per_block": 2, "attn_implementation": "sdpa"},
        "objective": {"alpha": 0.7, "gamma": 0.3, "temperature": 1.0},
        "train": {"phase_steps": 4, "batch_size": 2, "lr": 1e-2, "min_lr": 1e-4, "warmup_fraction": 0.015,
                  "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.0, "grad_clip": 0.5, "eval_every": 4,
                  "resume_every": 4, "loss_chunk": 5, "precision": "float32", "activation_checkpointing": False,
                  "compile": False, "padding_free": False},
        "curricula": {"freeze": [{"active_blocks": 1, "trainable": "newest"},
                                 {"active_blocks": 2, "trainable": "newest"}]},
        "runs": {"post-freeze": {"placement": "post", "curriculum": "freeze"},
                 "pre-freeze": {"placement": "pre", "curriculum": "freeze"}},
    }


def write_inputs(root: Path) -> None:
    """Random documents ending in the boundary token 0 (tokens/train, tokens/valid) and a tiny Qwen3 teacher."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from normgrow.train.data import save_tokens

    rng = np.random.default_rng(0)
    docs = [[*rng.integers(1, 64, size=int(n)).tolist(), 0] for n in rng.integers(3, 12, size=30)]
    save_tokens(docs, root / "tokens" / "train")
    save_tokens(docs[:4], root / "tokens" / "valid")
    (root / "tokens" / "meta.json").write_text(json.dumps({"boundary_id": 0}))
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, intermediate_size=48, max_position_embeddings=64,
                         tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    Qwen3ForCausalLM(config).save_pretrained(root / "teacher")


def job(root: Path, runs: list[str]):
    """Phase 0 of each of `runs` (one batch stream) as one training job writing under root/out."""
    from normgrow.design.curriculum import phase_spec, snapshots_per_phase
    from normgrow.design.execution import Execution
    from normgrow.train.trainer import PhaseTask, TrainingJob

    config = tiny_config()
    tasks = tuple(PhaseTask(phase_spec(config, run, 1, 0),
                            Execution.from_config(config, snapshots_per_phase(config, run)), None,
                            root / "out" / "-".join(runs) / run) for run in runs)
    return TrainingJob(tasks, str(root / "teacher"), root / "tokens")


def is_normgrow(code) -> bool:
    return "/normgrow/" in code.co_filename.replace("\\", "/") and code.co_name not in COMPREHENSIONS


def name_of(frame) -> tuple[str, str]:
    return frame.f_globals.get("__name__", "?"), frame.f_code.co_qualname


@dataclass
class Measurement:
    """What the profiler saw of update UPDATE."""

    kernel: str
    updates_started: int = 0
    optimizer_chain: list[str] = field(default_factory=list)
    kernel_chain: list[str] = field(default_factory=list)
    functions: set[tuple[str, str]] = field(default_factory=set)

    def chain(self, frame) -> list[str]:
        """The normgrow functions on the stack above `frame`, from the entry down."""
        names = []
        frame = frame.f_back
        while frame is not None:
            if is_normgrow(frame.f_code):
                names.append(".".join(name_of(frame)))
                if frame.f_code.co_name == ENTRY:
                    break
            frame = frame.f_back
        return names[::-1]


class UpdateProfile:
    """Counts the updates by their first batch draw after an optimizer step, and profiles update UPDATE."""

    def __init__(self, kernel: str):
        self.m = Measurement(kernel)
        self.stepped = True  # before the first update: its batch starts it

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code.co_qualname == "DocumentIterator.next_batch" and self.stepped:
            self.m.updates_started += 1
            self.stepped = False
        optimizer_step = code.co_name == "step" and isinstance(frame.f_locals.get("self"), torch.optim.Optimizer)
        self.stepped = self.stepped or optimizer_step
        m = self.m
        if m.updates_started != UPDATE:
            return
        if is_normgrow(code):
            m.functions.add(name_of(frame))
        if not m.optimizer_chain and optimizer_step:
            m.optimizer_chain = m.chain(frame)
        if not m.kernel_chain and code.co_qualname == m.kernel:
            m.kernel_chain = m.chain(frame)


def measure(root: Path, runs: list[str], kernel: str) -> Measurement:
    from normgrow.cluster.launch import launch_phases

    profile = UpdateProfile(kernel)
    with open(root / f"{'-'.join(runs)}.log", "w") as log:
        sys.setprofile(profile)
        try:
            status = launch_phases(job(root, runs), log, attempt=1, shutdown_timeout=30, name="update_calls")
        finally:
            sys.setprofile(None)
    if status != 0:
        raise SystemExit(f"training failed ({status}): see {root}")
    if not (profile.m.optimizer_chain and profile.m.kernel_chain):
        raise SystemExit(f"update {UPDATE} never reached the optimizer step or {kernel}")
    return profile.m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="_chunk_terms", help="the loss kernel's qualified name")
    parser.add_argument("--verbose", action="store_true", help="also print the call chains and the functions")
    args = parser.parse_args()
    import normgrow.train.trainer as trainer

    print(f"normgrow from {Path(trainer.__file__).parents[1]}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_inputs(root)
        results = {"alone": measure(root, ["post-freeze"], args.kernel),
                   "group of 2": measure(root, ["pre-freeze", "post-freeze"], args.kernel)}
    rows = [("calls from launch_phases to Optimizer.step", lambda m: len(m.optimizer_chain)),
            (f"calls from launch_phases to {args.kernel}", lambda m: len(m.kernel_chain)),
            (f"normgrow functions in update {UPDATE}", lambda m: len(m.functions)),
            ("modules they live in", lambda m: len({module for module, _ in m.functions}))]
    width = max(len(label) for label, _ in rows)
    print(f"{'':{width}}  " + "  ".join(f"{name:>10}" for name in results))
    for label, value in rows:
        print(f"{label:{width}}  " + "  ".join(f"{value(m):>10}" for m in results.values()))
    if args.verbose:
        for name, m in results.items():
            print(f"\n{name}: to {OPTIMIZER_STEP}: " + " → ".join(m.optimizer_chain))
            print(f"{name}: to {args.kernel}: " + " → ".join(m.kernel_chain))
            for module in sorted({module for module, _ in m.functions}):
                print(f"  {module}: " + ", ".join(sorted(q for mod, q in m.functions if mod == module)))


if __name__ == "__main__":
    main()
