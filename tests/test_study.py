"""The scale ladder's effects on results whose answers are known, and its DAG."""

import os
import re
import subprocess

import pandas as pd
import pytest
import yaml
from conftest import REPO, SNAKEMAKE

from normgrow.paper.roles import by_role, has_role
from normgrow.paper.study import draw, markdown, scale_effects, seed_effects, tokens_per_parameter
from normgrow.paper.study_plan import StudyPlan

DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())


def phases(scale_shift: float, seeds=(1, 2, 3)) -> pd.DataFrame:
    """Final CEs: joint 3.0 for both placements; grow pre 2.9, post 2.8 − shift; seed s adds 0.01·s."""
    rows = []
    for seed in seeds:
        noise = 0.01 * seed
        for run, ce in (("pre-joint", 3.0), ("post-joint", 3.0), ("pre-grow", 2.9), ("post-grow", 2.8 - scale_shift)):
            rows += [{"run": run, "seed": seed, "phase": 0, "ce": 9.9},  # an earlier phase: not the final one
                     {"run": run, "seed": seed, "phase": 1, "ce": ce + noise}]
    return pd.DataFrame(rows)


ROLES = {run: run for run in ("pre-joint", "post-joint", "pre-grow", "post-grow")}


def test_seed_effects_pair_by_seed():
    effects = seed_effects(phases(0.0), ROLES).set_index("seed")
    assert effects["delta_joint"].tolist() == pytest.approx([0.0, 0.0, 0.0])
    assert effects["delta_grow"].tolist() == pytest.approx([-0.1, -0.1, -0.1])
    assert effects["interaction"].tolist() == pytest.approx([-0.1, -0.1, -0.1])


def test_seed_effects_find_the_runs_by_role_whatever_their_names():
    renamed = phases(0.0).replace({"run": {"pre-joint": "a", "post-joint": "b", "pre-grow": "c", "post-grow": "d"}})
    roles = {"a": "pre-joint", "b": "post-joint", "c": "pre-grow", "d": "post-grow"}
    pd.testing.assert_frame_equal(seed_effects(renamed, roles), seed_effects(phases(0.0), ROLES))


def test_a_run_without_a_role_never_passes_for_one():
    """A run named like a role but without one (e.g. a grow curriculum with lr_restart: false) is
    set apart, so tables and figures that pick grow runs leave it out."""
    frame = by_role(pd.DataFrame({"run": ["c", "x-grow", "pre-grow"]}), {"c": "pre-grow"})
    assert frame["run"].tolist() == ["pre-grow", "other:x-grow", "other:pre-grow"]
    assert [has_role(run, "grow") for run in frame["run"]] == [True, False, False]


def test_tokens_per_parameter_reads_the_grow_runs_unique_tokens():
    rows = phases(0.0).assign(run_unique_tokens=lambda f: f["phase"] * 100 + f["seed"])  # run's end: 101, 102, 103
    rows.loc[rows["run"].str.endswith("joint"), "run_unique_tokens"] = 10**6  # joint runs are not counted
    assert tokens_per_parameter(rows, ROLES, parameters=50) == pytest.approx(102 / 50)


@pytest.mark.parametrize("axis", ["student_parameters", "tokens_per_parameter"])
def test_scale_effects_and_their_figure(tmp_path, axis):
    per_seed = pd.concat([seed_effects(phases(shift), ROLES).assign(scale=name, student_parameters=n,
                                                                    tokens_per_parameter=n / 1e5, teacher_ce=2.5)
                          for name, shift, n in (("s", 0.0, 1e5), ("m", 0.05, 4e5))], ignore_index=True)
    per_seed.loc[(per_seed["scale"] == "m") & (per_seed["seed"] == 3), "post-grow"] += 0.03  # spread one scale
    per_seed["delta_grow"] = per_seed["post-grow"] - per_seed["pre-grow"]
    per_seed["interaction"] = per_seed["delta_grow"] - per_seed["delta_joint"]
    summary = scale_effects(per_seed, axis).set_index(["scale", "effect"])
    small = summary.loc[("s", "delta_grow")]
    assert small["mean"] == pytest.approx(-0.1) and small["low"] == pytest.approx(-0.1) and small["seeds"] == 3
    assert small[axis] == (1e5 if axis == "student_parameters" else 1.0)
    medium = summary.loc[("m", "interaction")]
    assert medium["mean"] == pytest.approx(-0.14)
    half = 4.303 * pd.Series([-0.15, -0.15, -0.12]).std() / 3 ** 0.5  # t(0.975, 2) · s / √n, t to 3 decimals
    assert medium["high"] - medium["mean"] == pytest.approx(half, rel=1e-4)
    # verdicts on the paper's side: Δ_joint ≈ 0 (within the margin), Δ_grow < 0, interaction < 0
    assert summary.loc[("s", "delta_joint"), "verdict"] == "agrees"
    assert summary.loc[("m", "interaction"), "verdict"] == "agrees"
    paths = draw(scale_effects(per_seed, axis), tmp_path / "effects", axis)
    assert all(p.stat().st_size > 1000 for p in paths)
    table = markdown(per_seed, scale_effects(per_seed, axis))
    assert "| m | 3 | +0.260 | +0.0000 [+0.0000, +0.0000] agrees | -0.1400" in table  # lead: 2.76 − 2.5
    assert "Δ_grow < 0 (paper -0.0328)" in table


