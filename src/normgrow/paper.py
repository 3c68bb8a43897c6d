"""results/paper/README.md: every table and figure of this run, with the scale it ran at."""

from __future__ import annotations

from pathlib import Path

import yaml

from normgrow.tables import Table

PAPER_SCALE = {"teacher": "Qwen3-8B-Base (36 layers, hidden 4096, vocab 151,936)",
               "student": "K=3 blocks × L=3 layers", "steps per phase": "50,000",
               "batch × max length": "64 × 8192", "eval set": "4,833 documents"}


def scale_summary(config: dict, teacher: dict, data: dict) -> dict:
    t = config["train"]
    return {"teacher": f"{teacher['model_type']} {teacher['num_hidden_layers']} layers, hidden "
                       f"{teacher['hidden_size']}, vocab {teacher['vocab_size']:,} "
                       f"({teacher['parameters']:,} parameters; validation CE {teacher['validation_ce']:.3f}, "
                       f"unigram baseline {teacher['unigram_ce']:.3f})",
            "student": f"K={config['student']['blocks']} blocks × L={config['student']['layers_per_block']} layers",
            "steps per phase": f"{t['phase_steps']:,}",
            "batch × max length": f"{t['batch_size']} × {config['data']['max_length']}",
            "eval set": f"{data['splits']['valid']['documents']:,} documents"}


def write_index(out: Path, tables: list[Table], figures: list[Path], teacher: dict, data: dict,
                config: dict) -> None:
    ours = scale_summary(config, teacher, data)
    lines = ["# normgrow results", "",
             "Numbers from this run beside the paper's. Columns marked *(paper)* come from the paper; "
             "the rest were measured here.", ""]
    if ours["steps per phase"] != PAPER_SCALE["steps per phase"]:
        lines += ["> **Warning: this run is far smaller than the paper's setting** (see the scale "
                  "table). Its numbers test the pipeline and show trends at this scale; they are not "
                  "expected to match the paper's values.", ""]
    lines += ["| | this run | paper |", "|---|---|---|"]
    lines += [f"| {k} | {ours[k]} | {PAPER_SCALE[k]} |" for k in PAPER_SCALE] + [""]
    for table in tables:
        lines += [table.markdown(), ""]
    for fig in figures:
        if fig.suffix == ".png":
            lines += [f"![{fig.stem}](figures/{fig.name})", ""]
    lines += ["## Configuration", "", "```yaml", yaml.safe_dump(config, sort_keys=False).rstrip(), "```", ""]
    (out / "README.md").write_text("\n".join(lines))
