"""A configuration's GPU jobs traced without a GPU: the trainer's own code at the config's real
shapes, on fake tensors, over a fake world of ranks, with every allocation measured.

Under `FakeTensorMode` a tensor carries only its shape, dtype and device: an 8B-parameter teacher
costs no memory and a forward pass no arithmetic. A fake process group
(`torch.testing._internal.distributed.fake_pg.FakeStore`) gives a world of any size whose
collectives do nothing, so FSDP2 shards, gathers and reduces exactly as on `gpus` ranks, and
`FSDPMemTracker` records the peak of rank 0 by category (sharded and unsharded parameters,
gradients, optimizer state, activations, temporaries, all-gather and reduce-scatter buffers).

What is traced (`trace`):
- training: one rank of a job of `students` phases (a group on one teacher forward per batch,
  `resources.train.group_size`; one is a phase alone) with every block active and trainable (the
  largest phase), built as `train_phases` builds it — the teacher in `teacher.dtype` from its config
  (no weights), each student by `BlockStackStudent.from_teacher`, `shard_student` (FSDP2,
  `train.precision`), `build_optimizer`, `train.activation_checkpointing` — then two updates (the
  second has optimizer state) on the longest batch the config allows: batch_size / gpus documents of
  max_length real tokens. An update is what `Trainer.train_step` does: one `teacher_hidden_states`
  forward, then each student's forward, `fused_objective`, backward, gradient clipping and optimizer
  step in turn (the teacher's forward inside the student's step for a phase alone), so the peak holds every
  student's sharded weights and AdamW state, the teacher's hidden states at the loss positions and
  one student's activations and gradients (the others' gradients are freed by their optimizer step);
- the teacher check's forward (`causal_lm_ce_sum`, one GPU, the same rows) and the diagnostics'
  (`diagnose`'s forward with boundary streams and its block-removal CE, the fp32 student on one GPU,
  diag_docs × diag_max_length tokens).

Two differences from a real GPU, both in what the fake device can do on a CPU-only build:
- the fake device is the CPU: a fake CUDA tensor cannot be copied (no CUDA device guard) and FSDP2
  needs the CUDA runtime's streams. FSDP2 runs the same Python on either (CPU stream objects are
  no-ops), so bytes per category are the same; device placement is not checked here (the GPU tests
  do that);
- AdamW's steps run outside the tracker (its state, 2 fp32 moments per sharded parameter, is
  counted): the fused kernel the trainer uses is in place on a GPU, but its fake-DTensor trace
  allocates full-size temporaries it does not (docs/cluster.md). The tracker is left
  before each student's step and entered again after it (the frees in between, such as the
  gradients the step drops, are still recorded), and the peak is the largest of its segments.
"""

from __future__ import annotations

import time
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode

from normgrow.design.config import VARLEN_ATTENTION
from normgrow.design.curriculum import Training
from normgrow.design.execution import shares_teacher_forward
from normgrow.train.data import Batch
from normgrow.train.distributed import Ranks, shard_student
from normgrow.train.objective import Objective

GiB = 2**30


@dataclass(frozen=True)
class Shape:
    """The traced shapes: `gpus` ranks, `rows` documents of `tokens` tokens per rank."""

    gpus: int
    rows: int
    tokens: int


class PeakMemory(TorchDispatchMode):
    """Tensors created by operations inside the context: the peak of their live bytes (each storage
    counted once, from creation until Python frees it) and the largest one (bytes, shape, op) — a
    (tokens × vocabulary) logits tensor shows up there."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self.largest = {"gib": 0.0, "shape": [], "op": ""}
        self._sizes: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and not isinstance(t, DTensor):
                self._count(t, func)
        return out

    def _count(self, t: torch.Tensor, func) -> None:
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self._sizes:
            return
        self._sizes[key] = size = storage.nbytes()
        weakref.finalize(storage, self._free, key)
        self.live += size
        self.peak = max(self.peak, self.live)
        if size / GiB > self.largest["gib"]:
            self.largest = {"gib": size / GiB, "shape": list(t.shape), "op": str(func)}

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key)


@contextmanager
def fake_world(gpus: int):
    """A fake process group of `gpus` ranks (this process is rank 0) and its device mesh."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("trace needs a process of its own: a process group is already initialised")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=gpus)
    try:
        yield Ranks(0, gpus, torch.device("cpu")), init_device_mesh("cpu", (gpus,))
    finally:
        dist.destroy_process_group()


