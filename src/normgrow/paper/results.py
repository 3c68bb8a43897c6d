"""Gather every phase's outputs into the tidy tables that the paper's tables and figures read.

- evals: one row per validation evaluation (run, seed, phase, step, global_step, ce, kd, ppl);
- phases: one row per phase (its spec, its final evaluation, the training CE of its first update, its and
  the run's token counters, and the code that trained it: `code_columns`);
- transitions: the loss around every block-appending transition (Table A4, transitions.py);
- boundary RMS and block removal: one row per snapshot, boundary or block of the diagnostics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from normgrow.design.execution import PHASE_FILES
from normgrow.design.phase_record import PhaseRecord


@dataclass(frozen=True)
class RunPhase:
    """One phase of one run and seed as the run sees it (an entry of its phases.json): where the
    (possibly shared) phase lives and the run's own curriculum entry."""

    run: str
    seed: int
    phase: int
    folder: Path
    trainable_blocks: tuple[int, ...]
    data_policy: str


def phase_entries(index_paths: list[Path]) -> list[RunPhase]:
    """Every phase of every run as its run sees it (RunPhase: an entry of its phases.json), from the runs' phase
    indexes (rule run_index), in order: a phase shared by several runs appears once per run."""
    phases = []
    for path in map(Path, index_paths):
        index = json.loads(path.read_text())
        phases += [RunPhase(index["run"], index["seed"], e["phase"], Path(e["dir"]), tuple(e["trainable_blocks"]),
                            e["data_policy"]) for e in index["phases"]]
    return phases


