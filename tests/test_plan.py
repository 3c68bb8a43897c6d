"""The planning command: exact parameter counts (checked against built modules at reduced width)
and the memory plan's arithmetic."""

import pytest
import yaml
from conftest import REPO, SCHEMA, make_teacher

from normgrow.cli import main
from normgrow.cluster.plan import plan, student_parameters, teacher_parameters
from normgrow.design.config import validate_config
from normgrow.model.student import BlockStackStudent


def test_parameter_formula_matches_built_models(teacher):
    counts = student_parameters(teacher.config, blocks=3, layers_per_block=2)
    student = BlockStackStudent.from_teacher(teacher, "post", 3, 2, seed=0)
    assert counts["total"] == sum(p.numel() for p in student.parameters())
    student.set_trainable([0, 1, 2])
    assert counts["trainable"] == sum(p.numel() for p in student.parameters() if p.requires_grad)
    assert teacher_parameters(teacher.config) == sum(p.numel() for p in teacher.parameters())


def test_plan_scales_with_ranks_and_checkpointing():
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()), SCHEMA)
    config["train"]["activation_checkpointing"] = True
    teacher = make_teacher(vocab_size=1000, hidden_size=64).config
    one, eight = plan(config, teacher, 1, 80), plan(config, teacher, 8, 80)
    key = "student weights, grads, AdamW (sharded)"
    assert abs(one["memory_gb"][key] - 8 * eight["memory_gb"][key]) < 1e-12
    assert one["memory_gb"][key] * 1e9 == 16 * one["parameters"]["trainable"]
    no_ckpt = plan(config, teacher, 1, 80, activation_checkpointing=False)
    stage = "backward (saved inputs, one layer)"
    assert no_ckpt["stages_gb"][stage] > one["stages_gb"][stage]
    assert one["fits"] and not plan(config, teacher, 1, 1e-6)["fits"]



def test_plan_follows_the_configs_precision_dtype_and_checkpointing():
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()), SCHEMA)  # fp32, float32, no ckpt
    teacher = make_teacher(vocab_size=1000, hidden_size=64).config
    fp32 = plan(config, teacher, 1, 80)["memory_gb"]
    assert fp32["gathered float32 weights (root unit, 2 layers)"] == 0  # one fp32 process: the plain module
    assert fp32["teacher (float32, replicated)"] * 1e9 == 4 * teacher_parameters(teacher)
    config["train"].update(precision="bfloat16", activation_checkpointing=True)
    config["teacher"]["dtype"] = "bfloat16"
    bf16 = plan(config, teacher, 1, 80)["memory_gb"]
    assert bf16["gathered bfloat16 weights (root unit, 2 layers)"] > 0
    assert bf16["teacher (bfloat16, replicated)"] * 1e9 == 2 * teacher_parameters(teacher)
    stage = "backward (saved inputs, one layer)"
    assert plan(config, teacher, 1, 80)["stages_gb"][stage] < plan(config, teacher, 1, 80, False)["stages_gb"][stage]


def test_plan_of_a_group_adds_each_other_students_sharded_state_and_one_teacher():
    """A job of N students on one teacher forward: N − 1 more students' fp32 weights, AdamW moments
    and embedding, sharded (their gradients are freed by their optimizer steps); one teacher, its
    hidden states held for the group (a phase alone frees them inside its step), one student's
    gathered weights and working set. N defaults to resources.train.group_size."""
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()), SCHEMA)
    teacher = make_teacher(vocab_size=1000, hidden_size=64).config
    one, three = plan(config, teacher, 4, 80), plan(config, teacher, 4, 80, students=3)
    counts = one["parameters"]
    assert one["students"] == 1 and not any("other students" in key for key in one["memory_gb"])
    others = three["memory_gb"].pop("other students × 2 (weights, AdamW, sharded)")
    assert others * 1e9 == pytest.approx(2 * (12 * counts["trainable"] + 4 * counts["embedding"]) / 4)
    hidden = three["memory_gb"].pop("teacher hidden states (loss positions)")
    assert "teacher hidden states (loss positions)" not in one["memory_gb"]
    largest = "largest stage of the step (below)"  # a phase alone holds the teacher's states in its KD + CE only
    stage_change = three["memory_gb"].pop(largest) - one["memory_gb"].pop(largest)
    assert -hidden <= stage_change <= 0 and three["memory_gb"] == one["memory_gb"]
    assert three["total_gb"] == pytest.approx(one["total_gb"] + others + hidden + stage_change)
    config["resources"]["train"]["group_size"] = 3
    assert plan(config, teacher, 4, 80)["total_gb"] == three["total_gb"]


