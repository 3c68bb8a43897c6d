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
- **padding-free**: its own tokens, with attention inside the document only — what
  `student.attn_implementation: flex_attention` with `train.padding_free` runs (a micro-batch in one
  row, a document mask).

The counting is normgrow.cluster.budget's, which the plan command's budget also prints.

FLOPs follow benchmarks/distill_step.py's formula (2 per matmul parameter per token, causal
attention 4·A·L·n(n+1)/2 per row of n tokens; the student's forward and backward 3× its forward),
over every phase of config.yaml + configs/paper.yaml: each update's 64 documents and each
evaluation's validation documents; the teacher's forward once per phase alone and once per batch
stream grouped (`--group-size`, normgrow.design.curriculum.stream_key). GPU-hours assume an MFU (`--mfu`)
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

With `--write DOC` the results go into DOC's block marked with this command (tools/docs_block.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))  # the helpers the benchmarks share with the tools
import docs_block  # noqa: E402

sys.path.insert(0, str(REPO / "src"))
from normgrow.cluster.budget import (  # noqa: E402  (the counts: one module, the plan command's budget too)
    H100_BF16_TFLOPS,
    PAPER_TOKENS_PER_DOCUMENT,
    WAYS,
    PerDocument,
    per_document,
    phase_costs,
    planned_lengths,
    training_jobs,
)


def paper_config() -> dict:
    import yaml

    from normgrow.design.config import merge, validate_config

    config: dict = {}
    for name in ("config.yaml", "configs/paper.yaml"):
        merge(config, yaml.safe_load((REPO / name).read_text()))
    return validate_config(config)


def dag_flops(config: dict, teacher_config, ways: dict[str, PerDocument], group_size: int) -> dict[str, dict]:
    """Training + evaluation FLOPs of the config's DAG under each way, alone and grouped."""
    out = {}
    for way, cost in ways.items():
        costs = phase_costs(config, teacher_config, cost)
        out[way] = {label: sum(job.flops for job in training_jobs(config, costs, size))
                    for label, size in (("alone", 1), ("grouped", group_size))}
        out[way]["tokens_per_document"] = cost.tokens
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
    from transformers import AutoConfig

    from normgrow.design.config import merge, rank_batch_size, training_ranks, validate_config

    config = paper_config()
    teacher_config = AutoConfig.from_pretrained(REPO / "configs" / "teachers" / "qwen3-8b-base")
    micro_batch, cap = rank_batch_size(config), config["data"]["max_length"]
    batch_size, ranks = config["train"]["batch_size"], training_ranks(config)
    flops = dag_flops(config, teacher_config, per_document(planned_lengths(args.sigma, args.samples, cap),
                                                           batch_size, ranks, cap), args.group_size)
    spread = {}
    for sigma in sorted({0.75, args.sigma, 1.25}):
        ways = per_document(planned_lengths(sigma, args.samples, cap), batch_size, ranks, cap)
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
               per_document(run_lengths(args.run), run_config["train"]["batch_size"], training_ranks(run_config),
                            run_config["data"]["max_length"]))
    lines = markdown(config, micro_batch, args.sigma, flops, spread, run, args.mfu, args.group_size)
    print("\n".join(lines))
    if command:
        lead = f"`{command}` on {docs_block.conditions(libraries=('torch', 'transformers', 'numpy'))}:"
        docs_block.write(args.write, command, "\n".join([lead, "", *lines]))


if __name__ == "__main__":
    main(sys.argv[1:])
