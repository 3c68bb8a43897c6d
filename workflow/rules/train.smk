rule train_phase:
    input:
        previous_phase,
        teacher_input(),
        teacher_check="results/teacher/check.json",
        tokens="results/data/tokens",
    output:
        expand(PHASE_DIR + "/{file}", file=PHASE_FILES, allow_missing=True),
    params:
        spec=lambda wildcards: phase_spec(config, wildcards.run, wildcards.seed, wildcards.phase),
        teacher=teacher_path(),
        previous=lambda wildcards, input: os.path.dirname(input[0]) if int(wildcards.phase) else None,
    threads: config["threads"]
    log:
        "logs/runs/{run}/seed{seed}/phase{phase}.log",
    benchmark:
        "benchmarks/runs/{run}/seed{seed}/phase{phase}.tsv"
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/train_phase.py"
