# The tidy tables rule collect_metrics writes (normgrow.paper.results) and rule paper reads, named once.
METRIC_TABLES = ("evals", "phases", "transitions", "boundary_rms", "block_removal")


rule collect_metrics:
    input:
        indexes=run_indexes(),
        states=all_phase_outputs("state"),
        train_logs=all_phase_outputs("train"),
        eval_logs=all_phase_outputs("eval"),
        diagnostics=all_diagnostics(),
    output:
        **{name: f"results/metrics/{name}.csv" for name in METRIC_TABLES},
    log:
        "logs/paper/collect_metrics.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/collect_metrics.py"


# The run's provenance (resolved config, software versions), built with the paper so that every
# finished results/paper can be handed over with `snakemake --report report.zip`. It reruns with the
# metrics the paper is built from (any retrained phase) and with the science, not for execution settings.
rule provenance:
    input:
        rules.collect_metrics.output,
    output:
        page=report("results/provenance/provenance.html", caption="../report/provenance.rst", category="Provenance",
                    labels={"item": "provenance page", "shows": "software versions and resolved configuration"}),
        config=report("results/provenance/config.yaml", caption="../report/config.rst", category="Provenance",
                      labels={"item": "resolved configuration", "shows": "config.yaml (usable as --configfile)"}),
        versions=report("results/provenance/versions.tsv", caption="../report/versions.rst", category="Provenance",
                        labels={"item": "software versions", "shows": "Python, platform, git commit, packages"}),
    params:
        config=science_config(config),  # a rerun trigger only; the job writes the whole resolved config
    log:
        "logs/paper/provenance.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/provenance.py"


# results/paper in the Snakemake report: our own index.html as the landing page (its directory, with
# htmlindex), and every table and figure one by one (patterns on its subdirectory; the caption picks
# the table's or figure's text by the pattern's {name}; a table's bare tabular, NAME_tabular.tex, and the
# headline macros are files for one's own paper, not items).
rule paper:
    input:
        **rules.collect_metrics.output,
        diagnostics=all_diagnostics(),
        teacher_check="results/teacher/check.json",
        teacher_probe="results/teacher/probe.json",
        tokens="results/data/tokens",
        versions=rules.provenance.output.versions,  # the report's software; and every results/paper reportable
    output:
        report(directory("results/paper"), htmlindex="index.html", caption="../report/paper.rst",
               category="Paper", labels={"item": "normgrow report (index.html)"}),
        tables=report(directory("results/paper/tables"), patterns=["{name,[A-Za-z0-9]+}.{format,csv|md|tex}"],
                      caption="../report/tables.rst", category="Tables", subcategory=report_section,
                      labels=report_labels),
        figures=report(directory("results/paper/figures"), patterns=["{name}.{format,png|pdf}"],
                       caption="../report/figures.rst", category="Figures", subcategory=report_section,
                       labels=report_labels),
    params:
        config=science_config(config),  # execution settings rebuild nothing
        captions=report_items(),  # the report's captions (workflow/report/tables.rst, figures.rst)
        metrics=METRIC_TABLES,
        # this checkout's phase code (normgrow.design.science_code): rebuilt after a change to it, as the phases are
        # (train.smk); the report warns when phases it reads come from other code
        code=PHASE_CODE,
    log:
        "logs/paper/paper.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/paper.py"
