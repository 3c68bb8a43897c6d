"""Train the byte-level BPE tokenizer on the training split, or take the teacher's tokenizer."""

from normgrow.design.logs import job_log
from normgrow.train.data import boundary_id, read_texts, train_tokenizer

with job_log(snakemake.log[0]):
    settings = snakemake.params.tokenizer
    boundary = snakemake.params.boundary_token
    if settings["train"]:
        tokenizer = train_tokenizer(read_texts(snakemake.input.train), settings["vocab_size"], boundary)
    else:
        from transformers import AutoTokenizer

        teacher = snakemake.params.hub_teacher  # the config check: tokenizer.train false needs teacher.name
        tokenizer = AutoTokenizer.from_pretrained(teacher["name"], revision=teacher["revision"])
    print(f"tokenizer: {len(tokenizer)} tokens, boundary {boundary!r} = {boundary_id(tokenizer, boundary)}")
    tokenizer.save_pretrained(snakemake.output[0])
