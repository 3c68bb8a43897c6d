"""The paper DAG's compute counted from document lengths, four ways: full rows, padded micro-batches,
packed rows (`train.padding_free`) and padding-free (each document's own tokens and attention).

    python benchmarks/paper_cost.py [--sigma 1.0] [--group-size 64] [--mfu 0.4] [--samples 200000]
                                    [--run DIR [--configfile FILE ...]] [--write DOC]

The protocol (paper App. C; normgrow.train.data) tokenizes every document alone (at most
`data.max_length` = 8,192 tokens), and every rank pads its micro-batch of `batch_size / ranks`
documents (8 at the paper's shape) to the longest of them. What the matmuls and attention of the
teacher's forward and the student's forward and backward see, per document:

- **full rows**: every document a full 8,192-token row — the upper bound docs/performance.md priced
  the DAG with before (benchmarks/grouping.py);
- **padded**: the longest document of its micro-batch (attention over the padded rows);
- **packed rows**: what `train.padding_free` runs (normgrow.train.data.Batch.packed): the
  micro-batch's documents laid end to end, first fit, in rows as wide as its longest document, with
  a dense document-causal mask (sdpa): its share of the rows' positions and of their attention;
- **padding-free**: its own tokens, with attention inside the document only — the ideal, which a
  varlen attention kernel would reach.

FLOPs follow benchmarks/distill_step.py's formula (2 per matmul parameter per token, causal
attention 4·A·L·n(n+1)/2 per row of n tokens; the student's forward and backward 3× its forward),
over every phase of config.yaml + configs/paper.yaml: each update's 64 documents and each
evaluation's validation documents; the teacher's forward once per phase alone and once per batch
stream grouped (`--group-size`, normgrow.spec.curriculum.stream_key). GPU-hours assume an MFU (`--mfu`)
of the H100's dense bf16 peak: the ratios between the three ways are the measurement, not the hours.

**The length distribution.** The paper states the mean, not the distribution: its Table A2 gives
3.11B tokens for a phase of 50,000 updates of 64 documents, 972 tokens per document. Planning draws
lengths from a log-normal capped at 8,192 (a longer document is truncated there) whose capped mean
is those 972 tokens; its spread (`--sigma`, the standard deviation of log length) is not in the
paper and is an assumption: 1.0 by default, and the benchmark also prints 0.75 and 1.25 to show how
much the padded cost depends on it (the padding-free cost does not: it is the mean). With `--run
DIR` it also counts the same three ways on a finished run's own training documents
(`DIR/results/data/tokens/train`, their logged lengths) at that run's micro-batch (config.yaml and
any `--configfile`).

With `--write DOC` the results go into DOC's block marked with this command (benchmarks/docs_block.py).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import docs_block
import numpy as np
from grouping import H100_BF16_TFLOPS

REPO = Path(__file__).resolve().parents[1]
PAPER_TOKENS_PER_DOCUMENT = 3.11e9 / (50_000 * 64)  # Table A2 (joint-50k): tokens per phase / documents per phase
WAYS = ("full rows", "padded", "packed rows", "padding-free")


@dataclass(frozen=True)
class PerDocument:
    """What one document costs on average under one way of batching: tokens through the matmuls and
    the causal-attention term Σ n(n+1)/2 over the rows it is part of (both per document)."""
    tokens: float
    attention: float


def per_document(lengths: np.ndarray, micro_batch: int, max_length: int) -> dict[str, PerDocument]:
    """The ways for documents of `lengths`, read in order in micro-batches of `micro_batch`."""
    from normgrow.train.data import first_fit

    usable = len(lengths) - len(lengths) % micro_batch
    rows = lengths[:usable].astype(np.float64).reshape(-1, micro_batch)
    longest = rows.max(axis=1)
    packed = np.array([len(first_fit(batch.astype(int).tolist(), int(width)))  # rows of each packed micro-batch
                       for batch, width in zip(rows, longest, strict=True)])
    return {
        "full rows": PerDocument(float(max_length), max_length * (max_length + 1) / 2),
        "padded": PerDocument(float(longest.mean()), float((longest * (longest + 1) / 2).mean())),
        "packed rows": PerDocument(float((packed * longest).mean() / micro_batch),
                                   float((packed * longest * (longest + 1) / 2).mean() / micro_batch)),
        "padding-free": PerDocument(float(rows.mean()), float((rows * (rows + 1) / 2).mean())),
    }


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


def planned_lengths(sigma: float, samples: int, cap: int, seed: int = 0) -> np.ndarray:
    """Document lengths for planning: the capped log-normal with the paper's mean (module docstring)."""
    mu = capped_lognormal_mu(PAPER_TOKENS_PER_DOCUMENT, sigma, cap)
    lengths = np.random.default_rng(seed).lognormal(mu, sigma, samples)
    return np.clip(np.rint(lengths), 1, cap)


