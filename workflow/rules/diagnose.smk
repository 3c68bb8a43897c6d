rule diagnose:
    input:
        snapshots=lambda wildcards: f"{diagnosed_phase_dir(wildcards)}/snapshots",
        teacher=teacher_input(),
        tokens="results/data/tokens",
    output:
        "results/diagnostics/{run}/seed{seed}/phase{phase}.json",
    params:
        teacher=teacher_param,
        placement=lambda wildcards: config["runs"][wildcards.run]["placement"],
        active_blocks=lambda wildcards: run_phases(config, wildcards.run)[int(wildcards.phase)].active_blocks,
        steps=phase_checkpoint_steps,
        student=config["student"],
    threads: config["threads"]
    log:
        "logs/diagnostics/{run}/seed{seed}/phase{phase}.log",
    benchmark:
        "logs/benchmarks/diagnostics/{run}/seed{seed}/phase{phase}.tsv"
    resources:
        **job_resources(config, "model"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/diagnose.py"
