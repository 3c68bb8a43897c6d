# Each distinct phase (normgrow.curriculum.PhaseSpec) trains once, in a directory named by its key;
# every run whose curriculum starts with it reads it there. Only the key (what determines the result)
# and the snapshots kept are tracked: execution settings (threads, ranks, train.state_every,
# train.loss_chunk, ...) are read from the config by the job and rerun nothing.
rule train_phase:
    input:
        previous=previous_phase,
        teacher=teacher_input(),
        teacher_check="results/teacher/check.json",
        tokens="results/data/tokens",
    output:
        student="results/phases/{key}/student.safetensors",
        state="results/phases/{key}/state.json",
        train="results/phases/{key}/train.csv",
        eval="results/phases/{key}/eval.csv",
        snapshots=directory("results/phases/{key}/snapshots"),
    params:
        spec=lambda wildcards: PHASES.specs[wildcards.key],  # an object: not a rerun trigger (the key is)
        snapshots=lambda wildcards: PHASES.snapshots[wildcards.key],
        teacher=teacher_param,
        previous=previous_phase_dir,
    threads: config["threads"]
    retries: 3  # a preempted or killed phase resumes from its newest state; no other rule retries
    log:
        "logs/phases/{key}.log",
    benchmark:
        "logs/benchmarks/phases/{key}.tsv"
    resources:
        **job_resources(config, "train"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/train_phase.py"


# A run's view of its phases: an index (phases.json) naming each phase's directory results/phases/{key}.
rule run_index:
    input:
        states=run_phase_files,
    output:
        RUN_INDEX,
    params:
        phases=run_index_entries,
    log:
        "logs/runs/{run}/seed{seed}/index.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/run_index.py"
