"""results/paper/: every table (CSV, Markdown, LaTeX), every figure (PNG, PDF), and the report
(`report.md` and a self-contained `index.html`) that sets this run's numbers beside the paper's,
checks the paper's claims one by one, and records the scale, configuration, package versions, git
commit, data hashes and the code that trained the phases (warning when it is not this checkout's)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from normgrow.design.science_code import PACKAGES, digest
from normgrow.paper import figures
from normgrow.paper.claims import MIN_PARITY_SEEDS, NOT_CHECKED, check_claims
from normgrow.paper.document import STATUSES, Block, Code, Figure, Grid, Heading, Items, Paragraph, to_html, to_markdown
from normgrow.paper.items import ITEMS
from normgrow.paper.preconditions import massive_activations_table, preconditions
from normgrow.paper.provenance import (
    code_blocks,
    code_warning,
    hub_sources,
    key_versions,
    phase_code,
    read_versions,
)
from normgrow.paper.reference import paper_reference
from normgrow.paper.regime import leaves_regime, regime
from normgrow.paper.results import Results, read_metric
from normgrow.paper.roles import Role, by_role, has_role, run_roles
from normgrow.paper.schematics import schematics
from normgrow.paper.tables import (
    MACROS,
    TexStyle,
    build_tables,
    growth_operators,
    placements_with_roles,
    write_macros,
)


def scale_summary(config: dict, teacher: dict, data: dict) -> dict:
    t = config["train"]
    return {"teacher": f"{teacher['model_type']}, {teacher['num_hidden_layers']} layers, hidden "
                       f"{teacher['hidden_size']}, vocab {teacher['vocab_size']:,} ({teacher['parameters']:,} "
                       f"parameters; validation CE {teacher['validation_ce']:.3f} vs unigram "
                       f"{teacher['unigram_ce']:.3f})",
            "student": f"K={config['student']['blocks']} blocks × L={config['student']['layers_per_block']} layers",
            "steps per phase": f"{t['phase_steps']:,}",
            "batch × max length": f"{t['batch_size']} × {config['data']['max_length']}",
            "validation set": f"{data['splits']['valid']['documents']:,} documents",
            "seeds": f"{len(config['seeds'])} ({', '.join(map(str, config['seeds']))})"}


def is_far_from_paper(config: dict) -> bool:
    """Whether the report warns that the run is far from the paper's setting (SCALE_WARNING): when its phases
    are short (under 10,000 updates; the paper's: 50,000) or its teacher was pretrained here — either one."""
    return config["train"]["phase_steps"] < 10_000 or config["teacher"]["name"] is None


def report_provenance(data: dict, versions: Path, phases: pd.DataFrame, code_digest: str, config: dict) -> dict:
    """Data hashes, the hub sources' revisions (`config`), the key package versions and the workflow's
    git commit as rule `provenance` recorded them (`versions`: its versions.tsv), and the code that
    trained the `phases` against this checkout's (`code_digest` and the installed torch and transformers)."""
    hashes = {f"{split} text SHA-256": info["text_sha256"] for split, info in data["splits"].items()}
    source = data["corpus"]["source"]
    if "sha256" in source:
        hashes["corpus file SHA-256"] = source["sha256"]
    system, packages = read_versions(versions)
    current = {"digest": code_digest, **{name: packages.get(name, "not installed") for name in PACKAGES}}
    code = phase_code(phases, current)
    return {"git commit": system["workflow git commit"], "packages": key_versions(packages), "data": hashes,
            "hub": hub_sources(config), "code": code, "current code": current,
            "code warning": code_warning(code, current)}


def final_reports(diagnostics: list[Path], roles: dict[str, Role]) -> dict[str, dict]:
    """The last snapshot's diagnostics report of the pre-grow and post-grow roles (first seed)."""
    best: dict[str, dict] = {}
    reports = [r for path in diagnostics for r in json.loads(Path(path).read_text())["checkpoints"]]
    for report in reports:
        run = str(roles.get(report["run"]))
        if run in ("pre-grow", "post-grow"):
            key = (report["global_step"], -report["seed"])
            if run not in best or key > (best[run]["global_step"], -best[run]["seed"]):
                best[run] = report
    return dict(sorted(best.items(), key=lambda item: item[0] != "pre-grow"))


def draw_figures(out: Path, frames: dict, results: Results, diagnostics: list[Path],
                 roles: dict[str, Role]) -> list[Path]:
    fig_dir = out / "figures"
    paths = figures.validation_loss(frames["evals"], frames["phases"], fig_dir)
    if results.has("pre-joint", "post-joint", "pre-grow", "post-grow"):
        paths += figures.interaction(results.final, fig_dir)
    if results.has("pre-grow", "post-grow"):
        paths += figures.crossover(frames["phases"], fig_dir)
        paths += figures.grow_validation(frames["evals"], frames["phases"], fig_dir)
        rms = frames["boundary_rms"]
        if not rms.empty and {"pre-grow", "post-grow"} <= set(rms["run"]):
            paths += figures.token_types(rms, fig_dir)
            paths += figures.rms_distributions(final_reports(diagnostics, roles), fig_dir)
    rms = frames["boundary_rms"]
    if not rms.empty and any(has_role(run, "grow") for run in rms["run"]):
        paths += figures.boundary_rms(rms, frames["phases"], fig_dir)
    if not frames["block_removal"].empty:
        paths += figures.block_removal(frames["block_removal"], fig_dir)
    operators = growth_operators(results)
    if operators and operators != ["random"]:
        paths += figures.growth_operators(results.final, operators, fig_dir)
    others = placements_with_roles(results)
    if others and results.has("pre-joint", "pre-grow"):
        paths += figures.placements(results.final, others, fig_dir)
    return paths


def build_paper(out: Path, metrics: dict[str, Path], diagnostics: list[Path], teacher: dict, probe: dict,
                data: dict, config: dict, versions: Path, code_digest: str | None = None) -> None:
    """Every table, figure and the report into `out`, from the collected `metrics`, the snapshots'
    `diagnostics`, the teacher check and probe (normgrow.train.probe), the token metadata, the science config
    and rule `provenance`'s versions.tsv; `code_digest`: this checkout's science code
    (normgrow.design.science_code.digest, computed here if not given), which the phases' code is compared with."""
    out.mkdir(parents=True, exist_ok=True)
    roles = run_roles(config)  # tables, claims and figures pick runs by role, not by name
    frames = {name: by_role(read_metric(path), roles) for name, path in metrics.items()}
    results = Results(frames["phases"], frames["transitions"], frames["block_removal"], config, frames["boundary_rms"])
    tables, not_built = build_tables(results)
    style = TexStyle.from_config(config)  # report.tables: the .tex tables for a document of one's own
    for table in tables:
        table.write(out / "tables", style)
    write_macros(tables, out / "tables" / MACROS, style)
    setup_paths = schematics(config, out / "figures")
    figure_paths = draw_figures(out, frames, results, diagnostics, roles)
    margin = config["report"]["equivalence_margin"]
    claims = check_claims(results, frames["boundary_rms"], margin)
    context = {"scale": scale_summary(config, teacher, data), "far": is_far_from_paper(config),
               **regime_context(config, teacher, probe, data, results), "not_built": not_built,
               "claims": claims, "margin": margin, "tables": tables, "seeds": len(config["seeds"]),
               "schematics": [p for p in setup_paths if p.suffix == ".png"],
               "figures": [p for p in figure_paths if p.suffix == ".png"], "config": config,
               "provenance": report_provenance(data, versions, read_metric(metrics["phases"]),
                                               code_digest or digest(), config)}
    document = report_document(context)
    (out / "report.md").write_text(to_markdown(document))
    (out / "index.html").write_text(to_html(document, "normgrow report", out))
    print(f"wrote {len(tables)} tables, {len(setup_paths) + len(figure_paths)} figure files and the report to {out}")


INTRO = ("This run's numbers beside the paper's. Columns marked \"(paper)\" are the paper's reported values; "
         "everything else was measured by this workflow.")
SCALE_WARNING = ("This run is far smaller than the paper's setting (see the scale table): its numbers test "
                 "the pipeline and show what happens at this scale; they are not expected to match the "
                 "paper's values, and verdicts below describe this run only.")
VERDICT_NOTE = ("Verdicts: with several seeds, decided by the 95% interval of the paired difference; with one "
                "seed, by the point estimate (no significance). Equivalence margin m = {margin} nats.")
REGIME_NOTE = ("Conditions kept: the sizes a miniature must keep to speak to the paper's claims "
               "(normgrow.paper.regime), measured on this run. They are necessary, not sufficient: the "
               "preconditions below decide whether the run starts where the paper starts.")
PRECONDITION_NOTE = ("Preconditions: the paper's starting point (a tie under joint training) and the phenomenon its "
                     "mechanism is about (scale on structural tokens), measured on this run "
                     "(normgrow.paper.preconditions).")
IN_REGIME_NOTE = "In the paper's regime: every condition kept and every precondition present."
OUTSIDE_NOTE = ("Not in the paper's regime ({names}): the verdicts below describe this run only and cannot "
                "speak to the paper's claims.")
UNMEASURED_NOTE = ("Not shown to be in the paper's regime ({names}: not shown by this configuration): the "
                   "verdicts below describe this run only.")
FEW_SEEDS_NOTE = ("{seeds}: this run cannot show parity under joint training or an interaction — both need a 95% "
                  "interval over at least {needed} paired seeds (e.g. --config 'seeds=[1,2,3]'); its differences "
                  "are point estimates.")


def regime_context(config: dict, teacher: dict, probe: dict, data: dict, results: Results) -> dict:
    """The conditions kept (normgrow.paper.regime), the preconditions (normgrow.paper.preconditions),
    the names of those that fail (`outside`) and of the preconditions this configuration cannot measure
    (`unmeasured`; the run is in the paper's regime only when both are empty), and the massive-activation
    table."""
    conditions = regime(config, teacher, data, results.phases, paper_reference()["regime"])
    required = preconditions(results, data, probe, paper_reference()["preconditions"],
                             config["report"]["equivalence_margin"])
    return {"regime": conditions, "preconditions": required, "outside": leaves_regime(conditions + required),
            "unmeasured": [p.name for p in required if p.in_regime is None],
            "massive": massive_activations_table(probe, results.rms)}


def regime_status(p, held: str = "kept", failed: str = "NOT kept", unknown: str = "–") -> str:
    return unknown if p.in_regime is None else held if p.in_regime else failed


def verdict_text(claim, outside: bool, unmeasured: bool = False) -> str:
    """A claim's verdict with what qualifies it: one seed, a run out of the regime (`outside`), or one whose
    preconditions were not all measured (`unmeasured`)."""
    if claim.verdict == NOT_CHECKED:
        return claim.verdict
    regime = " (not in regime)" if outside else " (regime not shown)" if unmeasured else ""
    return claim.verdict + (" (1 seed)" if claim.seeds == 1 else "") + regime


def regime_blocks(c: dict) -> list[Block]:
    """The report's Regime section from `regime_context`'s values."""
    blocks = [Heading("Regime"), Paragraph(REGIME_NOTE),
               Grid(["condition", "paper", "this run", "threshold", "status"],
                    [[p.name, p.paper, p.ours, p.condition, regime_status(p)] for p in c["regime"]],
                    [None if p.in_regime is None else "agrees" if p.in_regime else "disagrees" for p in c["regime"]]),
               Paragraph(PRECONDITION_NOTE),
               Grid(["precondition", "paper", "this run", "threshold", "status"],
                    [[p.name, p.paper, p.ours, p.condition, regime_status(p, "present", "ABSENT", "not shown")]
                     for p in c["preconditions"]],
                    [None if p.in_regime is None else "agrees" if p.in_regime else "disagrees"
                     for p in c["preconditions"]])]
    if c["outside"]:
        blocks.append(Paragraph(OUTSIDE_NOTE.format(names="; ".join(c["outside"])), "warning", "Not in regime."))
    elif c["unmeasured"]:
        blocks.append(Paragraph(UNMEASURED_NOTE.format(names="; ".join(c["unmeasured"])), "warning",
                                "Regime not shown."))
    else:
        blocks.append(Paragraph(IN_REGIME_NOTE))
    blocks += [Paragraph("Massive activations: per layer of the teacher, and per block boundary of each diagnosed "
                         "run at its last checkpoint (mean over seeds); the paper's pre-norm student reaches a "
                         "structural/regular RMS of 37 (Fig. 5a). max/median |scalar|: the largest single activation "
                         "over the median one (Sun et al. 2024), which a token's RMS dilutes by about √width; "
                         "– where not measured."),
               Grid(list(c["massive"].columns),
                    [[v if isinstance(v, str) else "–" if pd.isna(v) else f"{v:.2f}" for v in row]
                     for row in c["massive"].itertuples(index=False)])]
    return blocks


def figure_block(path: Path) -> Figure:
    """A figure of results/paper/figures with its caption (normgrow.paper.items)."""
    item = ITEMS.get(path.stem)
    caption = f"{item.heading()} {item.caption}" if item else path.stem
    return Figure(Path("figures") / path.name, f"{caption} (PDF beside it in figures/)")


def report_document(c: dict) -> list[Block]:
    """The report as one document (normgrow.paper.document), rendered to report.md and index.html."""
    blocks: list[Block] = [Heading("normgrow report", 1), Paragraph(INTRO)]
    if c["provenance"]["code warning"]:
        blocks.append(Paragraph(c["provenance"]["code warning"], "warning", "Warning."))
    if c["far"]:
        blocks.append(Paragraph(SCALE_WARNING, "warning", "Warning."))
    if c["seeds"] < MIN_PARITY_SEEDS:
        blocks.append(Paragraph(FEW_SEEDS_NOTE.format(seeds="One seed" if c["seeds"] == 1 else f"{c['seeds']} seeds",
                                                      needed=MIN_PARITY_SEEDS), "warning", "Warning."))
    blocks += [Heading("Scale"),
               Grid(["", "this run", "paper"],
                    [[k, c["scale"][k], paper] for k, paper in paper_reference()["scale"].items()])]
    blocks.append(Heading("Placements and curricula"))
    blocks += [figure_block(p) for p in c["schematics"]]
    blocks += regime_blocks(c)
    blocks += [Heading("Claims"), Paragraph(VERDICT_NOTE.format(margin=c["margin"])),
               Grid(["claim", "paper", "this run", "verdict"],
                    [[cl.name, cl.paper, cl.ours, verdict_text(cl, bool(c["outside"]), bool(c["unmeasured"]))]
                     for cl in c["claims"]],
                    [cl.verdict if cl.verdict in STATUSES else None for cl in c["claims"]])]
    blocks.append(Heading("Tables"))
    for table in c["tables"]:
        blocks += table.blocks()
    if c["not_built"]:
        blocks += [Paragraph("Not built by this configuration:"),
                   Items([(name, why, False) for name, why in c["not_built"].items()])]
    blocks.append(Heading("Figures"))
    blocks += [figure_block(p) for p in c["figures"]]
    p = c["provenance"]
    blocks += [Heading("Provenance"),
               Items([("git commit", p["git commit"], True)] + [(k, v, False) for k, v in p["packages"].items()]
                     + [(k, v, True) for k, v in p["data"].items()]
                     + [(f"{source}, revision", revision, True) for source, revision in p["hub"].items()]),
               *code_blocks(p["code"], p["current code"]),
               Heading("Configuration"), Code(yaml.safe_dump(c["config"], sort_keys=False), "yaml")]
    return blocks
