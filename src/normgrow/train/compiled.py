"""Compiled graphs of a phase: flex attention (compiled by transformers on its first call) and
`train.compile`'s layers run through Dynamo, which compiles a new graph for each new set of guards
(a new width, training or evaluation, inference mode) up to its recompile limit (8 per function in
torch 2.13, `torch._dynamo.config.recompile_limit`) and past it, by default, runs the function
eagerly without an error: for flex attention that is the full score matrix of a row (32 heads ×
65,536² positions at the paper's one-row batch), an out-of-memory hours into a phase.

Under `strict_compilation` the limit is an error (`fail_on_recompile_limit_hit`: Dynamo raises
FailOnRecompileLimitHit, which names the limit) and the graphs compiled are counted and logged."""

from __future__ import annotations

from contextlib import contextmanager


def compiled_graphs() -> int:
    """Graphs Dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


@contextmanager
def strict_compilation(log):
    """Dynamo's recompile limit an error inside the context; on leaving it, the number of graphs compiled
    inside it is printed to `log` (if any were)."""
    from torch._dynamo import config

    before = compiled_graphs()
    try:
        with config.patch(fail_on_recompile_limit_hit=True):
            yield
    finally:
        graphs = compiled_graphs() - before
        if graphs:
            print(f"compiled graphs: {graphs} (Dynamo's recompile limit, {config.recompile_limit} per function, is "
                  "an error here: never a silent eager fallback)", file=log, flush=True)