@pytest.mark.parametrize("shift,verdict", [(0.0, "disagrees"), (0.17, "inconclusive"), (0.3, "agrees")])
def test_study_verdicts_follow_the_seed_interval(shift, verdict):
    """Δ_grow < 0 judged by its 95% interval: entirely above 0 disagrees, straddling it is inconclusive."""
    rows = phases(0.0)
    rows.loc[(rows["run"] == "post-grow") & (rows["phase"] == 1), "ce"] += 0.2 - shift + rows["seed"] * 0.02
    per_seed = seed_effects(rows, ROLES).assign(scale="s", student_parameters=1)
    summary = scale_effects(per_seed).set_index("effect")
    assert summary.loc["delta_grow", "verdict"] == verdict


@pytest.mark.parametrize("seeds,verdict", [((1, 2), "inconclusive"), ((1, 2, 3), "agrees")])
def test_a_studys_delta_joint_is_judged_by_the_one_parity_rule_seeds_included(seeds, verdict):
    """Δ_joint ≈ 0 by the report's parity rule (normgrow.paper.claims.parity): two seeds tied to the digit cannot
    show parity, three can."""
    per_seed = seed_effects(phases(0.0, seeds), ROLES).assign(scale="s", student_parameters=1)
    assert scale_effects(per_seed).set_index("effect").loc["delta_joint", "verdict"] == verdict


@pytest.mark.parametrize("study,scales", [(None, ("study", "h64", "h96", "h128")),
                                          ("ladder.yaml", ("ladder", "tpp0.1", "tpp0.3", "tpp1", "tpp2"))])
def test_study_dag_runs_every_scale(tmp_path, study, scales):
    options = ["--configfile", str(REPO / "configs" / study)] if study else []
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "workflow" / "study.smk"), "-n", "--cores", "2",
                           "--directory", str(tmp_path), *options], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    name, *scales = scales
    for scale in scales:
        assert f"results/{name}/{scale}.phases.csv" in proc.stdout
    assert ("shared_teacher" in proc.stdout) == (name == "ladder")


