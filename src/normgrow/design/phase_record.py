"""A finished phase's record, its state.json (normgrow.design.execution.PHASE_FILES["state"]), defined once.

The trainer writes it last, after the weights and the curves (normgrow.train.trainer); the next phase of the
run starts from it (`RunPosition`); export reads the placement and the active blocks from it
(normgrow.model.export), the paper's tables every field (normgrow.paper.results), and `normgrow phases
--other-code` the code that trained it. Records written before `code` existed read with no code (reported as
"unrecorded"). Imports neither torch nor transformers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from normgrow.design.curriculum import DataPosition

# What a phase counts, for itself (`phase_counters`) and for its run up to its end (`run_counters`): tokens read,
# tokens of distinct documents, tokens × active layers, optimizer updates.
COUNTERS = ("tokens", "unique_tokens", "active_layer_tokens", "steps")


@dataclass(frozen=True)
class RunPosition:
    """Where a run stands between two phases: updates so far, the data iterator, the run's counters."""

    global_step: int = 0
    data: DataPosition = field(default_factory=DataPosition)
    run_counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))

    def after(self, steps: int, data: DataPosition, counters: dict[str, int]) -> RunPosition:
        """The position after a phase of `steps` updates that left the iterator at `data` and counted
        `counters`."""
        return RunPosition(self.global_step + steps, data,
                           {k: self.run_counters[k] + counters[k] for k in COUNTERS})


@dataclass(frozen=True)
class PhaseRecord:
    """What one phase trained, where it left its run, what it measured last and what trained it.

    - `key`, `seed`, `phase`, `placement`: the phase (normgrow.design.curriculum.PhaseSpec) and its index in the run;
    - `active_blocks`, `active_layers`, `trainable_blocks`, `data_policy`: the curriculum entry it trained under;
    - `global_step`, `data`, `run_counters`: the run's position at its end (`position`);
    - `phase_counters`: COUNTERS over this phase alone;
    - `final_eval`: its last validation row (eval.csv's columns: step, global_step, ce, kd, kd_soft, ppl);
    - `wall_seconds`: the last job's wall time, from its start to the record (differs between reruns);
    - `ranks`: the processes that trained it; `code`: one normgrow.design.science_code.record per job that
      trained it, in order (a resumed phase has several).
    """

    key: str
    seed: int
    phase: int
    placement: str
    active_blocks: int
    active_layers: int
    trainable_blocks: list[int]
    data_policy: str
    global_step: int
    data: DataPosition
    phase_counters: dict[str, int]
    run_counters: dict[str, int]
    final_eval: dict[str, float]
    wall_seconds: float
    ranks: int
    code: list[dict[str, str]] = field(default_factory=list)

    @property
    def position(self) -> RunPosition:
        """Where the next phase of the run starts."""
        return RunPosition(self.global_step, self.data, dict(self.run_counters))

    def to_json(self) -> dict:
        """The record as state.json holds it (field order)."""
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict, source: str = "state.json") -> PhaseRecord:
        """A record from state.json's object; a ValueError naming `source` and the keys it lacks otherwise."""
        required = [f.name for f in fields(cls) if f.name != "code"]
        if not isinstance(value, dict) or (missing := [k for k in required if k not in value]):
            lacks = ", ".join(missing) if isinstance(value, dict) else "an object"
            raise ValueError(f"{source}: not a phase record (normgrow.train.trainer writes one per phase; it lacks "
                             f"{lacks})")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in known and k != "data"},
                   data=DataPosition(**value["data"]))

    @classmethod
    def read(cls, path: Path) -> PhaseRecord:
        """The record in `path`; FileNotFoundError, or ValueError for a file that is not JSON or not a record,
        each naming the file."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing; a phase directory (results/phases/{{key}}) holds state.json")
        try:
            value = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
        return cls.from_json(value, str(path))
