rule trace:
    """Pre-flight for a cluster run: the training step, the teacher check and the diagnostics traced on
    fake tensors at the config's real shapes over the training job's GPUs (normgrow.cluster.trace), on the
    submitting host in about a minute; fails when a traced peak exceeds 90% of resources.train.gpu_gb."""
    input:
        teacher=teacher_input(),
    output:
        "results/trace/trace.json",
    params:
        teacher=teacher_source,
        **hub_teacher_params(),  # a rerun trigger: teacher_source is none
        # the science the trace reads (a change reruns it); the execution settings it reads
        # (resources, train.loss_chunk, train.activation_checkpointing) come from the config
        student=config["student"],
        objective=config["objective"],
        dtype=config["teacher"]["dtype"],
        data={key: config["data"][key] for key in ("max_length", "diag_docs", "diag_max_length")},
        train={key: config["train"][key] for key in TRAIN_SCIENCE if key != "phase_steps"},
    log:
        "logs/trace.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/trace.py"
