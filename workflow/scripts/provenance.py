"""The run's provenance for `snakemake --report` (normgrow.paper.provenance): the resolved
configuration (every config file and --config override merged, usable again as a --configfile), the
software that ran (Python, platform, git commit of the workflow, every installed distribution) and
one HTML page showing both."""

from pathlib import Path

import yaml

from normgrow.design.logs import job_log
from normgrow.paper.document import to_html
from normgrow.paper.provenance import installed, provenance_document, system

HEADER = ("# The resolved configuration of this run (config.yaml, every --configfile and --config merged).\n"
          "# Rerun it with: snakemake --cores 2 results/paper --configfile results/provenance/config.yaml\n")

with job_log(snakemake.log[0]):
    out = snakemake.output
    distributions = installed()
    rows = system(Path(snakemake.scriptdir).resolve().parents[1])
    config = yaml.safe_dump(snakemake.config, sort_keys=False, allow_unicode=True)
    Path(out.config).write_text(HEADER + config)
    lines = ["kind\tname\tversion"] + [f"system\t{k}\t{v}" for k, v in rows.items()]
    lines += [f"package\t{k}\t{v}" for k, v in distributions.items()]
    Path(out.versions).write_text("\n".join(lines) + "\n")
    Path(out.page).write_text(to_html(provenance_document(rows, distributions, config), "normgrow provenance",
                                      Path(out.page).parent))
    print(f"wrote {out.config}, {out.versions} ({len(distributions)} distributions) and {out.page}")