def test_a_study_under_the_slurm_profile_trains_its_scales_through_it(tmp_path):
    """Each scale (and the shared teacher) is a nested workflow: under `--profile slurm` it runs on the
    submitting host (a local rule) and hands the profile to the nested workflow, whose jobs are then
    submitted; without a profile a cluster executor is refused before anything runs."""
    study = [SNAKEMAKE, "-s", str(REPO / "workflow" / "study.smk"), "--directory", str(tmp_path),
             "--configfile", str(REPO / "configs" / "ladder.yaml")]
    proc = subprocess.run([*study, "-n", "-p", "--profile", "slurm"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nested = [line for line in proc.stdout.splitlines() if line.startswith("Shell command: snakemake -s ")]
    assert len(nested) == 5 and all(" --profile slurm " in line for line in nested), nested  # 4 scales + teacher
    local = re.search(r"^localrules:\n((?:    \w+,\n)+)", (REPO / "workflow" / "study.smk").read_text(), re.M)
    assert {"scale", "shared_teacher"} <= {name.strip(" ,") for name in local.group(1).splitlines()}
    proc = subprocess.run([*study, "--executor", "slurm", "--jobs", "1"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0
    assert "without a profile: its nested workflows" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.phases.csv"))


@pytest.mark.parametrize(("workflow", "executor"), [
    ("study.smk", ["--executor", "slurm"]), ("study.smk", ["-e", "slurm"]), ("comparison.smk", ["--executor=slurm"])])
def test_a_dry_run_under_a_cluster_executor_without_a_profile_is_refused_as_the_run_is(workflow, executor, tmp_path):
    """The refusal of a cluster executor without a profile (workflow/rules/nested.smk) is made when the
    workflow is parsed, so a dry run (-n) shows it as the run would, in the study and the comparison
    alike; the same dry run under the slurm profile is accepted."""
    command = [SNAKEMAKE, "-s", str(REPO / "workflow" / workflow), "--directory", str(tmp_path), "-n", "--jobs", "10"]
    proc = subprocess.run([*command, *executor], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "runs under the slurm executor without a profile" in proc.stdout + proc.stderr
    proc = subprocess.run([*command, *executor, "--profile", "slurm"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_study_started_with_its_profile_in_the_environment_hands_it_to_its_scales(tmp_path):
    """SNAKEMAKE_PROFILE=slurm is Snakemake's --profile slurm: the nested workflows run under it too."""
    proc = subprocess.run([SNAKEMAKE, "-s", str(REPO / "workflow" / "study.smk"), "--directory", str(tmp_path),
                           "--configfile", str(REPO / "configs" / "ladder.yaml"), "-n", "-p"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "SNAKEMAKE_PROFILE": "slurm"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nested = [line for line in proc.stdout.splitlines() if line.startswith("Shell command: snakemake -s ")]
    assert len(nested) == 5 and all(" --profile slurm " in line for line in nested), nested  # 4 scales + teacher


def study(**changes) -> dict:
    """A study config's `study` key: two scales of the seeds × width study, as configs/ladder.yaml shares a
    teacher."""
    return {"name": "s", "seeds": [1, 2], "build": ["pre-joint", "post-joint"], "common": {"train": {"lr": 0.005}},
            "scales": {"h64": {"student": {"blocks": 2}}, "h96": {"train": {"lr": 0.01}}}, **changes}


@pytest.mark.parametrize("key", ["teacher", "data", "tokenizer"])
def test_a_scale_may_not_change_what_a_shared_teacher_is_built_from(key):
    """Under study.shared_teacher: true one teacher and its tokenizer serve every scale: a scale that sets
    teacher, data or tokenizer is refused before anything runs, by its name; without a shared teacher it may."""
    scales = {"tpp1": {key: {"x": 1}}}
    with pytest.raises(ValueError, match=f"study.scales.tpp1 sets {key}, but study.shared_teacher: true"):
        StudyPlan.from_config(study(scales=scales, shared_teacher=True))
    assert StudyPlan.from_config(study(scales=scales)).scale_overrides("tpp1")[key] == {"x": 1}


@pytest.mark.parametrize(("changes", "message"), [
    ({"axis": "layers"}, "study.axis 'layers' is not one of student_parameters, tokens_per_parameter"),
    ({"analysis": "ablation"}, "study.analysis 'ablation' is not one of effects, calibration, formation"),
    ({"scales": {"teacher": {}}}, "study.scales.teacher: the name is the shared teacher's directory; "
                                  "name the scale otherwise"),
    ({"shared_teacher": True, "scales": {"a": {"tokenizer": {}, "data": {}}}},
     "study.scales.a sets data, tokenizer, but study.shared_teacher: true pretrains one teacher for every scale: "
     "set them in study.common")])
def test_a_study_config_is_refused_by_the_key_it_gets_wrong(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        StudyPlan.from_config(study(**changes))


def test_a_scale_runs_the_default_under_the_common_settings_then_its_own(tmp_path, monkeypatch):
    """A scale's overrides: the study's seeds and runs, no diagnostics, the common settings, then its own (which
    win); under a shared teacher, that teacher's directory (absolute) and its tokenizer instead of training one."""
    monkeypatch.chdir(tmp_path)
    plan = StudyPlan.from_config(study())
    assert plan.scale_overrides("h96") == {"seeds": [1, 2], "build": ["pre-joint", "post-joint"],
                                           "diagnostics": {"runs": []}, "train": {"lr": 0.01}}
    merged = plan.merged_config("h64", DEFAULT)
    assert merged["student"]["blocks"] == 2 and merged["train"]["lr"] == 0.005
    assert merged["train"]["phase_steps"] == DEFAULT["train"]["phase_steps"] and merged["seeds"] == [1, 2]
    shared = StudyPlan.from_config(study(shared_teacher=True)).scale_overrides("h64")
    assert shared["teacher"] == {"name": str(tmp_path / "results" / "s" / "teacher.model")}
    assert shared["tokenizer"] == {"train": False} and "teacher" not in plan.scale_overrides("h64")
    assert DEFAULT == yaml.safe_load((REPO / "config.yaml").read_text())  # the default itself is left as it was
    assert plan.nested_target == "results/paper" and set(plan.scale_outputs) == {"phases", "check"}
    bare = {key: value for key, value in study().items() if key not in {"common", "shared_teacher"}}
    assert StudyPlan.from_config(bare).scale_overrides("h96")["train"] == {"lr": 0.01}  # both keys optional
    plan.scale_overrides("h64")["student"]["blocks"] = 9  # the overrides handed out are the caller's own
    assert plan.scales["h64"] == {"student": {"blocks": 2}}
    formation = StudyPlan.from_config(study(analysis="formation"))
    assert formation.nested_target == "results/formation.json" and set(formation.scale_outputs) == {"formation"}
