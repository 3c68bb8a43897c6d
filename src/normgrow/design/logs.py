"""Route a job's stdout and stderr (progress bars included) to its Snakemake log file."""

from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def job_log(path: str | None):
    if path is None:
        yield sys.stderr
        return
    with open(path, "w", buffering=1) as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        yield log
