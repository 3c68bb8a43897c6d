rule diagnose:
    input:
        snapshots=lambda wildcards: f"{diagnosed_phase_dir(wildcards)}/snapshots",
        teacher=teacher_input(),
        tokens="results/data/tokens",
    output:
        "results/diagnostics/{run}/seed{seed}/phase{phase}.json",
    params:
        teacher=teacher_source,
        placement=lambda wildcards: config["runs"][wildcards.run]["placement"],
        active_blocks=lambda wildcards: run_phases(config, wildcards.run)[int(wildcards.phase)].active_blocks,
        steps=phase_snapshot_steps,
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


# One scale of the formation study (configs/formation.yaml): the teacher's probes along pretraining
# (teacher.pretrain.snapshots, each with its validation CE) and the diagnosed runs' snapshots, in one file
# the study reads (normgrow.paper.formation). Not the teacher's check: a teacher-only scale is read whatever
# its CE (a student's phases still need the check).
rule formation:
    input:
        teacher_snapshots=["results/teacher/probe_snapshots.json"] if TEACHER_SNAPSHOTS else [],
        diagnostics=all_diagnostics(),
    output:
        "results/formation.json",
    log:
        "logs/formation.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/formation.py"