def paper_config() -> dict:
    import yaml

    from normgrow.spec.config import merge, validate_config

    config: dict = {}
    for name in ("config.yaml", "configs/paper.yaml"):
        merge(config, yaml.safe_load((REPO / name).read_text()))
    return validate_config(config)


def dag_flops(config: dict, teacher_config, ways: dict[str, PerDocument], group_size: int) -> dict[str, dict]:
    """Training + evaluation FLOPs of the config's DAG under each way, alone and grouped."""
    import torch
    from distill_step import matmul_params
    from transformers import AutoModelForCausalLM

    from normgrow.spec.curriculum import PhaseTable

    with torch.device("meta"):
        teacher = AutoModelForCausalLM.from_config(teacher_config)
    layer, head = matmul_params(teacher.model.layers[0]), matmul_params(teacher.get_output_embeddings())
    width = teacher_config.num_attention_heads * teacher_config.head_dim
    table = PhaseTable.from_config(config)
    train = config["train"]
    documents, student_layers = {}, {}
    for key, spec in table.specs.items():
        steps = spec.phase.steps
        evaluations = len(set(range(train["eval_every"], steps + 1, train["eval_every"])) | {steps})
        documents[key] = steps * train["batch_size"] + evaluations * config["data"]["valid_docs"]
        student_layers[key] = spec.phase.active_blocks * config["student"]["layers_per_block"] if steps else 0
    grouped_keys = {key for group in table.groups(group_size) for key in group.keys}
    streams = [group.keys[0] for group in table.groups(group_size)] + [k for k in table.specs if k not in grouped_keys]

    def forward(layers: int, cost: PerDocument) -> float:  # one document's forward through `layers` layers + head
        return 2 * (layers * layer + head) * cost.tokens + 4 * width * layers * cost.attention

    out = {}
    for way, cost in ways.items():
        student = sum(documents[k] * 3 * forward(student_layers[k], cost) for k in table.specs if student_layers[k])
        teacher_pass = forward(teacher_config.num_hidden_layers, cost)
        out[way] = {"alone": student + teacher_pass * sum(documents.values()),
                    "grouped": student + teacher_pass * sum(documents[k] for k in streams),
                    "tokens_per_document": cost.tokens}
    return out


def run_lengths(run: Path) -> np.ndarray:
    import datasets

    path = run / "results" / "data" / "tokens" / "train"
    if not path.is_dir():
        raise SystemExit(f"paper_cost: {path} does not exist: --run takes a finished run's directory")
    return np.asarray(datasets.load_from_disk(str(path))["length"])


