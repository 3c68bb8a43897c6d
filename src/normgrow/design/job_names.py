"""A training job's name: what it trains, so that dry runs, Snakemake's errors, squeue and log files say which
run phases a job is (workflow/rules/train.smk names its rules and logs with it; `normgrow phases --jobs`).

Names decide no numbers: a module apart from normgrow.design.curriculum, so that renaming jobs changes no
phase's code digest (normgrow.design.science_code)."""

from __future__ import annotations

from normgrow.design.curriculum import PhaseGroup, PhaseTable

# A training job's name at most: the SLURM plugin makes it a directory name (logs/slurm/rule_{name}/), file names
# are at most 255 bytes.
JOB_NAME_LENGTH = 200


def sharers(table: PhaseTable, key: str) -> list[tuple[str, int, int]]:
    """(run, seed, phase index) of every run phase that is phase `key`, in config order."""
    return [(run, seed, p) for (run, seed), keys in table.runs.items() for p, k in enumerate(keys) if k == key]


def job_name(table: PhaseTable, group: PhaseGroup) -> str:
    """The name of the training job of `group` (its rule, workflow/rules/train.smk, and its log file): what it
    trains, then its id, `train_{runs}_seed{S}_phase{P}_{id}`, the runs sharing its phases joined by `+`, e.g.
    `train_post-grow+post-freeze+post-grow-reset_seed42_phase0_6ce5f782f7fd6dc6`. Dry runs, Snakemake's errors
    and squeue (the SLURM plugin sends `--comment rule_{name}`) show it. The phases of a group share their
    seed and index (both are part of the stream key). Runs past JOB_NAME_LENGTH characters are counted
    (`+3more`): the plugin's log directory logs/slurm/rule_{name}/ must stay a valid file name."""
    phases = [phase for key in group.keys for phase in sharers(table, key)]
    runs = list(dict.fromkeys(run for run, _, _ in phases))
    seeds = "+".join(str(seed) for seed in sorted({seed for _, seed, _ in phases}))
    indexes = "+".join(str(p) for p in sorted({p for _, _, p in phases}))
    tail = f"_seed{seeds}_phase{indexes}_{group.id}"
    room = JOB_NAME_LENGTH - len("train_") - len(tail)
    shown = next(count for count in range(len(runs), 0, -1)
                 if count == 1 or len(joined_runs(runs, count)) <= room)
    return f"train_{joined_runs(runs, shown)}{tail}"


def job_names(table: PhaseTable, size: int) -> dict[str, str]:
    """The training job's name (job_name) of every phase, by key, in groups of at most `size`."""
    return {key: job_name(table, group) for group in table.groups(size) for key in group.keys}


def joined_runs(runs: list[str], shown: int) -> str:
    """The first `shown` of `runs` joined by `+`, and how many more there are (`+3more`)."""
    return "+".join(runs[:shown]) + (f"+{len(runs) - shown}more" if shown < len(runs) else "")
