"""The paper's regime, measured on the run actually made: the conditions a miniature must keep to
speak to the paper's claims (necessary, not sufficient: normgrow.paper.preconditions has the rest).

Each property is computed from the config, the teacher check, the token metadata and the logged
phases, and set beside the paper's value (from reference.yaml, `regime`). A property with a
condition is *in* or *out* of regime; the others are shown for comparison only:

- student depth / teacher depth S/T = K·L / T (paper 9 / 36 = 0.25): in regime when ≤ 1/3;
- student / teacher parameters, both counting embedding and head (paper 3.09B / 8.19B);
- teacher ahead of every run: min over runs and seeds of (final validation CE − teacher validation
  CE) (paper: an 8B teacher against 3B students, far ahead; no number given): in regime when
  ≥ 0.3 nats;
- KD soft / CE at the end of phase 0 and at the run's end, the grow runs (paper 3.0155 / 2.9802
  = 1.012 at phase 0), and KL at the same points (not reported by the paper);
- warm-up updates per phase = max(1, round(train.warmup_fraction × phase steps)) (paper 750,
  1.5% of 50,000; post-norm needs warm-up, Xiong et al. 2020): in regime when ≥ 20;
- tokens per student parameter: the unique tokens a grow run reads ÷ the student's parameters
  (paper 3.11B / 3.09B ≈ 1.0): in regime when ≥ 0.5, within a factor of two of the paper's (below
  it both placements are early in training, where post-norm's slower start decides the ranking;
  docs/miniature.md measures the effects along this axis);
- unique-token coverage: the unique tokens a grow run reads ÷ the tokens of the training split
  (paper ≈ 0.3: 3.11B of the ~10B-token FineWeb-Edu sample).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pandas as pd

from normgrow.cluster.plan import student_parameters
from normgrow.design.schedule import warmup_steps

MAX_DEPTH_RATIO = 1 / 3
MIN_TEACHER_LEAD = 0.3  # nats
MIN_WARMUP = 20  # updates per phase
MIN_TOKENS_PER_PARAMETER = 0.5


@dataclass(frozen=True)
class Property:
    name: str
    paper: str
    ours: str
    in_regime: bool | None  # None: shown for comparison, no condition
    condition: str = ""


def regime(config: dict, teacher: dict, data: dict, phases: pd.DataFrame, paper: dict) -> list[Property]:
    """The regime properties of this run (see the module docstring). `teacher` is the teacher check,
    `data` the token metadata, `phases` the collected phase rows, `paper` the reference's `regime`."""
    student_layers = config["student"]["blocks"] * config["student"]["layers_per_block"]
    depth = student_layers / teacher["num_hidden_layers"]
    student = student_parameters(SimpleNamespace(**teacher), config["student"]["blocks"],
                                 config["student"]["layers_per_block"])["total"]
    last = phases[phases["phase"] == phases.groupby(["run", "seed"])["phase"].transform("max")]
    lead = last["ce"] - teacher["validation_ce"]
    worst = last.loc[lead.idxmin()]
    warmup = warmup_steps(config["train"]["phase_steps"], config["train"]["warmup_fraction"])
    out = [
        Property("student depth / teacher depth (S/T)", paper["depth_ratio"],
                 f"{student_layers} / {teacher['num_hidden_layers']} = {depth:.2f}", depth <= MAX_DEPTH_RATIO,
                 f"≤ {MAX_DEPTH_RATIO:.2f}"),
        Property("student / teacher parameters", paper["parameters"],
                 f"{student / 1e6:.2f}M / {teacher['parameters'] / 1e6:.2f}M = {student / teacher['parameters']:.2f}",
                 None),
        Property("teacher ahead of every run: min (run CE − teacher CE)", paper["teacher_lead"],
                 f"{lead.min():+.3f} ({worst['run']}; teacher {teacher['validation_ce']:.3f})",
                 bool(lead.min() >= MIN_TEACHER_LEAD), f"≥ {MIN_TEACHER_LEAD} nats"),
        Property("warm-up updates per phase", paper["warmup"],
                 f"{warmup} ({config['train']['warmup_fraction']:.1%} of {config['train']['phase_steps']})",
                 warmup >= MIN_WARMUP, f"≥ {MIN_WARMUP}"),
    ]
    grow = phases[phases["run"].isin(["pre-grow", "post-grow"])]
    if not grow.empty and "kd_soft" in grow:
        for label, rows in (("end of phase 0", grow[grow["phase"] == 0]),
                            ("end of the run", grow[grow["phase"] == grow["phase"].max()])):
            out.append(Property(f"KD soft / CE and KL, grow runs, {label}",
                                paper["kd_ratio_phase0"] if label == "end of phase 0" else "not reported",
                                f"{(rows['kd_soft'] / rows['ce']).mean():.3f}; KL {rows['kd'].mean():.3f}", None))
        unique = grow.groupby(["run", "seed"])["run_unique_tokens"].max().mean()
        out += [
            Property("tokens per student parameter (grow: unique tokens / parameters)", paper["tokens_per_parameter"],
                     f"{unique / student:.2f}", bool(unique / student >= MIN_TOKENS_PER_PARAMETER),
                     f"≥ {MIN_TOKENS_PER_PARAMETER}"),
            Property("unique-token coverage (grow: unique tokens / training split)", paper["coverage"],
                     f"{unique / data['splits']['train']['tokens']:.2f}", None),
        ]
    return out


def leaves_regime(properties: list[Property]) -> list[str]:
    """Names of the properties out of regime (empty: the run keeps every condition)."""
    return [p.name for p in properties if p.in_regime is False]
