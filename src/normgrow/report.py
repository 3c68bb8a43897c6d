"""results/paper/: every table (CSV, Markdown, LaTeX), every figure (PNG, PDF), and the report
(`report.md` and a self-contained `index.html`) that sets this run's numbers beside the paper's,
checks the paper's claims one by one, and records the scale, configuration, package versions, git
commit and data hashes."""

from __future__ import annotations

import base64
import html
import importlib.metadata
import json
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from normgrow import figures
from normgrow.claims import NOT_CHECKED, check_claims
from normgrow.regime import leaves_regime, regime
from normgrow.roles import by_role, run_roles
from normgrow.tables import Results, Table, build_tables, paper_reference, placements_with_roles

PAPER_SCALE = {"teacher": "Qwen3-8B-Base (36 layers, hidden 4096, vocab 151,936)",
               "student": "K=3 blocks × L=3 layers", "steps per phase": "50,000",
               "batch × max length": "64 × 8192", "validation set": "4,833 documents",
               "seeds": "1 (seed 42)"}
PACKAGES = ("torch", "transformers", "datasets", "tokenizers", "snakemake", "numpy", "pandas", "matplotlib")


def read_metric(path: Path) -> pd.DataFrame:
    """A collected metrics table; an empty frame when nothing was collected."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


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
    return config["train"]["phase_steps"] < 10_000 or config["teacher"]["name"] is None


def git_commit(directory: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def provenance(data: dict, repo: Path) -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    hashes = {f"{split} text SHA-256": info["text_sha256"] for split, info in data["splits"].items()}
    source = data["corpus"]["source"]
    if "sha256" in source:
        hashes["corpus file SHA-256"] = source["sha256"]
    return {"git commit": git_commit(repo), "packages": versions, "data": hashes}


def final_reports(diagnostics: list[Path], roles: dict[str, str]) -> dict[str, dict]:
    """The last checkpoint's diagnostics report of the pre-grow and post-grow roles (first seed)."""
    best: dict[str, dict] = {}
    reports = [r for path in diagnostics for r in json.loads(Path(path).read_text())["checkpoints"]]
    for report in reports:
        run = roles.get(report["run"])
        if run in ("pre-grow", "post-grow"):
            key = (report["global_step"], -report["seed"])
            if run not in best or key > (best[run]["global_step"], -best[run]["seed"]):
                best[run] = report
    return dict(sorted(best.items(), key=lambda item: item[0] != "pre-grow"))


def draw_figures(out: Path, frames: dict, results: Results, diagnostics: list[Path],
                 roles: dict[str, str]) -> list[Path]:
    fig_dir = out / "figures"
    paths = figures.validation_loss(frames["evals"], frames["phases"], fig_dir)
    if results.has("pre-joint", "post-joint", "pre-grow", "post-grow"):
        paths += figures.interaction(results.final, fig_dir)
    if results.has("pre-grow", "post-grow"):
        paths += figures.crossover(frames["phases"], fig_dir)
        paths += figures.grow_validation(frames["evals"], frames["phases"], fig_dir)
        rms = frames["boundary_rms"]
        if not rms.empty and {"pre-grow", "post-grow"} <= set(rms["run"]):
            paths += figures.boundary_rms(rms, frames["phases"], fig_dir)
            paths += figures.token_types(rms, fig_dir)
            paths += figures.rms_distributions(final_reports(diagnostics, roles), fig_dir)
    if not frames["block_removal"].empty:
        paths += figures.block_removal(frames["block_removal"], fig_dir)
    others = placements_with_roles(results)
    if others and results.has("pre-joint", "pre-grow"):
        paths += figures.placements(results.final, others, fig_dir)
    return paths


