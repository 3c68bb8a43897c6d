rule trace:
    """Pre-flight for a cluster run: the training step, the teacher check and the diagnostics traced on
    fake tensors at the config's real shapes over the training job's GPUs (normgrow.trace), on the
    submitting host in about a minute; fails when a traced peak exceeds 90% of resources.train.gpu_gb."""
    input:
        teacher=teacher_input(),
    output:
        "results/trace/trace.json",
    params:
        teacher=teacher_param,
        **hub_teacher_params(),  # a rerun trigger: teacher_param is none
    log:
        "logs/trace.log",
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/trace.py"
