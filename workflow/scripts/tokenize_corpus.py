"""Tokenize every document on its own (its boundary token placed by data.boundary_position, cut to
max_length), streaming each split into Arrow; write the manifest."""

import json
from pathlib import Path

from transformers import AutoTokenizer

from normgrow.design.logs import job_log
from normgrow.train.data import boundary_id, read_texts, save_tokens, sha256_of, tokenize_corpus
from normgrow.train.outputs import write_json

with job_log(snakemake.log[0]):
    data = snakemake.params.data
    out = Path(snakemake.output.tokens)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(snakemake.input.tokenizer)
    boundary = boundary_id(tokenizer, data["boundary_token"])
    meta = {"boundary_id": boundary, "special_ids": sorted(set(tokenizer.all_special_ids)),
            "tokenizer_size": len(tokenizer), "max_length": data["max_length"],
            "boundary_position": data["boundary_position"],
            "diag_max_length": data["diag_max_length"] or data["max_length"],
            "corpus": json.loads(Path(snakemake.input.manifest).read_text()), "splits": {}}
    for path in snakemake.input.corpus:
        split = Path(path).stem
        limit = data["diag_max_length"] if split == "diag" and data["diag_max_length"] else data["max_length"]
        summary = meta["splits"][split] = {}
        save_tokens(tokenize_corpus(tokenizer, read_texts(path), boundary, limit, summary,
                                    position=data["boundary_position"]), out / split)
        summary["text_sha256"] = sha256_of(Path(path))
    write_json(out / "meta.json", meta)
    print(json.dumps(meta["splits"], indent=2))
