rule collect_metrics:
    input:
        states=all_phase_outputs("state.json"),
        evals=all_phase_outputs("eval.csv"),
    output:
        evals="results/metrics/evals.csv",
        phases="results/metrics/phases.csv",
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
        teacher_check="results/teacher/check.json",
        manifest="results/data/tokens",
    output:
        directory("results/paper"),
    params:
        config=config,
    log:
        "logs/paper/paper.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/paper.py"
