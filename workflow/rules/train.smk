# Each distinct phase (normgrow.design.curriculum.PhaseSpec) trains once, in a directory named by its key;
# every run whose curriculum starts with it reads it there. Only the key (what determines the result)
# and the snapshots kept are tracked: execution settings (threads, ranks, train.resume_every,
# train.loss_chunk, ...) are read from the config by the job and rerun nothing.
#
# Phases that read one batch stream (normgrow.design.curriculum.stream_key) train side by side in one job
# when resources.train.group_size > 1: one teacher forward per batch for all of them (a rule
# train_group_{id} per group, below). Their outputs are bit-identical either way.
#
# Retries (`retries: 3`, the only rule that retries): a retry resumes the phase only after a stop — SIGTERM
# (a state saved, exit 143) or a kill that left no error record — from its newest state, and restores its
# outputs from the finished record when the kill came after it finished (a TIMEOUT: Snakemake deleted
# them). After a Python exception (an unsupported teacher, a NaN), recorded in the phase's resume
# directory, a retry fails at once with that exception. The job reads its attempt from the resource
# `attempt` (Snakemake passes attempt to resources, not to a script); attempt 1 (a fresh run, --forcerun)
# drops both records and trains (normgrow.train.attempts, docs/cluster.md "Time limits").
#
# What every training job reads and is handed, defined once for the rule of a phase alone and the rules of
# groups (a group's rule names its phases, which Snakemake cannot express as one rule's wildcard outputs).
TRAIN_INPUTS = {"teacher": teacher_input(), "teacher_check": "results/teacher/check.json",
                "tokens": "results/data/tokens"}
TRAIN_PARAMS = {"teacher": teacher_param,
                "phase_dir": lambda wildcards: PHASE_DIR}  # a function: a string would be formatted with wildcards


rule train_phase:
    input:
        previous=lambda wildcards: previous_files(wildcards.key),
        **TRAIN_INPUTS,
    output:
        **phase_outputs("{key}"),
    wildcard_constraints:
        # a grouped phase is made by its group's rule
        key=f"(?!{'|'.join(GROUPED)}){KEY_PATTERN}" if GROUPED else KEY_PATTERN,
    params:
        phases=lambda wildcards: [wildcards.key],
        snapshots=lambda wildcards: PHASES.snapshots[wildcards.key],  # tracked: a rerun trigger
        **TRAIN_PARAMS,
    threads: config["threads"]
    retries: 3  # after a stop (SIGTERM, a kill) only: see the comment above; no other rule retries
    log:
        "logs/phases/{key}.log",
    benchmark:
        "logs/benchmarks/phases/{key}.tsv"
    resources:
        **job_resources(config, "train"),
        attempt=lambda wildcards, attempt: attempt,  # read by the job: what a retry does (comment above)
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/train_phase.py"


for group in GROUPS:

    rule:
        name:
            f"train_group_{group.id}"
        input:
            previous=sorted({f for key in group.keys for f in previous_files(key)}),
            **TRAIN_INPUTS,
        output:
            [path for key in group.keys for path in phase_outputs(key).values()],
        params:
            phases=list(group.keys),
            snapshots=[PHASES.snapshots[key] for key in group.keys],  # tracked: a rerun trigger
            **TRAIN_PARAMS,
        threads: config["threads"]
        retries: 3
        log:
            f"logs/groups/{group.id}.log",
        benchmark:
            f"logs/benchmarks/groups/{group.id}.tsv"
        resources:
            **job_resources(config, "train", students=len(group.keys)),
            attempt=lambda wildcards, attempt: attempt,
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