def fake_teacher(teacher_config, dtype: str, attn_implementation: str):
    """The teacher as `load_teacher` builds it, from its config alone (call under FakeTensorMode)."""
    from transformers import AutoModelForCausalLM

    from normgrow.model.family import attention_kernel
    from normgrow.train.teacher import DTYPES

    kernel = attention_kernel(teacher_config, attn_implementation)
    teacher = AutoModelForCausalLM.from_config(teacher_config, dtype=DTYPES[dtype], attn_implementation=kernel)
    return teacher.eval().requires_grad_(False)


def full_batch(rows: int, tokens: int, vocab_size: int) -> tuple[Batch, tuple[torch.Tensor, torch.Tensor]]:
    """`rows` documents of `tokens` real tokens (the longest batch) and its loss targets, as real
    tensors (made before fake mode: the targets' count is read from the data)."""
    from normgrow.train.forward import positions_and_labels

    generator = torch.Generator().manual_seed(0)
    batch = Batch(torch.randint(0, vocab_size, (rows, tokens), generator=generator),
                  torch.ones(rows, tokens, dtype=torch.long))
    return batch, positions_and_labels(batch)


def snapshot(tracker) -> dict[str, float]:
    """The tracker's peak by category, in GiB, with the total."""
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    return {getattr(k, "value", k): v / GiB for k, v in peak.items()}


class GroupMemTracker(FSDPMemTracker):
    """`FSDPMemTracker` over a group of FSDP roots, each with its optimizer: torch's tracker instruments
    one root module and one optimizer (and its `track_external` does nothing), so this one walks a
    container of every root (sharded parameters, gradients, buffers, FSDP hooks) and hooks every
    optimizer (state, step). With one root it is `FSDPMemTracker(root, optimizer)`."""

    def __init__(self, roots: list[torch.nn.Module], optimizers: list[torch.optim.Optimizer]):
        super().__init__(roots[0], optimizers[0])
        self._root_mod = torch.nn.ModuleList(roots)
        self._optimizers = optimizers

    def _instrument_optimizer(self) -> None:
        handles: list = []
        for optimizer in self._optimizers:
            self._optm = optimizer
            super()._instrument_optimizer()
            handles += self._optimizer_hook_handles
        self._optimizer_hook_handles = tuple(handles)


