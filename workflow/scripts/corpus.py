"""Load the corpus through `datasets`, split it deterministically, write the splits and a manifest."""

import json
from pathlib import Path

from normgrow.data import load_corpus, split_corpus
from normgrow.logs import job_log

with job_log(snakemake.log[0]):
    data = snakemake.params.data
    corpus = load_corpus(data["source"])
    splits, counts = split_corpus(corpus, data["split_seed"], data["valid_docs"], data["diag_docs"],
                                  snakemake.params.train_docs)
    required = snakemake.params.required_docs
    if len(splits["train"]) < required:
        raise SystemExit(f"the corpus yields {len(splits['train'])} training documents, but the configured "
                         f"runs read {required}: lower train.phase_steps or train.batch_size, or use a "
                         f"larger corpus (data.source)")
    for name, texts in splits.items():
        with open(snakemake.output[name], "w") as f:
            for text in texts:
                f.write(json.dumps({"text": text}) + "\n")
    manifest = {"source": data["source"], "split_seed": data["split_seed"], **counts,
                "documents": {name: len(texts) for name, texts in splits.items()}}
    Path(snakemake.output.manifest).write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps(manifest, indent=2))
