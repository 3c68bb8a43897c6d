rule collect_metrics:
    input:
        indexes=run_indexes(),
        states=all_phase_outputs("state.json"),
        diagnostics=all_diagnostics(),
    output:
        evals="results/metrics/evals.csv",
        phases="results/metrics/phases.csv",
        transitions="results/metrics/transitions.csv",
        boundary_rms="results/metrics/boundary_rms.csv",
        block_removal="results/metrics/block_removal.csv",
    log:
        "logs/paper/collect_metrics.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/collect_metrics.py"


rule paper:
    input:
        evals="results/metrics/evals.csv",
        phases="results/metrics/phases.csv",
        transitions="results/metrics/transitions.csv",
        boundary_rms="results/metrics/boundary_rms.csv",
        block_removal="results/metrics/block_removal.csv",
        diagnostics=all_diagnostics(),
        teacher_check="results/teacher/check.json",
        tokens="results/data/tokens",
    output:
        directory("results/paper"),
    params:
        config=science_config(config),  # execution settings rebuild nothing
    log:
        "logs/paper/paper.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/paper.py"
