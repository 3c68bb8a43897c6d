"""Load the corpus through `datasets`, split it deterministically, write the splits (as they are
read) and a manifest."""

import json
from pathlib import Path

from normgrow.design.config import built_runs, train_docs_required
from normgrow.design.logs import job_log
from normgrow.train.data import load_corpus, split_corpus
from normgrow.train.outputs import write_json

with job_log(snakemake.log[0]):
    data = snakemake.params.data
    corpus = load_corpus(data["source"])
    files = {name: open(snakemake.output[name], "w") for name in ("valid", "diag", "train")}
    try:
        counts = split_corpus(corpus, data["split_seed"], data["valid_docs"], data["diag_docs"],
                              snakemake.params.train_docs,
                              lambda split, text: files[split].write(json.dumps({"text": text}) + "\n"))
    finally:
        for f in files.values():
            f.close()
    # a check, not a param (adding a run reruns nothing), of the runs built: one left out reads nothing
    required = train_docs_required(snakemake.config, built_runs(snakemake.config))
    if counts["documents"]["train"] < required:
        raise SystemExit(f"the corpus yields {counts['documents']['train']} training documents, but the runs "
                         f"built read {required}: lower train.phase_steps or train.batch_size, or use a "
                         f"larger corpus (data.source)")
    manifest = {"source": data["source"], "split_seed": data["split_seed"], **counts}
    write_json(Path(snakemake.output.manifest), manifest)
    print(json.dumps(manifest, indent=2))