def test_a_groups_resume_state_holds_one_state_per_student():
    """A group saves every student's resume state (fp32 weights and AdamW's two moments) at each save:
    N students write N times one phase's state."""
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()), SCHEMA)
    teacher = make_teacher(vocab_size=1000, hidden_size=64).config
    one, three = plan(config, teacher, 4, 80), plan(config, teacher, 4, 80, students=3)
    counts = one["parameters"]
    assert one["resume_state_gb"] * 1e9 == pytest.approx(4 * counts["total"] + 8 * counts["trainable"])
    assert three["resume_state_gb"] == pytest.approx(3 * one["resume_state_gb"])


def test_paper_plan_from_the_shipped_teacher_config(capsys):
    assert main(["plan", str(REPO / "config.yaml"), str(REPO / "configs" / "paper.yaml"), "--gpus", "8",
                 "--gpu-gb", "80", "--teacher-config", str(REPO / "configs" / "teachers" / "qwen3-8b-base")]) == 0
    out = capsys.readouterr().out
    assert "teacher 8.19B" in out and "decoder 1.74B" in out and "→ fits" in out and "one phase:" in out
    # fp32 weights (2.98B) and AdamW's two moments of the trainable 2.36B, over 8 ranks
    assert "resume state: 30.8 GB (3.8 GB written per rank, then read back and hashed by that rank" in out
    assert "warning_seconds (600)" in out and "shutdown_timeout (300: torchrun's grace after a SIGTERM)" in out
    assert main(["plan", str(REPO / "config.yaml"), str(REPO / "configs" / "paper.yaml"), "--gpus", "8", "--students",
                 "2", "--teacher-config", str(REPO / "configs" / "teachers" / "qwen3-8b-base")]) == 0
    out = capsys.readouterr().out
    assert "a group of 2 students on one teacher forward:" in out and "other students × 1" in out


# ---------------------------------------------------------------- the command a user relies on
QWEN3_8B = str(REPO / "configs" / "teachers" / "qwen3-8b-base")
PAPER = str(REPO / "configs" / "paper.yaml")


def test_the_plan_reads_the_embedded_default_first_as_the_workflow_does(capsys):
    assert main(["plan", PAPER, "--teacher-config", QWEN3_8B]) == 0
    without = capsys.readouterr().out
    assert main(["plan", str(REPO / "config.yaml"), PAPER, "--teacher-config", QWEN3_8B]) == 0
    assert capsys.readouterr().out == without and "→ fits" in without


@pytest.mark.parametrize("where", ["offline", "unreachable"])
def test_a_teacher_config_out_of_reach_is_one_line_naming_teacher_config(tmp_path, monkeypatch, where):
    import time

    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", where == "offline")
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused at once
    start = time.monotonic()
    with pytest.raises(SystemExit) as info:
        main(["plan", PAPER])
    message = str(info.value)
    assert time.monotonic() - start < 10  # not huggingface_hub's ~23 s of retries
    assert "\n" not in message and "--teacher-config" in message and str(tmp_path / "hub") in message
    assert ("offline (HF_HUB_OFFLINE)" if where == "offline" else "the hub (http://127.0.0.1:9) is unreachable") \
        in message


def test_the_plan_refuses_a_family_the_dry_run_refuses(tmp_path):
    from transformers import GraniteConfig

    GraniteConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=1).save_pretrained(
        tmp_path)
    with pytest.raises(SystemExit, match=r"is a 'granite' model .* not a supported decoder family \(qwen3, "):
        main(["plan", PAPER, "--teacher-config", str(tmp_path)])


def test_a_plan_that_does_not_fit_says_the_largest_micro_batch_and_the_gpus_that_fit(capsys):
    from transformers import AutoConfig

    from normgrow.cli import read_configs
    from normgrow.cluster.plan import what_fits

    paper = read_configs([REPO / "configs" / "paper.yaml"])
    teacher = AutoConfig.from_pretrained(QWEN3_8B)
    assert not plan(paper, teacher, 2, 80)["fits"]
    lines = what_fits(paper, teacher, 2, 80).splitlines()
    assert lines == ["  on 2 GPUs, at most 10 documents per rank fit (train.batch_size: 20, a micro-batch of 81,920 "
                     "tokens)", "  train.batch_size 64 fits on 8 GPUs (resources.train.gpus × nodes)"]
    for rows, fits in ((10, True), (11, False)):  # the largest: one more does not fit
        assert plan({**paper, "train": {**paper["train"], "batch_size": 2 * rows}}, teacher, 2, 80)["fits"] is fits
    assert plan(paper, teacher, 4, 80)["fits"] is False and plan(paper, teacher, 8, 80)["fits"]
    assert main(["plan", PAPER, "--teacher-config", QWEN3_8B, "--gpus", "2"]) == 0
    assert "at most 10 documents per rank fit" in capsys.readouterr().out
