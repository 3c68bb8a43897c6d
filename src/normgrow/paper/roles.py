"""Runs by role: what the tables, claims and figures look for, read from each run's placement and
the shape of its curriculum — never from the run's name, so renaming a run changes nothing.

A run's role is `{placement}-{curriculum role}`; the curriculum role comes from its phases (K =
student.blocks; "continue" data unless stated, every phase on the same LR schedule shape):
- joint: one phase, all K blocks active and trained;
- joint-long / joint-longer: joint followed by one / two phases of all K blocks on fresh data (the
  budget controls: active-layer tokens, total tokens);
- grow: K phases activating blocks 1, 2, …, K, all active blocks trained;
- freeze: the same, training only the newest block;
- grow-reset: grow with the data iterator reset at every phase;
every phase restarting its LR schedule (`lr_restart`, the default).
A curriculum of any other shape has no role: its runs are collected and reported in the phase
tables, but no paper table or claim picks them.
"""

from __future__ import annotations

from normgrow.curriculum import Phase, run_phases


def curriculum_role(phases: tuple[Phase, ...], blocks: int) -> str | None:
    """The role of a curriculum of `phases` in a student of `blocks` blocks (see the module), or None."""
    active = [p.active_blocks for p in phases]
    trainable = {p.trainable for p in phases[1:]}
    if any(p.schedule_offset for p in phases):  # lr_restart: false — not one of the paper's protocols
        return None
    if active == [blocks] * len(phases) and all(p.trainable == "all" for p in phases):
        if len(phases) == 1:
            return "joint"
        if all(p.data == "fresh" for p in phases[1:]):
            return {2: "joint-long", 3: "joint-longer"}.get(len(phases))
        return None
    if active == list(range(1, blocks + 1)) and len(phases) > 1:
        data = {p.data for p in phases[1:]}
        if trainable == {"all"} and data == {"continue"}:
            return "grow"
        if trainable == {"newest"} and data == {"continue"}:
            return "freeze"
        if trainable == {"all"} and data == {"reset"}:
            return "grow-reset"
    return None


def run_roles(config: dict) -> dict[str, str]:
    """Every run with a role → its role. Two runs of the same role are refused (the tables would
    have to choose one)."""
    roles: dict[str, str] = {}
    for run, spec in config["runs"].items():
        role = curriculum_role(run_phases(config, run), config["student"]["blocks"])
        if role is None:
            continue
        key = f"{spec['placement']}-{role}"
        twin = next((other for other, r in roles.items() if r == key), None)
        if twin is not None:
            raise ValueError(f"runs {twin} and {run} both have the role {key} (placement {spec['placement']}, "
                             f"curriculum role {role}): keep one, or give one another curriculum")
        roles[run] = key
    return roles


OTHER = "other:"  # the prefix of a run without a role in a frame by role


def by_role(frame, roles: dict[str, str]):
    """`frame` (with a `run` column) with every run that has a role renamed to its role and every
    other run prefixed `other:`, so that no run without a role can pass for one."""
    if frame is None or frame.empty or "run" not in frame:
        return frame
    out = frame.copy()
    out["run"] = out["run"].map(lambda run: roles.get(run, OTHER + run))
    return out


def has_role(run: str, curriculum: str) -> bool:
    """Whether `run` (a name in a frame by role) is some placement's run of role `curriculum`."""
    return not run.startswith(OTHER) and run.endswith(f"-{curriculum}")
