"""Runs by role: what the tables, claims and figures look for, read from each run's placement and
the shape of its curriculum — never from the run's name, so renaming a run changes nothing.

A run's role is its placement, its curriculum role and its growth operator, written
`{placement}-{curriculum role}` for the paper's operator (random) and
`{placement}-{curriculum role}+{operator}` for another (normgrow.design.curriculum.Growth.label: zero,
zero-copy, copy, ramp{steps}), the same for every phase that appends blocks (a curriculum mixing
operators has no role). The curriculum role comes from its phases (K =
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

from dataclasses import dataclass

from normgrow.design.curriculum import Phase, run_phases

CURRICULUM_ROLES = ("joint", "joint-long", "joint-longer", "grow", "freeze", "grow-reset")
OTHER = "other:"  # the prefix of a run without a role in a frame by role


@dataclass(frozen=True)
class Role:
    """A run's role: its placement and its curriculum's role. In a frame by role its label is
    `{placement}-{curriculum}` (str), read back with `Role.parse`."""

    placement: str
    curriculum: str
    operator: str = "random"

    def __str__(self) -> str:
        return f"{self.placement}-{self.curriculum}" + ("" if self.operator == "random" else f"+{self.operator}")

    @classmethod
    def parse(cls, label: str) -> Role | None:
        """The role a frame label names (the curriculum role it ends with, before any `+operator`;
        no role is the end of another); None for a run without a role (`other:` prefix)."""
        if label.startswith(OTHER):
            return None
        name, _, operator = label.partition("+")  # "@" belongs to placements (mix-ln@B)
        for curriculum in CURRICULUM_ROLES:
            if name.endswith(f"-{curriculum}") and len(name) > len(curriculum) + 1:
                return cls(name[: -len(curriculum) - 1], curriculum, operator or "random")
        raise ValueError(f"{label!r} names no role ({{placement}}-{{{'|'.join(CURRICULUM_ROLES)}}}) and is not "
                         f"a run without one ({OTHER}…)")


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


def run_roles(config: dict) -> dict[str, Role]:
    """Every run with a role → its role. Two runs of the same role are refused (the tables would
    have to choose one)."""
    roles: dict[str, Role] = {}
    for run, spec in config["runs"].items():
        phases = run_phases(config, run)
        curriculum = curriculum_role(phases, config["student"]["blocks"])
        operators = {p.growth.label for p in phases if p.appended}
        if curriculum is None or len(operators) > 1:
            continue
        role = Role(spec["placement"], curriculum, operators.pop() if operators else "random")
        twin = next((other for other, r in roles.items() if r == role), None)
        if twin is not None:
            raise ValueError(f"runs {twin} and {run} both have the role {role} (placement {role.placement}, "
                             f"curriculum role {curriculum}): keep one, or give one another curriculum")
        roles[run] = role
    return roles


def by_role(frame, roles: dict[str, Role | str]):
    """`frame` (with a `run` column) with every run that has a role renamed to its role and every
    other run prefixed `other:`, so that no run without a role can pass for one."""
    if frame is None or frame.empty or "run" not in frame:
        return frame
    out = frame.copy()
    out["run"] = out["run"].map(lambda run: str(roles[run]) if run in roles else OTHER + run)
    return out


def has_role(run: str, curriculum: str, operator: str = "random") -> bool:
    """Whether `run` (a label in a frame by role) is some placement's run of role `curriculum` under
    growth operator `operator` (the paper's, random, unless given)."""
    role = Role.parse(run)
    return role is not None and role.curriculum == curriculum and role.operator == operator
