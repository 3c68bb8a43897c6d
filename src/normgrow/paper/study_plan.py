"""What a study runs (workflow/study.smk): its scales, each the whole workflow on the embedded default with the
study's overrides in its own directory, and what the study copies out of each.

A study config (configs/study.yaml and the other study configs under configs/) has one `study` key:

- `name`: the results directory, results/{name}/;
- `scales`: scale → the overrides of the embedded default that make it, in the order the scales run;
- `seeds`, `build`: the seeds and runs every scale trains; `common`: overrides every scale shares;
- `axis` (effects): what the placement effects are drawn against (normgrow.paper.study.AXES);
- `analysis`: what the last rule reads — `effects` (the 2 × 2 per scale, normgrow.paper.study),
  `calibration` (joint runs over a grid of settings, normgrow.paper.calibration) or `formation`
  (structural-token scale along training, normgrow.paper.formation);
- `shared_teacher`: one teacher pretrained once (in results/{name}/teacher/) and read by every scale as a
  local teacher with its own tokenizer — so no scale may change what it is built from (and no scale is
  named `teacher`, that teacher's directory).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

from normgrow.design.config import merge
from normgrow.paper.study import AXES

ANALYSES = ("effects", "calibration", "formation")
TEACHER_INPUTS = {"teacher", "data", "tokenizer"}  # what a shared teacher is built from


@dataclass(frozen=True)
class StudyPlan:
    """One study config's `study` key, checked (module docstring)."""

    name: str
    scales: dict[str, dict]
    seeds: list
    build: list
    common: dict
    axis: str = "student_parameters"
    analysis: str = "effects"
    shared_teacher: bool = False

    @classmethod
    def from_config(cls, study: dict) -> StudyPlan:
        """The plan of a config's `study` key; an unknown axis or analysis, or a scale that changes a shared
        teacher's inputs, is refused by its key."""
        plan = cls(name=study["name"], scales=dict(study["scales"]), seeds=list(study["seeds"]),
                   build=list(study["build"]), common=dict(study.get("common", {})),
                   axis=study.get("axis", "student_parameters"), analysis=study.get("analysis", "effects"),
                   shared_teacher=bool(study.get("shared_teacher", False)))
        if plan.axis not in AXES:
            raise ValueError(f"study.axis {plan.axis!r} is not one of {', '.join(AXES)}")
        if "teacher" in plan.scales:
            raise ValueError("study.scales.teacher: the name is the shared teacher's directory; "
                             "name the scale otherwise")
        if plan.analysis not in ANALYSES:
            raise ValueError(f"study.analysis {plan.analysis!r} is not one of {', '.join(ANALYSES)}")
        if plan.shared_teacher:
            for scale, overrides in plan.scales.items():
                if clash := sorted(TEACHER_INPUTS & set(overrides)):
                    raise ValueError(f"study.scales.{scale} sets {', '.join(clash)}, but study.shared_teacher: true "
                                     "pretrains one teacher for every scale: set them in study.common")
        return plan

    @property
    def out(self) -> str:
        """The study's results directory (relative to the working directory)."""
        return f"results/{self.name}"

    @property
    def teacher(self) -> str:
        """The shared teacher's model directory, copied out of its own workflow run."""
        return f"{self.out}/teacher.model"

    @property
    def nested_target(self) -> str:
        """What each scale's workflow builds: the 2 × 2's report, or for formation the teacher's probes
        along pretraining and the diagnosed snapshots."""
        return "results/formation.json" if self.analysis == "formation" else "results/paper"

    @property
    def scale_outputs(self) -> dict[str, tuple[str, str]]:
        """What the study copies out of a scale's run: output name → (suffix of results/{name}/{scale}.*,
        the file in the scale's directory)."""
        if self.analysis == "formation":
            return {"formation": ("formation.json", "results/formation.json")}
        return {"phases": ("phases.csv", "results/metrics/phases.csv"),
                "check": ("check.json", "results/teacher/check.json")}

    def teacher_overrides(self) -> dict:
        """The common settings; under a shared teacher, that teacher (absolute path) and its tokenizer."""
        common = copy.deepcopy(self.common)
        if self.shared_teacher:
            merge(common, {"teacher": {"name": os.path.abspath(self.teacher)}, "tokenizer": {"train": False}})
        return common

    def scale_overrides(self, scale: str) -> dict:
        """What the scale changes in the embedded default: seeds, runs, no diagnostics (unless the scale asks
        for them), the common settings, its own."""
        return merge({"seeds": self.seeds, "build": self.build, "diagnostics": {"runs": []},
                      **self.teacher_overrides()}, copy.deepcopy(self.scales[scale]))

    def merged_config(self, scale: str, default: dict) -> dict:
        """The scale's whole config: the embedded default (`default`, config.yaml) under its overrides."""
        return merge(copy.deepcopy(default), self.scale_overrides(scale))