def markdown(config: dict, micro_batch: int, sigma: float, flops: dict, spread: dict, run: tuple | None,
             mfu: float, group_size: int) -> list[str]:
    hours = 1 / (H100_BF16_TFLOPS * 1e12 * mfu) / 3600
    full = flops["full rows"]["alone"]
    lines = [f"The paper DAG (config.yaml + configs/paper.yaml, Qwen3-8B-Base; micro-batch {micro_batch} documents "
             f"per rank, ≤ {config['data']['max_length']:,} tokens), lengths from the capped log-normal with the "
             f"paper's mean {PAPER_TOKENS_PER_DOCUMENT:.0f} tokens per document (Table A2) and σ = {sigma:g} "
             "(assumed):", "",
             "| | tokens per document | EFLOP alone | EFLOP grouped | × full rows | GPU-hours alone → grouped |",
             "|---|---:|---:|---:|---:|---:|"]
    for way in WAYS:
        f = flops[way]
        lines.append(f"| {way} | {f['tokens_per_document']:,.0f} | {f['alone'] / 1e18:,.0f} "
                     f"| {f['grouped'] / 1e18:,.0f} | {f['alone'] / full:.3f} "
                     f"| {f['alone'] * hours:,.0f} → {f['grouped'] * hours:,.0f} |")
    lines += ["", f"GPU-hours at MFU {mfu:.0%} of an H100's {H100_BF16_TFLOPS} TFLOP/s (an assumption); grouped: "
              f"groups of ≤ {group_size} students on one teacher forward.", "",
              "How the padded cost depends on the assumed spread (padding-free: the mean, whatever σ):", "",
              "| σ of log length | padded tokens per document | padded / padding-free EFLOP (alone) |",
              "|---:|---:|---:|"]
    for s, (tokens, ratio) in spread.items():
        lines.append(f"| {s:g} | {tokens:,.0f} | {ratio:.2f}× |")
    if run:
        where, run_micro_batch, max_length, ways = run
        free = ways["padding-free"]
        lines += ["", f"A run's own training documents (`{where}`, micro-batch {run_micro_batch}, ≤ {max_length} "
                  "tokens), per document:", "",
                  "| | tokens | × padding-free | attention term × padding-free |", "|---|---:|---:|---:|"]
        for way in WAYS:
            lines.append(f"| {way} | {ways[way].tokens:,.1f} | {ways[way].tokens / free.tokens:.2f}× "
                         f"| {ways[way].attention / free.attention:.2f}× |")
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sigma", type=float, default=1.0, help="spread of log document length (assumed)")
    parser.add_argument("--group-size", type=int, default=64)
    parser.add_argument("--mfu", type=float, default=0.4)
    parser.add_argument("--samples", type=int, default=200_000, help="documents drawn for planning")
    parser.add_argument("--run", type=Path, help="a finished run's directory: count its training documents too")
    parser.add_argument("--configfile", nargs="*", default=[], help="the run's config files over config.yaml")
    docs_block.add_write_option(parser)
    args = parser.parse_args(argv)
    command = docs_block.checked_command(parser, args, __file__, argv)
    sys.path.insert(0, str(REPO / "src"))
    from transformers import AutoConfig

    from normgrow.spec.config import merge, rank_batch_size, validate_config

    config = paper_config()
    teacher_config = AutoConfig.from_pretrained(REPO / "configs" / "teachers" / "qwen3-8b-base")
    micro_batch, cap = rank_batch_size(config), config["data"]["max_length"]
    flops = dag_flops(config, teacher_config, per_document(planned_lengths(args.sigma, args.samples, cap),
                                                           micro_batch, cap), args.group_size)
    spread = {}
    for sigma in sorted({0.75, args.sigma, 1.25}):
        ways = per_document(planned_lengths(sigma, args.samples, cap), micro_batch, cap)
        cost = dag_flops(config, teacher_config, ways, args.group_size)
        spread[sigma] = (ways["padded"].tokens, cost["padded"]["alone"] / cost["padding-free"]["alone"])
    run = None
    if args.run:
        import yaml

        run_config: dict = {}
        for name in [REPO / "config.yaml", *args.configfile]:
            merge(run_config, yaml.safe_load(Path(name).read_text()))
        run_config = validate_config(run_config)
        run_micro_batch = rank_batch_size(run_config)
        run = (args.run, run_micro_batch, run_config["data"]["max_length"],
               per_document(run_lengths(args.run), run_micro_batch, run_config["data"]["max_length"]))
    lines = markdown(config, micro_batch, args.sigma, flops, spread, run, args.mfu, args.group_size)
    print("\n".join(lines))
    if command:
        lead = f"`{command}` on {docs_block.conditions(libraries=('torch', 'transformers', 'numpy'))}:"
        docs_block.write(args.write, command, "\n".join([lead, "", *lines]))


if __name__ == "__main__":
    main(sys.argv[1:])