def build_paper(out: Path, metrics: dict[str, Path], diagnostics: list[Path], teacher: dict, data: dict,
                config: dict, repo: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    roles = run_roles(config)  # tables, claims and figures pick runs by role, not by name
    frames = {name: by_role(read_metric(path), roles) for name, path in metrics.items()}
    results = Results(frames["phases"], frames["transitions"], frames["block_removal"], config, frames["boundary_rms"])
    tables, not_built = build_tables(results)
    for table in tables:
        table.write(out / "tables")
    figure_paths = draw_figures(out, frames, results, diagnostics, roles)
    margin = config.get("report", {}).get("equivalence_margin", 0.01)
    claims = check_claims(results, frames["boundary_rms"], margin)
    properties = regime(config, teacher, data, frames["phases"], paper_reference()["regime"])
    context = {"scale": scale_summary(config, teacher, data), "far": is_far_from_paper(config),
               "regime": properties, "outside": leaves_regime(properties), "not_built": not_built,
               "claims": claims, "margin": margin, "tables": tables,
               "figures": [p for p in figure_paths if p.suffix == ".png"], "config": config,
               "provenance": provenance(data, repo or Path(__file__).resolve().parents[2])}
    (out / "report.md").write_text(markdown_report(context))
    (out / "index.html").write_text(html_report(context, out))
    print(f"wrote {len(tables)} tables, {len(figure_paths)} figure files and the report to {out}")


SCALE_WARNING = ("This run is far smaller than the paper's setting (see the scale table): its numbers test "
                 "the pipeline and show what happens at this scale; they are not expected to match the "
                 "paper's values, and verdicts below describe this run only.")
VERDICT_NOTE = ("Verdicts: with several seeds, decided by the 95% interval of the paired difference; with one "
                "seed, by the point estimate (no significance). Equivalence margin m = {margin} nats.")
REGIME_NOTE = ("The properties that make a run speak to the paper's claims (normgrow.regime), measured on this "
               "run; a property with a condition is in or out of the paper's regime.")
OUTSIDE_NOTE = ("This run leaves the paper's regime ({names}): its verdicts describe this run only and cannot "
                "speak to the paper's claims.")


def regime_status(p) -> str:
    return "–" if p.in_regime is None else "in regime" if p.in_regime else "OUT of regime"


def verdict_text(claim, outside: bool) -> str:
    if claim.verdict == NOT_CHECKED:
        return claim.verdict
    return claim.verdict + (" (1 seed)" if claim.seeds == 1 else "") + (" (outside the regime)" if outside else "")


def markdown_report(c: dict) -> str:
    lines = ["# normgrow report", "", "This run's numbers beside the paper's. Columns marked *(paper)* are "
             "the paper's reported values; everything else was measured by this workflow.", ""]
    if c["far"]:
        lines += [f"> **Warning.** {SCALE_WARNING}", ""]
    lines += ["## Scale", "", "| | this run | paper |", "|---|---|---|"]
    lines += [f"| {k} | {c['scale'][k]} | {PAPER_SCALE[k]} |" for k in PAPER_SCALE] + [""]
    lines += ["## Regime", "", REGIME_NOTE, "", "| property | paper | this run | condition | status |",
              "|---|---|---|---|---|"]
    lines += [f"| {p.name} | {p.paper} | {p.ours} | {p.condition} | {regime_status(p)} |" for p in c["regime"]]
    lines += [""] + ([f"> **Outside the regime.** {OUTSIDE_NOTE.format(names='; '.join(c['outside']))}", ""]
                     if c["outside"] else [])
    lines += ["## Claims", "", VERDICT_NOTE.format(margin=c["margin"]), "",
              "| claim | paper | this run | verdict |", "|---|---|---|---|"]
    lines += [f"| {cl.name} | {cl.paper} | {cl.ours} | **{verdict_text(cl, bool(c['outside']))}** |"
              for cl in c["claims"]] + [""]
    lines += ["## Tables", ""] + [t.markdown() for t in c["tables"]]
    if c["not_built"]:
        lines += ["Not built by this configuration:", ""]
        lines += [f"- {name}: {why}" for name, why in c["not_built"].items()] + [""]
    lines += ["## Figures", ""] + [f"![{p.stem}](figures/{p.name})\n" for p in c["figures"]]
    lines += ["## Provenance", "", f"- git commit: `{c['provenance']['git commit']}`"]
    lines += [f"- {k}: {v}" for k, v in c["provenance"]["packages"].items()]
    lines += [f"- {k}: `{v}`" for k, v in c["provenance"]["data"].items()]
    lines += ["", "## Configuration", "", "```yaml", yaml.safe_dump(c["config"], sort_keys=False).rstrip(), "```", ""]
    return "\n".join(lines)


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#f3f3f3}.agrees{color:#006d2c;font-weight:bold}.disagrees{color:#b30000;font-weight:bold}
.inconclusive{color:#8a6d00;font-weight:bold}
.warning{background:#fff4ce;border-left:4px solid #e0a800;padding:0.6em 1em}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}pre{background:#f6f6f6;padding:1em;overflow:auto}"""


def _html_table(table: Table) -> str:
    note = f"<p><em>{html.escape(table.note)}</em></p>" if table.note else ""
    return (f"<h3>{html.escape(table.title)}</h3>" + table.display().rename_axis(None).to_html(border=0, escape=True)
            + note)


def html_report(c: dict, out: Path) -> str:
    """One self-contained page: figures are embedded as data URIs."""
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>normgrow report</title>",
             f"<style>{CSS}</style></head><body><h1>normgrow report</h1>",
             "<p>This run's numbers beside the paper's. Columns marked <em>(paper)</em> are the paper's reported "
             "values; everything else was measured by this workflow.</p>"]
    if c["far"]:
        parts.append(f"<p class='warning'><strong>Warning.</strong> {e(SCALE_WARNING)}</p>")
    parts.append("<h2>Scale</h2><table><tr><th></th><th>this run</th><th>paper</th></tr>")
    parts += [f"<tr><td>{e(k)}</td><td>{e(c['scale'][k])}</td><td>{e(PAPER_SCALE[k])}</td></tr>"
              for k in PAPER_SCALE]
    parts.append(f"</table><h2>Regime</h2><p>{e(REGIME_NOTE)}</p><table><tr><th>property</th><th>paper</th>"
                 "<th>this run</th><th>condition</th><th>status</th></tr>")
    parts += [f"<tr><td>{e(p.name)}</td><td>{e(p.paper)}</td><td>{e(p.ours)}</td><td>{e(p.condition)}</td>"
              f"<td class='{'inconclusive' if p.in_regime is None else 'agrees' if p.in_regime else 'disagrees'}'>"
              f"{e(regime_status(p))}</td></tr>" for p in c["regime"]]
    parts.append("</table>")
    if c["outside"]:
        parts.append(f"<p class='warning'><strong>Outside the regime.</strong> "
                     f"{e(OUTSIDE_NOTE.format(names='; '.join(c['outside'])))}</p>")
    parts.append(f"<h2>Claims</h2><p>{e(VERDICT_NOTE.format(margin=c['margin']))}</p>"
                 "<table><tr><th>claim</th><th>paper</th><th>this run</th><th>verdict</th></tr>")
    for cl in c["claims"]:
        parts.append(f"<tr><td>{e(cl.name)}</td><td>{e(cl.paper)}</td><td>{e(cl.ours)}</td>"
                     f"<td class='{cl.verdict}'>{e(verdict_text(cl, bool(c['outside'])))}</td></tr>")
    parts.append("</table><h2>Tables</h2>")
    parts += [_html_table(t) for t in c["tables"]]
    if c["not_built"]:
        parts.append("<p>Not built by this configuration:</p><ul>")
        parts += [f"<li>{e(name)}: {e(why)}</li>" for name, why in c["not_built"].items()]
        parts.append("</ul>")
    parts.append("<h2>Figures</h2>")
    for path in c["figures"]:
        data = base64.b64encode((out / "figures" / path.name).read_bytes()).decode()
        parts.append(f"<figure><img alt='{e(path.stem)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{e(path.stem)} (PDF beside it in figures/)</figcaption></figure>")
    p = c["provenance"]
    parts.append(f"<h2>Provenance</h2><ul><li>git commit: <code>{e(p['git commit'])}</code></li>")
    parts += [f"<li>{e(k)}: {e(v)}</li>" for k, v in {**p["packages"], **p["data"]}.items()]
    parts.append("</ul><h2>Configuration</h2><pre>" + e(yaml.safe_dump(c["config"], sort_keys=False)) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
