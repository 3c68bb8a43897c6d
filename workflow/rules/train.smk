# Each distinct phase (normgrow.design.curriculum.PhaseSpec) trains once, in a directory named by its key;
# every run whose curriculum starts with it reads it there. Only the key (what determines the result)
# and the snapshots kept are tracked: execution settings (threads, ranks, train.resume_every,
# train.loss_chunk, ...) are read from the config by the job and rerun nothing.
#
# One rule per training job (normgrow.design.curriculum.PhaseGroup; Snakemake cannot name a variable number
# of phases by wildcards): a phase alone (id: its key), or, when resources.train.group_size > 1, phases that
# read one batch stream (normgrow.design.curriculum.stream_key) side by side, one teacher forward per batch
# for all of them (id: a digest of their keys). Their outputs are bit-identical either way. The rule and its
# log are named for what the job trains, train_{runs}_seed{S}_phase{P}_{id} (normgrow.design.job_names), so that a
# dry run, squeue (the SLURM plugin's --comment rule_{name}) and Snakemake's errors say it; neither name is a
# rerun trigger. `python -m normgrow.cli phases CONFIGS --jobs` and `snakemake --list-rules` name them all.
#
# Retries (`retries: 3`, the only rule that retries): a retry resumes the phase only after a stop — SIGTERM
# (a state saved, exit 143) or a kill that left no error record — from its newest state, and restores its
# outputs from the finished record when the kill came after it finished (a TIMEOUT: Snakemake deleted
# them). After a Python exception (an unsupported teacher, a NaN), recorded in the phase's resume
# directory, a retry fails at once with that exception. The job reads its attempt from the resource
# `attempt` (Snakemake passes attempt to resources, not to a script); attempt 1 (a fresh run, --forcerun)
# drops both records and trains (normgrow.train.attempts, docs/cluster.md "Time limits").
# Code: a phase retrains when the digest of the package's phase code changes (its param `code`,
# normgrow.design.science_code: the code as Python parses it, comments and docstrings out), not when a
# file is edited: profiles/default turns Snakemake's `code` trigger (a rule script newer than the
# outputs) off, so that a comment, a docstring, an edited rule script or a fresh clone retrains nothing.
for group in GROUPS:
    rule:
        name:
            job_name(PHASES, group)
        input:
            previous=sorted({f for key in group.keys for f in previous_files(key)}),
            teacher=teacher_input(),
            teacher_check="results/teacher/check.json",
            tokens="results/data/tokens",
        output:
            [path for key in group.keys for path in phase_outputs(key).values()],
        params:
            phases=list(group.keys),
            # tracked: a rerun trigger (a phase alone's as one number, as it was before phases shared a rule)
            snapshots=[PHASES.snapshots[key] for key in group.keys] if len(group.keys) > 1 else PHASES.snapshots[group.id],
            teacher=teacher_source,
            phase_dir=lambda wildcards: PHASE_DIR,  # a function: a string would be formatted with wildcards
            code=PHASE_CODE,  # what decides a rerun on code: the phase code's digest (comment above)
        threads: config["threads"]
        retries: 3  # after a stop (SIGTERM, a kill) only: see the comment above; no other rule retries
        log:
            f"logs/train/{job_name(PHASES, group).removeprefix('train_')}.log",
        benchmark:
            f"logs/benchmarks/train/{group.id}.tsv"
        resources:
            **job_resources(config, "train", students=len(group.keys)),
            attempt=lambda wildcards, attempt: attempt,  # read by the job: what a retry does (comment above)
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
