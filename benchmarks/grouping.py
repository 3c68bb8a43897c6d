"""One teacher forward per batch stream: the workflow's cost with phases trained alone and in groups
(`resources.train.group_size`, docs/performance.md), measured in one run of this benchmark.

    python benchmarks/grouping.py [--configfile FILE ...] [--group-size 64] [--cores 2] [--phases-only]

It runs the workflow twice from scratch, each in a fresh working directory on this checkout: every
phase alone (group size 1), then phases that read one batch stream in groups of at most
`--group-size`; it prints, for each, the wall time and the summed CPU time of every job (the
Snakemake benchmark files of logs/benchmarks, as tools/run_time.py reads them) and of the
training jobs alone, with the ratios grouped / alone; and checks that every phase's outputs
(weights, train.csv, eval.csv, state.json less its wall time) and, for `results/paper`, every table
are byte-identical between the two. `--phases-only` stops at the trained phases (no diagnostics,
report or tables: `--omit-from diagnose run_index`).

It also prints the paper DAG's training FLOPs and GPU-hours on the paper's shape (config.yaml +
configs/paper.yaml, Qwen3-8B-Base) alone and grouped, from distill_step.py's FLOP formula split
into its teacher and student terms: every phase's training and evaluation tokens (full-length rows,
an upper bound), the teacher's forward once per phase alone and once per group grouped, each
student's forward and backward always. GPU-hours assume an MFU (`--mfu`, default 0.4) of the H100's
dense bf16 peak: only the ratio is a measurement of the DAG.

`--alone DIR` takes a finished alone run's directory (phases alone, the
same configuration) instead of running it; its wall time is the one its Snakemake log reports.

With `--write DOC` the results go into DOC's block marked with this command (tools/docs_block.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))  # the helpers the benchmarks share with the tools
import docs_block  # noqa: E402
import run_time  # noqa: E402

sys.path.insert(0, str(REPO / "src"))
from normgrow.cluster.budget import H100_BF16_TFLOPS  # noqa: E402


def run_workflow(workdir: Path, configfiles: list[str], group_size: int, cores: int, phases_only: bool) -> dict:
    """The workflow in `workdir` with `group_size`: wall seconds, CPU seconds of every job and of the
    training jobs (phases and groups)."""
    command = [str(Path(sys.executable).parent / "snakemake"), "-s", str(REPO / "Snakefile"), "--directory",
               str(workdir), "--cores", str(cores), "--configfile", *[str(REPO / f) for f in configfiles],
               "--config", f"resources={json.dumps({'train': {'group_size': group_size}})}"]
    if phases_only:
        command += ["--omit-from", "diagnose", "run_index"]
    start = time.perf_counter()
    done = subprocess.run([*command, "--", "results/paper"], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"the workflow failed in {workdir}:\n{done.stderr[-4000:]}")
    return measured(workdir, wall)


def measured(workdir: Path, wall: float) -> dict:
    """A finished run's wall seconds (given), CPU seconds of every job and of the training jobs."""
    rules = run_time.rule_times(workdir)
    training = rules[rules["rule directory"].isin(["phases", "groups"])]
    return {"wall": wall, "cpu": rules["CPU s"].sum(), "train_cpu": training["CPU s"].sum(),
            "train_jobs": int(training["jobs"].sum())}


def snakemake_seconds(workdir: Path) -> float:
    """The wall time Snakemake reported for a finished run ('Elapsed time: H:MM:SS.ffffff')."""
    hours, minutes, seconds = run_time.elapsed(workdir).split(":")
    return 3600 * int(hours) + 60 * int(minutes) + float(seconds)


