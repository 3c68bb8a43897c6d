"""How normgrow's CPU jobs share the cores with other work: waiting threads sleep soon.

torch runs its CPU kernels on OpenMP (GNU libgomp). A thread that reaches a barrier first spins
`GOMP_SPINCOUNT` times before it sleeps — 300,000 by default. On a machine where another process
holds one of the cores (a laptop, a test run, a second job), the thread that waits burns the
time slices the thread it waits for needs, and a 2-thread job slows down far more than its fair
share (docs/performance.md has the measured slowdowns). With a short spin the waiting thread yields its core
and the slowdown stays near the share the other process takes, for a small cost on idle cores;
both settings were measured in one run (docs/record.md, OpenMP's spin beside other work).

Importing this module sets `GOMP_SPINCOUNT` to `SPIN_COUNT` in the environment, unless the user
set it. libgomp reads it once, when torch is loaded, so the Snakefile (whose jobs inherit its
environment), the command line and the tests import this module before torch.
"""

from __future__ import annotations

import os

SPIN_COUNT = 2000
os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))
