rule corpus:
    input:
        **teacher_files_checked(),
    output:
        train="results/data/corpus/train.jsonl",
        valid="results/data/corpus/valid.jsonl",
        diag="results/data/corpus/diag.jsonl",
        manifest="results/data/corpus/manifest.json",
    params:
        data=config["data"],
        train_docs=corpus_train_docs(),
    log:
        "logs/data/corpus.log",
    benchmark:
        "logs/benchmarks/data/corpus.tsv"
    resources:
        **job_resources(config, "data"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/corpus.py"


rule build_tokenizer:
    input:
        train="results/data/corpus/train.jsonl",
    output:
        directory("results/data/tokenizer"),
    params:
        tokenizer=config["tokenizer"],
        boundary_token=config["data"]["boundary_token"],
        teacher=config["teacher"]["name"],
        **hub_teacher_params(),  # the teacher's tokenizer at teacher.revision (tokenizer.train: false)
    log:
        "logs/data/build_tokenizer.log",
    benchmark:
        "logs/benchmarks/data/build_tokenizer.tsv"
    resources:
        **job_resources(config, "data"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/build_tokenizer.py"


rule tokenize_corpus:
    input:
        tokenizer="results/data/tokenizer",
        corpus=expand("results/data/corpus/{split}.jsonl", split=["train", "valid", "diag"]),
        manifest="results/data/corpus/manifest.json",
    output:
        tokens=directory("results/data/tokens"),
    params:
        data=config["data"],
    log:
        "logs/data/tokenize_corpus.log",
    benchmark:
        "logs/benchmarks/data/tokenize_corpus.tsv"
    resources:
        **job_resources(config, "data"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/tokenize_corpus.py"