def digests(workdir: Path, phases_only: bool) -> dict[str, str]:
    """SHA-256 of every phase output (state.json less its wall time) and, unless `phases_only`, every table."""
    out = {}
    for path in sorted((workdir / "results" / "phases").rglob("*")):
        if path.is_file() and "resume" not in path.parts:
            data = path.read_bytes()
            if path.name == "state.json":
                state = json.loads(data)
                state.pop("wall_seconds")
                data = json.dumps(state, sort_keys=True).encode()
            out[str(path.relative_to(workdir))] = hashlib.sha256(data).hexdigest()
    if not phases_only:
        for path in sorted((workdir / "results" / "paper" / "tables").iterdir()):
            out[str(path.relative_to(workdir))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def paper_flops(group_size: int) -> dict:
    """Training and evaluation FLOPs of the paper DAG's phases, alone and in groups of at most
    `group_size` (see the module docstring)."""
    import torch
    import yaml
    from distill_step import attention_flops, matmul_params
    from transformers import AutoConfig, AutoModelForCausalLM

    from normgrow.design.config import merge, validate_config
    from normgrow.design.curriculum import PhaseTable

    config: dict = {}
    for name in ("config.yaml", "configs/paper.yaml"):
        merge(config, yaml.safe_load((REPO / name).read_text()))
    config = validate_config(config)
    teacher_config = AutoConfig.from_pretrained(REPO / "configs" / "teachers" / "qwen3-8b-base")
    with torch.device("meta"):
        teacher = AutoModelForCausalLM.from_config(teacher_config)
    layer, head = matmul_params(teacher.model.layers[0]), matmul_params(teacher.get_output_embeddings())
    n = config["data"]["max_length"]
    width = teacher_config.num_attention_heads * teacher_config.head_dim

    def forward_per_token(layers: int) -> float:
        return 2 * (layers * layer + head) + attention_flops(width, layers, [n]) / n

    table = PhaseTable.from_config(config)
    train, valid_tokens = config["train"], config["data"]["valid_docs"] * n
    teacher_tokens, student_flops = {}, 0.0
    for key, spec in table.specs.items():
        phase = spec.phase
        evaluations = len(set(range(train["eval_every"], phase.steps + 1, train["eval_every"])) | {phase.steps})
        tokens = phase.steps * train["batch_size"] * n + evaluations * valid_tokens
        teacher_tokens[key] = tokens
        layers = phase.active_blocks * config["student"]["layers_per_block"]
        student_flops += tokens * (3 * forward_per_token(layers) if phase.steps else 0)
    teacher_per_token = forward_per_token(teacher_config.num_hidden_layers)
    alone = student_flops + teacher_per_token * sum(teacher_tokens.values())
    streams = [group.keys[0] for group in table.groups(group_size)]
    grouped = student_flops + teacher_per_token * sum(teacher_tokens[k] for k in streams)
    return {"phases": len(table.specs), "teacher_passes_alone": len(table.specs),
            "teacher_passes_grouped": len(streams), "alone": alone, "grouped": grouped}


def gpu_hours(flops: float, mfu: float) -> float:
    return flops / (H100_BF16_TFLOPS * 1e12 * mfu) / 3600


def markdown(configfiles: list[str], group_size: int, runs: dict, same: bool, differing: list[str], flops: dict,
             mfu: float) -> list[str]:
    alone, grouped = runs[1], runs[group_size]
    lines = [f"Workflow `{' + '.join(configfiles)}`, `--cores {runs['cores']}`"
             f"{', phases only' if runs['phases_only'] else ''}: every phase alone vs groups of ≤ {group_size}",
             "", "| | alone | grouped | grouped / alone |", "|---|---:|---:|---:|",
             f"| training jobs | {alone['train_jobs']} | {grouped['train_jobs']} | |"]
    for key, name in (("wall", "wall time (s)"), ("cpu", "CPU time, all jobs (s)"),
                      ("train_cpu", "CPU time, training jobs (s)")):
        lines.append(f"| {name} | {alone[key]:.0f} | {grouped[key]:.0f} | {grouped[key] / alone[key]:.2f}× |")
    verdict = "byte-identical" if same else f"DIFFERENT ({len(differing)} files, e.g. {differing[:3]})"
    lines += ["", f"Every phase's outputs{'' if runs['phases_only'] else ' and every table'}: {verdict} "
              f"({runs['files']} files compared).", "",
              f"The paper DAG on the paper's shape ({flops['phases']} phases; teacher passes "
              f"{flops['teacher_passes_alone']} alone, {flops['teacher_passes_grouped']} grouped): training + "
              f"evaluation {flops['alone'] / 1e18:,.0f} EFLOP alone, {flops['grouped'] / 1e18:,.0f} EFLOP grouped "
              f"({flops['grouped'] / flops['alone']:.2f}×); at MFU {mfu:.0%} of an H100's {H100_BF16_TFLOPS} "
              f"TFLOP/s: {gpu_hours(flops['alone'], mfu):,.0f} → {gpu_hours(flops['grouped'], mfu):,.0f} GPU-hours."]
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configfile", nargs="+", default=["config.yaml"], help="config files, merged in order")
    parser.add_argument("--group-size", type=int, default=64)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--phases-only", action="store_true", help="train the phases only (no diagnostics, tables)")
    parser.add_argument("--mfu", type=float, default=0.4, help="the MFU assumed for GPU-hours")
    parser.add_argument("--alone", type=Path, help="a finished run of the same configuration, phases alone")
    docs_block.add_write_option(parser, "results")
    args = parser.parse_args(argv)
    command = docs_block.checked_command(parser, args, __file__, argv)
    flops = paper_flops(args.group_size)
    root = Path(tempfile.mkdtemp(prefix="grouping-"))
    runs, files = {"cores": args.cores, "phases_only": args.phases_only}, {}
    for size in (1, args.group_size):
        workdir = args.alone if size == 1 and args.alone else root / f"group{size}"
        if workdir == args.alone:
            runs[size] = measured(workdir, snakemake_seconds(workdir))
        else:
            workdir.mkdir()
            runs[size] = run_workflow(workdir, args.configfile, size, args.cores, args.phases_only)
        files[size] = digests(workdir, args.phases_only)
        print(f"group size {size}: {runs[size]}", flush=True)
    differing = sorted(k for k in files[1].keys() | files[args.group_size].keys()
                       if files[1].get(k) != files[args.group_size].get(k))
    runs["files"] = len(files[1])
    lines = markdown(args.configfile, args.group_size, runs, not differing, differing, flops, args.mfu)
    print("\n".join(lines))
    print(f"working directories: {root}")
    if command:
        lead = f"`{command}` on {docs_block.conditions()}:"
        docs_block.write(args.write, command, "\n".join([lead, "", *lines]))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
