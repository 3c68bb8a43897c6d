"""Check a named teacher from its config and tokenizer alone (normgrow.train.teacher.check_teacher_files)."""

import json
from pathlib import Path

from normgrow.design.logs import job_log
from normgrow.train.outputs import write_json
from normgrow.train.teacher import check_teacher_files

with job_log(snakemake.log[0]):
    try:
        report = check_teacher_files(snakemake.config)
    except ValueError as error:  # ConfigError too: a message naming the key, in the log and on the console
        message = f"teacher check failed for {snakemake.config['teacher']['name']}: {error}"
        print(message)
        raise SystemExit(message) from None
    print(json.dumps(report, indent=2))
    write_json(Path(snakemake.output[0]), report)
