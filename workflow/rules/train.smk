rule train_phase:
    input:
        previous=previous_phase,
        teacher=teacher_input(),
        teacher_check="results/teacher/check.json",
        tokens="results/data/tokens",
    output:
        student="results/runs/{run}/seed{seed}/phase{phase}/student.safetensors",
        state="results/runs/{run}/seed{seed}/phase{phase}/state.json",
        train="results/runs/{run}/seed{seed}/phase{phase}/train.csv",
        eval="results/runs/{run}/seed{seed}/phase{phase}/eval.csv",
        snapshots=directory("results/runs/{run}/seed{seed}/phase{phase}/snapshots"),
    params:
        spec=lambda wildcards: phase_spec(config, wildcards.run, wildcards.seed, wildcards.phase),
        teacher=teacher_param,
        previous=previous_phase_dir,
        ranks=launch_ranks(config),
    threads: config["threads"]
    log:
        "logs/runs/{run}/seed{seed}/phase{phase}.log",
    benchmark:
        "benchmarks/runs/{run}/seed{seed}/phase{phase}.tsv"
    resources:
        **job_resources(config, "train"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/train_phase.py"