def trace_training(config: dict, teacher_config, shape: Shape, students: int = 1) -> dict:
    """Peak memory of rank 0 over two updates of a group of `students` (see the module docstring)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from normgrow.model.student import BlockStackStudent, at_positions
    from normgrow.train.forward import teacher_hidden_states
    from normgrow.train.objective import fused_objective
    from normgrow.train.trainer import build_optimizer

    s, t = config["student"], config["train"]
    training = Training.from_config(t)
    rows, (positions, labels) = full_batch(shape.rows, shape.tokens, teacher_config.vocab_size)
    normalizer = len(labels) * shape.gpus  # the global batch's loss positions: every rank's rows alike
    largest = PeakMemory()
    start = time.time()
    with fake_world(shape.gpus) as (ranks, mesh), FakeTensorMode(allow_non_fake_inputs=True):
        teacher = fake_teacher(teacher_config, config["teacher"]["dtype"], s["attn_implementation"])
        group = []
        for _ in range(students):
            student = BlockStackStudent.from_teacher(teacher, "pre", s["blocks"], s["layers_per_block"], 0,
                                                     s["attn_implementation"])
            student.activation_checkpointing = t["activation_checkpointing"]
            student.set_trainable(list(range(s["blocks"])))
            student.train()
            shard_student(student, ranks, training.precision, mesh)
            group.append((student, build_optimizer(student, training)))
        objective = Objective(**config["objective"])
        tracker = GroupMemTracker([student for student, _ in group], [optimizer for _, optimizer in group])

        def update(tracked: bool) -> list[dict[str, float]]:
            """One update of the group, as `Trainer.train_step` makes it; `tracked`: each student's forward
            and backward (the first's with the teacher forward) under the tracker, and their peaks."""
            peaks, shared = [], None
            for student, optimizer in group:
                with tracker if tracked else nullcontext(), largest if tracked else nullcontext():
                    if shared is None and shares_teacher_forward(students):
                        shared = teacher_hidden_states(teacher, rows, positions)
                    teacher_hidden = teacher_hidden_states(teacher, rows, positions) if shared is None else shared
                    hidden = at_positions(student(rows.input_ids, rows.attention_mask), positions)
                    terms = fused_objective(objective, hidden, student.lm_head.weight, teacher_hidden,
                                            teacher.get_output_embeddings().weight, labels, chunk=t["loss_chunk"],
                                            normalizer=normalizer)
                    del hidden, teacher_hidden
                    (terms["total"] * ranks.world).backward()
                if tracked:
                    peaks.append(snapshot(tracker))
                # outside the tracker (see the module docstring)
                torch.nn.utils.clip_grad_norm_(student.parameters(), training.grad_clip)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            return peaks

        update(tracked=False)  # update 1: FSDP's lazy initialisation and AdamW's state
        peaks = update(tracked=True)  # update 2: with every student's optimizer state in memory
        teacher_gib = module_gib(teacher)
    return {"peak_gib": max(peaks, key=lambda peak: peak["Total"]), "teacher_gib": teacher_gib,
            "largest_tensor": largest.largest, "students": students, "seconds": time.time() - start}


def trace_one_gpu(config: dict, teacher_config, rows: int) -> dict:
    """Peak memory of the teacher check's forward (`rows` documents of max_length tokens) and of the
    diagnostics' forward (diag_docs × diag_max_length, the fp32 student), each on one device."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from normgrow.model.student import BlockStackStudent
    from normgrow.train.diagnostics import block_states, next_token_ce
    from normgrow.train.evaluate import causal_lm_ce_sum

    s, d = config["student"], config["data"]
    check_batch, check_targets = full_batch(rows, d["max_length"], teacher_config.vocab_size)
    diag_batch, diag_targets = full_batch(d["diag_docs"], d["diag_max_length"] or d["max_length"],
                                          teacher_config.vocab_size)
    with FakeTensorMode(allow_non_fake_inputs=True):
        teacher = fake_teacher(teacher_config, config["teacher"]["dtype"], s["attn_implementation"])
        with PeakMemory() as check, torch.inference_mode():
            causal_lm_ce_sum(teacher, check_batch, check_targets, config["train"]["loss_chunk"])
        student = BlockStackStudent.from_teacher(teacher, "pre", s["blocks"], s["layers_per_block"], 0,
                                                 s["attn_implementation"])
        with PeakMemory() as diagnostics, torch.inference_mode():
            student.eval()
            streams = block_states(student, diag_batch)
            next_token_ce(student, diag_batch, 0, diag_targets, config["train"]["loss_chunk"])
            del streams  # held through the block-removal CE, as `diagnose` holds them
        return {"teacher check": {"weights": module_gib(teacher), "working set": check.peak / GiB,
                                  "largest tensor": check.largest},
                "diagnostics": {"weights": module_gib(student), "working set": diagnostics.peak / GiB,
                                "largest tensor": diagnostics.largest}}


def module_gib(module: torch.nn.Module) -> float:
    return sum(t.numel() * t.element_size() for t in [*module.parameters(), *module.buffers()]) / GiB


class Untraceable(ValueError):
    """A config whose step fake tensors cannot run."""


def trace(config: dict, teacher_config, gpus: int, gpu_gb: float, rows: int | None = None,
          search: bool = True, students: int | None = None, search_students: bool = False) -> dict:
    """The training trace of a job of `students` phases (default: `resources.train.group_size`) at
    `rows` documents per rank (default: the config's batch_size / gpus), the one-GPU traces, the plan
    beside them, and (with `search`) the largest per-rank batch whose traced peak fits in 90% of
    `gpu_gb` GB (the plan's margin: the CUDA context, NCCL's buffers and allocator fragmentation are
    not traced); with `search_students`, the largest group that fits at `rows`."""
    from normgrow.cluster.plan import plan

    if config["student"]["attn_implementation"] in VARLEN_ATTENTION:
        raise Untraceable(f"student.attn_implementation {config['student']['attn_implementation']!r} cannot be traced "
                         "on fake tensors (its block mask is built from the data they do not hold): trace the config "
                         "with sdpa, whose worst-case rows (every document max_length long) take the same memory "
                         "but for sdpa's attention mask")
    tokens = config["data"]["max_length"]
    rows = rows or max(1, config["train"]["batch_size"] // gpus)
    students = students or config["resources"]["train"]["group_size"]
    budget = 0.9 * gpu_gb * 1e9 / GiB

    def training_gib(r: int, n: int = students) -> float:
        result = trace_training(config, teacher_config, Shape(gpus, r, tokens), n)
        return result["peak_gib"]["Total"] + result["teacher_gib"]

    start = time.time()
    training = trace_training(config, teacher_config, Shape(gpus, rows, tokens), students)
    total = training["peak_gib"]["Total"] + training["teacher_gib"]
    one_gpu = trace_one_gpu(config, teacher_config, rows)
    result = {"gpus": gpus, "gpu_gb": gpu_gb, "rows": rows, "tokens": tokens, "students": students,
              "training": training, "training_total_gib": total, "one_gpu": one_gpu,
              "plan_gb": plan({**config, "train": {**config["train"], "batch_size": rows * gpus}}, teacher_config,
                              gpus, gpu_gb, students=students)["total_gb"],
              "fits": total <= budget and all(j["weights"] + j["working set"] <= budget for j in one_gpu.values())}
    if search:
        result["largest_rows"] = largest_fitting(training_gib, budget, rows, total)
    if search_students:
        result["largest_group"] = largest_fitting(lambda n: training_gib(rows, n), budget, students, total)
    result["seconds"] = time.time() - start
    return result


def largest_fitting(peak_gib, budget_gib: float, start: int, peak_at_start: float) -> int:
    """The largest count n (documents per rank, or students) with peak_gib(n) ≤ budget_gib (0 if even
    1 does not fit): doubling from `start`, then bisection; the peak grows with n."""
    low, high = (start, None) if peak_at_start <= budget_gib else (0, start)
    while high is None:
        if peak_gib(2 * low) <= budget_gib:
            low *= 2
        else:
            high = 2 * low
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if peak_gib(mid) <= budget_gib else (low, mid)
    return low


def format_trace(t: dict) -> str:
    training, gib = t["training"], t["training_total_gib"]
    group = ("one phase" if t["students"] == 1 else
             f"a group of {t['students']} students on one teacher forward per batch")
    lines = [f"training step traced on fake {t['gpus']} × {t['gpu_gb']:g} GB, {t['rows']} documents × "
             f"{t['tokens']:,} tokens per rank, {group}; peak of rank 0 by category (GiB):"]
    lines += [f"  {name:28} {value:8.2f}" for name, value in training["peak_gib"].items()
              if name != "Total" and value >= 0.005]
    lines += [f"  {'teacher weights (replicated)':28} {training['teacher_gib']:8.2f}",
              f"  {'total':28} {gib:8.2f} GiB = {gib * GiB / 1e9:.1f} GB   (plan: {t['plan_gb']:.1f} GB, "
              f"{(gib * GiB / 1e9) / t['plan_gb'] - 1:+.0%})",
              f"  largest tensor: {training['largest_tensor']['gib']:.2f} GiB {training['largest_tensor']['shape']} "
              f"({training['largest_tensor']['op']})"]
    for name, job in t["one_gpu"].items():
        largest = job["largest tensor"]
        lines.append(f"{name} (one GPU): weights {job['weights']:.2f} GiB + working set {job['working set']:.2f} GiB "
                     f"= {job['weights'] + job['working set']:.2f} GiB; largest tensor {largest['gib']:.2f} GiB "
                     f"{largest['shape']}")
    fit = "fits" if t["fits"] else "does NOT fit"
    lines.append(f"→ {fit} in 90% of {t['gpu_gb']:g} GB ({0.9 * t['gpu_gb']:.0f} GB)")
    if "largest_rows" in t:
        lines.append(f"largest per-rank batch that fits: {t['largest_rows']} documents × {t['tokens']:,} tokens "
                     f"(train.batch_size ≤ {t['largest_rows'] * t['gpus']} on {t['gpus']} GPUs)")
    if "largest_group" in t:
        lines.append(f"largest group that fits: {t['largest_group']} students at {t['rows']} documents per rank "
                     f"(resources.train.group_size ≤ {t['largest_group']})")
    lines.append(f"traced in {t['seconds']:.0f} s")
    return "\n".join(lines)