def collect_phases(entries: list[RunPhase]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read each phase's state.json and the eval.csv beside it. The curriculum entry (data policy,
    trainable blocks) is the run's own: a shared phase may have been trained under an equivalent
    one (`reset` at phase 0 is `continue`)."""
    eval_frames, phase_rows = [], []
    for entry in entries:
        record = PhaseRecord.read(entry.folder / PHASE_FILES["state"])
        key = {"run": entry.run, "seed": entry.seed, "phase": entry.phase}
        evals = pd.read_csv(entry.folder / PHASE_FILES["eval"])
        eval_frames.append(evals.assign(**key, placement=record.placement))
        row = {**key, "placement": record.placement, "active_blocks": record.active_blocks,
               "active_layers": record.active_layers,
               "trainable_blocks": " ".join(map(str, entry.trainable_blocks)),
               "data_policy": entry.data_policy, "global_step": record.global_step,
               **{k: record.final_eval[k] for k in ("ce", "kd", "kd_soft", "ppl")},
               "first_update_ce": first_update_ce(entry.folder),
               **{f"phase_{k}": v for k, v in record.phase_counters.items()},
               **{f"run_{k}": v for k, v in record.run_counters.items()},
               "wall_seconds": record.wall_seconds, **code_columns(record.code)}
        phase_rows.append(row)
    if not phase_rows:
        raise FileNotFoundError("no phase outputs to collect")
    columns = ["run", "seed", "phase", "placement"]
    evals = pd.concat(eval_frames, ignore_index=True)
    evals = evals[columns + [c for c in evals.columns if c not in columns]]
    return evals, pd.DataFrame(phase_rows)


def first_update_ce(folder: Path) -> float:
    """The training CE of a phase's first update (its train.csv's first row), where the phase starts: a
    run's phase 0 holds the run's start, which a short budget may measure instead of the placements
    (normgrow.paper.preconditions.start_gap). NaN where the phase logged no update."""
    path = folder / PHASE_FILES["train"]
    first = pd.read_csv(path, nrows=1) if path.is_file() and path.stat().st_size else pd.DataFrame()
    return float(first["ce"].iloc[0]) if "ce" in first and len(first) else float("nan")


# The code a phase records (normgrow.design.science_code.record, one per job that trained it), as columns.
CODE_COLUMNS = {"code_digest": "digest", "code_torch": "torch", "code_transformers": "transformers"}
UNRECORDED = "unrecorded"  # a phase trained before phases recorded their code


def code_columns(code: list[dict[str, str]]) -> dict[str, str]:
    """The code that trained a phase (its record's `code`), one column per item: each item's
    values in the order its jobs ran, joined by " + " when a resumed phase was trained by more than one."""
    columns = {}
    for column, item in CODE_COLUMNS.items():
        values = list(dict.fromkeys(str(job.get(item, UNRECORDED)) for job in code or [{}]))
        columns[column] = " + ".join(values)
    return columns


def read_metric(path: Path) -> pd.DataFrame:
    """A collected metrics table (rule collect_metrics), its code columns as the text they are: pandas
    would read a digest of digits alone as an integer (its leading zeros lost) and one of digits and a
    single `e` as a float (12e45), and the phases would then count as trained by other code. An empty
    frame when nothing was collected."""
    try:
        return pd.read_csv(path, dtype=dict.fromkeys(CODE_COLUMNS, str))
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def final_phases(phases: pd.DataFrame) -> pd.DataFrame:
    """The last phase of every (run, seed): the run's scheduled end point."""
    last = phases.groupby(["run", "seed"])["phase"].transform("max")
    return phases[phases["phase"] == last]


def final_ce_by_seed(phases: pd.DataFrame) -> pd.DataFrame:
    """Every run's final validation CE (its last phase's: `final_phases`), a row per seed and a column per run:
    the wide table the placement effects are formed from (normgrow.paper.stats.effects)."""
    return final_phases(phases).pivot(index="seed", columns="run", values="ce")


def collect_transitions(phases: pd.DataFrame, train_logs: dict[tuple[str, int, int], Path]) -> pd.DataFrame:
    """Table A4 rows: one per block-appending transition (a phase with more active blocks than the
    phase before it) of every run and seed. `train_logs` maps (run, seed, phase) to its train.csv."""
    from normgrow.paper.transitions import transition_metrics

    rows = []
    for (run, seed), group in phases.sort_values("phase").groupby(["run", "seed"]):
        group = group.set_index("phase")
        for p in group.index[1:]:
            if group.loc[p, "active_blocks"] <= group.loc[p - 1, "active_blocks"]:
                continue
            before = pd.read_csv(train_logs[(run, seed, p - 1)])["loss"].to_numpy()
            after = pd.read_csv(train_logs[(run, seed, p)])["loss"].to_numpy()
            rows.append({"run": run, "seed": seed, "phase": p, "placement": group.loc[p, "placement"],
                         "transition_step": int(group.loc[p - 1, "global_step"]),
                         **transition_metrics(before, after)})
    return pd.DataFrame(rows)


def collect_diagnostics(paths: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Boundary RMS statistics (one row per snapshot × boundary × token set; the rows of all real tokens
    also carry the max/median |scalar| columns `scalar_*` of normgrow.train.diagnostics, empty in files
    diagnosed before it) and block removal (one row per snapshot × block) from the per-phase diagnostics
    files."""
    rms_rows, removal_rows = [], []
    reports = [r for path in map(Path, paths) for r in json.loads(path.read_text())["checkpoints"]]
    for report in reports:
        key = {k: report[k] for k in ("run", "seed", "phase", "global_step", "placement")}
        for b in report["boundaries"]:
            for tokens in ("all", "structural", "regular"):
                rms_rows.append({**key, "boundary": b["boundary"], "tokens": tokens, **b[tokens]})
        for block in report.get("blocks", []):
            removal_rows.append({**key, **block})
    return pd.DataFrame(rms_rows), pd.DataFrame(removal_rows)


class NotBuilt(Exception):
    """A table or claim this configuration cannot build; the message says why."""


class Results:
    """Per-seed access to the collected results of one workflow run."""

    def __init__(self, phases: pd.DataFrame, transitions: pd.DataFrame | None = None,
                 removal: pd.DataFrame | None = None, config: dict | None = None, rms: pd.DataFrame | None = None):
        self.phases = phases
        self.final = final_phases(phases)
        self.runs = set(phases["run"])
        self.transitions = pd.DataFrame() if transitions is None else transitions
        self.removal = pd.DataFrame() if removal is None else removal
        self.rms = pd.DataFrame() if rms is None else rms
        self.config = config or {}

    def has(self, *runs: str) -> bool:
        return all(r in self.runs for r in runs)

    def require(self, *runs: str) -> None:
        """Raise NotBuilt naming the runs of `runs` this configuration did not build."""
        missing = [r for r in runs if r not in self.runs]
        if missing:
            raise NotBuilt(f"needs the runs {', '.join(missing)}")

    def final_metric(self, run: str, metric: str = "ce") -> pd.Series:
        return self.final[self.final["run"] == run].set_index("seed")[metric].sort_index()

    def final_ce(self) -> dict[str, pd.Series]:
        """Every run's final validation CE per seed (`final_metric`), by run: what the placement effects are
        formed from (normgrow.paper.stats.effects)."""
        return {run: self.final_metric(run) for run in dict.fromkeys(self.final["run"])}

    def first_update_ce(self, run: str) -> pd.Series:
        """The run's training CE at its first update (its phase 0's, per seed, NaNs dropped); empty for
        phases collected before it was recorded."""
        if "first_update_ce" not in self.phases:
            return pd.Series(dtype=float)
        return self.phase_metric(run, 0, "first_update_ce").dropna()

    def phase_metric(self, run: str, phase: int, metric: str = "ce") -> pd.Series:
        rows = self.phases[(self.phases["run"] == run) & (self.phases["phase"] == phase)]
        return rows.set_index("seed")[metric].sort_index()

    def phase_ce(self, phase: int) -> dict[str, pd.Series]:
        """Every run's validation CE per seed after its phase `phase` (`phase_metric`), by run."""
        return {run: self.phase_metric(run, phase) for run in dict.fromkeys(self.phases["run"])}
