# With teacher.pretrain.snapshots = n, the teacher is also saved after n evenly spaced updates (its formation
# along training, probed by probe_teacher_snapshots; configs/formation.yaml).
TEACHER_SNAPSHOTS = (config["teacher"].get("pretrain") or {}).get("snapshots", 0) if not config["teacher"]["name"] else 0


# A named teacher (hub id or local directory) checked from its config and tokenizer alone, on the submitting host,
# before the corpus job (which waits for it): its family and boundary token, where the dry run could not read
# them (a hub id not in the cache). Nothing for a teacher pretrained here.
rule check_teacher_files:
    output:
        "results/teacher/files.json",
    params:
        **hub_teacher_params(),  # a rerun trigger: another teacher or snapshot is checked again
        boundary_token=config["data"]["boundary_token"],
        teacher_tokenizer=not config["tokenizer"]["train"],
    log:
        "logs/teacher/check_files.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/check_teacher_files.py"


rule pretrain_teacher:
    input:
        tokenizer="results/data/tokenizer",
        tokens="results/data/tokens",
    output:
        model=directory("results/teacher/model"),
        **({"snapshots": directory("results/teacher/snapshots")} if TEACHER_SNAPSHOTS else {}),
    params:
        pretrain=pretrain_recipe(config),
        seed=pretrain_seed(config),
        document_order=DOCUMENT_ORDER,
    threads: config["teacher"]["pretrain"]["threads"] if config["teacher"].get("pretrain") else 1
    log:
        "logs/teacher/pretrain.log",
    benchmark:
        "logs/benchmarks/teacher/pretrain.tsv"
    resources:
        **job_resources(config, "model"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/pretrain_teacher.py"


rule check_teacher:
    input:
        teacher=teacher_input(),
        tokenizer="results/data/tokenizer",
        tokens="results/data/tokens",
    output:
        "results/teacher/check.json",
    params:
        teacher=teacher_source,
        **hub_teacher_params(),  # a rerun trigger: teacher_source is none
        dtype=config["teacher"]["dtype"],
        min_margin_nats=config["teacher"]["min_margin_nats"],
    threads: config["threads"]
    log:
        "logs/teacher/check.log",
    benchmark:
        "logs/benchmarks/teacher/check.tsv"
    resources:
        **job_resources(config, "model"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/check_teacher.py"


# The teacher's massive activations on the diagnostic batch (normgrow.train.probe): per layer, max/median and
# structural/regular token RMS and the attention on structural tokens; the report's preconditions.
rule probe_teacher:
    input:
        teacher=teacher_input(),
        tokens="results/data/tokens",
    output:
        "results/teacher/probe.json",
    params:
        teacher=teacher_source,
        **hub_teacher_params(),  # a rerun trigger: teacher_source is none
        dtype=config["teacher"]["dtype"],
    threads: config["threads"]
    log:
        "logs/teacher/probe.log",
    benchmark:
        "logs/benchmarks/teacher/probe.tsv"
    resources:
        **job_resources(config, "model"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/probe_teacher.py"


# The probe on every snapshot of the teacher's pretraining (teacher.pretrain.snapshots), with its validation CE
# there: how the massive activations form along training.
if TEACHER_SNAPSHOTS:

    rule probe_teacher_snapshots:
        input:
            snapshots="results/teacher/snapshots",
            tokens="results/data/tokens",
        output:
            "results/teacher/probe_snapshots.json",
        params:
            steps=snapshot_steps(config["teacher"]["pretrain"]["steps"], TEACHER_SNAPSHOTS),
            dtype=config["teacher"]["dtype"],
            batch_size=config["train"]["batch_size"],
            chunk=config["train"]["loss_chunk"],
        threads: config["threads"]
        log:
            "logs/teacher/probe_snapshots.log",
        benchmark:
            "logs/benchmarks/teacher/probe_snapshots.tsv"
        resources:
            **job_resources(config, "model"),
        conda:
            "../../envs/normgrow.yaml"
        script:
            "../scripts/probe_teacher_snapshots.py"
