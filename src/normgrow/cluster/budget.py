"""The budget of a configuration's training: GPU-hours, wall time on a number of nodes, and disk.

**Compute.** FLOPs as benchmarks/distill_step.py counts them: 2 per matmul parameter per token,
causal attention 4·A·L·n(n+1)/2 per row of n tokens (A = heads × head dim, L layers); a student's
forward and backward 3× its forward; the teacher's forward once per phase alone, once per batch
stream in a group (`resources.train.group_size`, normgrow.design.curriculum.PhaseTable.groups). Every
phase counts its updates' documents and its evaluations' validation documents.

**Batch packings.** What a document costs depends on how its micro-batch (a rank's `batch_size / ranks`
documents, each tokenized alone) is packed (`per_document`, which lays each rank's rows out with the
trainer's own functions, so that the plan prices what the trainer runs):
- padded: every document padded to its micro-batch's longest (`train.padding_free: false`);
- packed rows: laid end to end, first fit, in rows as wide as the longest (normgrow.train.data.
  Batch.packed), with a dense document-causal mask: what `train.padding_free: true` runs on `sdpa`
  and `eager` attention, whose cost is each row's width squared;
- padding-free: each document's own tokens and attention, what a varlen kernel reaches (`flex_attention`,
  which lays a micro-batch in one row and skips the blocks its document mask removes).

**Lengths.** The paper states the mean length, not the distribution: its Table A2 gives 3.11B tokens
for a phase of 50,000 updates × 64 documents, 972 tokens per document. Planning draws lengths from a
log-normal capped at `data.max_length` whose capped mean is that mean (a longer document is cut at
the cap); its spread σ (standard deviation of log length) is an assumption, 1.0 by default. The
padding-free cost is the mean whatever σ; the padded cost grows with σ (benchmarks/paper_cost.py
prints how much).

**Time.** GPU-hours at an assumed MFU of a GPU's dense bf16 peak (an H100's by default). A phase
takes its FLOPs over its job's GPUs at that rate; the wall time on N nodes schedules the training
jobs (phases, or groups) as soon as the phases before them are done and nodes are free, longest
remaining chain first. With nodes to spare it is the critical path: the longest chain of phases that
run one after another (a three-phase run's phases). Data, teacher check and diagnostics jobs are not
counted.

**Disk.** Per distinct phase: its student (`student.safetensors`, fp32, unsharded) and its snapshots
for the diagnostics (the last one is a hard link to the student); while a phase trains, its newest two
resume states (normgrow.train.resume.ResumeStore), removed when it ends.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from normgrow.cluster.plan import student_parameters
from normgrow.design.config import VARLEN_ATTENTION, training_ranks
from normgrow.design.curriculum import PhaseTable, snapshot_steps

PAPER_TOKENS_PER_DOCUMENT = 3.11e9 / (50_000 * 64)  # Table A2 (joint-50k): tokens per phase / documents per phase
H100_BF16_TFLOPS = 989.4  # dense bf16 peak of an H100 SXM (an H200's is the same)
WAYS = ("full rows", "padded", "packed rows", "padding-free")
RESUME_STATES_KEPT = 2  # normgrow.train.resume.ResumeStore's default `keep`


@dataclass(frozen=True)
class PerDocument:
    """What one document costs on average under one batch packing: tokens through the matmuls and the
    causal-attention term Σ n(n+1)/2 over the rows it is part of (both per document)."""
    tokens: float
    attention: float


def per_document(lengths: np.ndarray, batch_size: int, world: int, max_length: int) -> dict[str, PerDocument]:
    """The packings (`WAYS`) for documents of `lengths`, read in order in batches of `batch_size` over
    `world` ranks, each rank's rows laid out by the trainer's own functions: its share of the batch
    (normgrow.train.distributed.Ranks.share; its rows as wide as its own longest document, Ranks.rows)
    and the packing of its documents (normgrow.train.data.packing, what Batch.packed lays out)."""
    import torch

    from normgrow.train.data import packing
    from normgrow.train.distributed import Ranks

    shares = [Ranks(rank, world, torch.device("cpu")).share(batch_size) for rank in range(world)]
    usable = len(lengths) - len(lengths) % batch_size
    tokens = dict.fromkeys(WAYS[1:], 0.0)
    attention = dict.fromkeys(WAYS[1:], 0.0)
    for batch in lengths[:usable].astype(np.int64).reshape(-1, batch_size):
        for share in shares:
            documents = batch[share].tolist()
            if not documents:
                continue
            longest, rows = max(documents), len(packing(documents)[1])
            pairs = longest * (longest + 1) / 2  # causal attention over one row of the rank's width
            tokens["padded"] += len(documents) * longest
            attention["padded"] += len(documents) * pairs
            tokens["packed rows"] += rows * longest
            attention["packed rows"] += rows * pairs
            tokens["padding-free"] += packing(documents, one_row=True)[0]
            attention["padding-free"] += sum(n * (n + 1) / 2 for n in documents)  # a document mask: its own
    return {"full rows": PerDocument(float(max_length), max_length * (max_length + 1) / 2),
            **{way: PerDocument(tokens[way] / usable, attention[way] / usable) for way in WAYS[1:]}}


def capped_lognormal_mu(mean: float, sigma: float, cap: float) -> float:
    """μ of the log-normal(μ, σ) whose mean after capping at `cap` is `mean` (bisection on the closed
    form E[min(X, c)] = e^(μ+σ²/2)·Φ((ln c − μ − σ²)/σ) + c·(1 − Φ((ln c − μ)/σ)))."""
    from scipy.stats import norm

    def capped_mean(mu: float) -> float:
        return (np.exp(mu + sigma ** 2 / 2) * norm.cdf((np.log(cap) - mu - sigma ** 2) / sigma)
                + cap * norm.sf((np.log(cap) - mu) / sigma))

    low, high = -10.0, np.log(cap)
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if capped_mean(middle) < mean else (low, middle)
    return (low + high) / 2


def planned_lengths(sigma: float, samples: int, cap: int, seed: int = 0,
                    mean: float = PAPER_TOKENS_PER_DOCUMENT) -> np.ndarray:
    """Document lengths for planning: the capped log-normal of `mean` (module docstring); every document
    at the cap when `mean` is not below it."""
    if mean >= cap:
        return np.full(samples, float(cap))
    lengths = np.random.default_rng(seed).lognormal(capped_lognormal_mu(mean, sigma, cap), sigma, samples)
    return np.clip(np.rint(lengths), 1, cap)


def matmul_parameters(c) -> tuple[int, int]:
    """(one decoder layer's, the LM head's) matmul weights of the teacher's family: q/k/v/o projections and
    the SwiGLU MLP; norms and biases do no matmul. The student's layers are the teacher's."""
    h = c.hidden_size
    hd = getattr(c, "head_dim", None) or h // c.num_attention_heads
    q, kv = c.num_attention_heads * hd, c.num_key_value_heads * hd
    return 2 * h * q + 2 * h * kv + 3 * h * c.intermediate_size, c.vocab_size * h


@dataclass(frozen=True)
class PhaseCost:
    """One phase's FLOPs under one packing: its student's forward and backward, and the teacher's forward
    over the same documents (paid once per phase alone, once per group grouped)."""
    student: float
    teacher: float


def phase_costs(config: dict, teacher_config, cost: PerDocument) -> dict[str, PhaseCost]:
    """Every distinct phase's FLOPs (by key) when each document costs `cost`."""
    layer, head = matmul_parameters(teacher_config)
    width = teacher_config.num_attention_heads * (getattr(teacher_config, "head_dim", None)
                                                  or teacher_config.hidden_size // teacher_config.num_attention_heads)

    def forward(layers: int) -> float:  # one document through `layers` layers and the head
        return 2 * (layers * layer + head) * cost.tokens + 4 * width * layers * cost.attention

    train = config["train"]
    out = {}
    for key, spec in PhaseTable.from_config(config).specs.items():
        steps = spec.phase.steps
        evaluations = len(set(range(train["eval_every"], steps + 1, train["eval_every"])) | {steps})
        documents = steps * train["batch_size"] + evaluations * config["data"]["valid_docs"]
        layers = spec.phase.active_blocks * config["student"]["layers_per_block"]
        out[key] = PhaseCost(documents * 3 * forward(layers), documents * forward(teacher_config.num_hidden_layers))
    return out


@dataclass(frozen=True)
class Job:
    """One training job: its phases (`keys`, one unless a group), FLOPs, and the jobs it waits for."""
    keys: tuple[str, ...]
    flops: float
    after: frozenset[int]


def training_jobs(config: dict, costs: dict[str, PhaseCost], group_size: int) -> list[Job]:
    """The config's training jobs (PhaseTable.groups): a group of up to `group_size` phases on one
    batch stream pays the teacher once. A job waits for the jobs of its phases' previous phases."""
    table = PhaseTable.from_config(config)
    units = [group.keys for group in table.groups(group_size)]
    job_of = {key: j for j, keys in enumerate(units) for key in keys}
    jobs = []
    for j, keys in enumerate(units):
        before = [table.specs[key].previous for key in keys]
        after = frozenset(job_of[p.key] for p in before if p is not None and job_of[p.key] != j)
        flops = sum(costs[key].student for key in keys) + costs[keys[0]].teacher
        jobs.append(Job(tuple(keys), flops, after))
    return jobs


def chains(jobs: list[Job], hours: list[float]) -> list[float]:
    """Each job's longest chain of hours to the end of the DAG, itself included."""
    followers: dict[int, list[int]] = {j: [] for j in range(len(jobs))}
    for j, job in enumerate(jobs):
        for b in job.after:
            followers[b].append(j)
    longest: dict[int, float] = {}

    def chain(j: int) -> float:
        if j not in longest:
            longest[j] = hours[j] + max((chain(f) for f in followers[j]), default=0.0)
        return longest[j]

    return [chain(j) for j in range(len(jobs))]


def wall_hours(jobs: list[Job], hours: list[float], slots: int) -> float:
    """Hours until the last job ends when `slots` jobs run at once: each job starts as soon as the jobs
    it waits for have ended and a slot is free, the longest remaining chain first."""
    priority = chains(jobs, hours)
    waiting = {j: set(job.after) for j, job in enumerate(jobs)}
    ready = [(-priority[j], j) for j, w in waiting.items() if not w]
    heapq.heapify(ready)
    running: list[tuple[float, int]] = []
    now = 0.0
    while ready or running:
        while ready and len(running) < slots:
            _, j = heapq.heappop(ready)
            heapq.heappush(running, (now + hours[j], j))
        now, done = heapq.heappop(running)
        for j, w in waiting.items():
            if done in w:
                w.discard(done)
                if not w:
                    heapq.heappush(ready, (-priority[j], j))
    return now


def critical_path(jobs: list[Job], hours: list[float]) -> list[int]:
    """The jobs of the longest chain, first to last."""
    priority = chains(jobs, hours)
    path = [max((j for j, job in enumerate(jobs) if not job.after), key=lambda j: priority[j])]
    while True:
        followers = [f for f, job in enumerate(jobs) if path[-1] in job.after]
        if not followers:
            return path
        path.append(max(followers, key=lambda f: priority[f]))


def chain_label(table: PhaseTable, keys: tuple[str, ...]) -> str:
    """`run seed S` of the first run that trains the job of `keys` (the last job of a chain)."""
    run, seed = next((run, seed) for (run, seed), run_keys in table.runs.items() if keys[0] in run_keys)
    return f"{run} seed {seed}"


def config_way(config: dict) -> str:
    """The packing the config's phases train with (module docstring)."""
    if not config["train"]["padding_free"]:
        return "padded"
    return "padding-free" if config["student"]["attn_implementation"] in VARLEN_ATTENTION else "packed rows"


def disk_gb(config: dict, teacher_config, table: PhaseTable, resume_state_gb: float) -> dict[str, float]:
    """The phases' files (module docstring), in GB."""
    s = config["student"]
    student = 4 * student_parameters(teacher_config, s["blocks"], s["layers_per_block"])["total"] / 1e9
    snapshots = sum(max(0, len(snapshot_steps(spec.phase.steps, table.snapshots[key])) - 1)
                    for key, spec in table.specs.items())
    return {"student": student, "students": student * len(table.specs), "snapshot files": snapshots,
            "snapshots": student * snapshots, "resume states per training job": RESUME_STATES_KEPT * resume_state_gb}


def budget(config: dict, teacher_config, resume_state_gb: float, nodes: list[int], mfu: float = 0.4,
           peak_tflops: float = H100_BF16_TFLOPS, sigma: float = 1.0, samples: int = 200_000,
           mean_tokens: float = PAPER_TOKENS_PER_DOCUMENT) -> dict:
    """The budget of a validated `config` (module docstring): GPU-hours of each packing, the wall time of
    the config's own packing on each number of `nodes`, its critical path, and disk (`resume_state_gb`:
    one phase's resume state, normgrow.cluster.plan)."""
    cap = config["data"]["max_length"]
    ways = per_document(planned_lengths(sigma, samples, cap, mean=mean_tokens), config["train"]["batch_size"],
                        training_ranks(config), cap)
    group_size = config["resources"]["train"]["group_size"]
    rate = peak_tflops * 1e12 * mfu * 3600  # FLOPs per GPU-hour
    table = PhaseTable.from_config(config)
    gpu_hours = {}
    for way in WAYS[1:]:
        jobs = training_jobs(config, phase_costs(config, teacher_config, ways[way]), group_size)
        gpu_hours[way] = sum(job.flops for job in jobs) / rate
    way = config_way(config)
    jobs = training_jobs(config, phase_costs(config, teacher_config, ways[way]), group_size)
    gpus = training_ranks(config) if config["resources"]["train"]["gpus"] else 1
    hours = [job.flops / rate / gpus for job in jobs]
    per_job = config["resources"]["train"]["nodes"]
    path = critical_path(jobs, hours)
    return {"way": way, "gpu_hours": gpu_hours, "tokens_per_document": {w: ways[w].tokens for w in WAYS[1:]},
            "mean_tokens": ways["padding-free"].tokens, "sigma": sigma, "mfu": mfu, "peak_tflops": peak_tflops,
            "group_size": group_size, "jobs": len(jobs), "phases": len(table.specs), "gpus_per_job": gpus,
            "nodes_per_job": per_job,
            "wall_hours": {n: wall_hours(jobs, hours, max(1, n // per_job)) for n in nodes},
            "critical_path": {"run": chain_label(table, jobs[path[-1]].keys), "hours": [hours[j] for j in path]},
            "disk_gb": disk_gb(config, teacher_config, table, resume_state_gb)}


def amount(x: float) -> str:
    """A count of hours or GB: whole numbers from 100 on, three significant digits below."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def format_budget(b: dict) -> str:
    """The budget as the plan command prints it."""
    assumed = (f"at MFU {b['mfu']:.0%} of {b['peak_tflops']:g} TFLOP/s per GPU (assumed); documents of "
               f"{b['mean_tokens']:,.0f} tokens on average, log-normal σ = {b['sigma']:g} (assumed)")
    lines = [f"budget of the {b['phases']} distinct phases in {b['jobs']} training jobs "
             f"(groups of ≤ {b['group_size']}), {assumed}:",
             "  GPU-hours by batch packing (tokens per document):"]
    for way, hours in b["gpu_hours"].items():
        mark = "  ← this config" if way == b["way"] else ""
        lines.append(f"    {way:14} {amount(hours):>10} GPU-hours  ({b['tokens_per_document'][way]:,.0f}){mark}")
    lines.append(f"  wall time of the training ({b['gpus_per_job']} GPU(s) on {b['nodes_per_job']} node(s) per job):")
    for nodes, hours in b["wall_hours"].items():
        lines.append(f"    on {nodes:3} node(s): {amount(hours):>8} h ({amount(hours / 24)} days)")
    path = b["critical_path"]
    lines.append(f"  critical path (the wall time with nodes to spare): {path['run']}'s {len(path['hours'])} jobs one "
                 f"after another, {' + '.join(amount(h) for h in path['hours'])} = {amount(sum(path['hours']))} h "
                 f"({amount(sum(path['hours']) / 24)} days)")
    d = b["disk_gb"]
    lines += [f"  disk: students {amount(d['students'])} GB ({b['phases']} × {amount(d['student'])} GB, fp32), "
              f"snapshots {amount(d['snapshots'])} GB ({d['snapshot files']} files), resume states "
              f"{amount(d['resume states per training job'])} GB per training job while it runs (two kept, removed "
              "when it ends)"]
    return "\n".join(lines)
