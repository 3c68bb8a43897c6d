"""The specification: the validated config and its schema, which keys are science or execution, the
curricula and each phase's typed spec and key, the learning-rate schedule, which code trained a
phase. Imports neither torch nor transformers (a test checks it): the workflow's DAG
(`snakemake -n`) and the paper's analysis import this room."""
