# A run's final student as a transformers model directory (normgrow.model.export; docs/workflow.md,
# Exporting a student): `snakemake --cores 1 results/export/{run}/seed{seed}`. A target of its own,
# not part of results/paper. The export reads the last phase's weights and holds them once, on the
# CPU: a one-process job sized like those that hold a model (resources.model).
rule export_student:
    input:
        student=lambda wildcards: run_phase_files(wildcards, "student")[-1],
        state=lambda wildcards: run_phase_files(wildcards)[-1],
        teacher=teacher_input(),
        tokenizer="results/data/tokenizer",
    output:
        directory("results/export/{run}/seed{seed}"),
    params:
        teacher=teacher_source,
    log:
        "logs/export/{run}/seed{seed}.log",
    benchmark:
        "logs/benchmarks/export/{run}/seed{seed}.tsv"
    resources:
        **job_resources(config, "model"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/export_student.py"
