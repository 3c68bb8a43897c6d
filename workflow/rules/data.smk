rule corpus:
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
        "benchmarks/data/corpus.tsv"
    resources:
        **job_resources(config, "data"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/corpus.py"


rule tokenizer:
    input:
        train="results/data/corpus/train.jsonl",
    output:
        directory("results/data/tokenizer"),
    params:
        tokenizer=config["tokenizer"],
        boundary_token=config["data"]["boundary_token"],
        teacher=config["teacher"]["name"],
    log:
        "logs/data/tokenizer.log",
    benchmark:
        "benchmarks/data/tokenizer.tsv"
    resources:
        **job_resources(config, "data"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/tokenizer.py"


rule tokenize:
    input:
        tokenizer="results/data/tokenizer",
        corpus=expand("results/data/corpus/{split}.jsonl", split=["train", "valid", "diag"]),
        manifest="results/data/corpus/manifest.json",
    output:
        tokens=directory("results/data/tokens"),
    params:
        data=config["data"],
    log:
        "logs/data/tokenize.log",
    benchmark:
        "benchmarks/data/tokenize.tsv"
    resources:
        **job_resources(config, "data"),
    conda:
        "../../envs/normgrow.yaml"
    script:
        "../scripts/tokenize.py"
