"""normgrow.cluster.budget: the three batch layouts' cost per document, the planning distribution's
mean being the paper's, the matmul count of every family, the wall time of a DAG of jobs on a number
of nodes and its critical path, the layout a config trains with, and the plan command's budget of
the paper's setting."""

import numpy as np
import pytest
import torch
import yaml
from conftest import REPO, SCHEMA, tiny_config
from transformers import AutoConfig, AutoModelForCausalLM

from normgrow.cli import main
from normgrow.cluster.budget import (
    PAPER_TOKENS_PER_DOCUMENT,
    Job,
    PerDocument,
    budget,
    config_way,
    critical_path,
    matmul_parameters,
    per_document,
    phase_costs,
    planned_lengths,
    training_jobs,
    wall_hours,
)
from normgrow.design.config import merge, validate_config
from normgrow.model.family import PREFIXES

QWEN3_8B = REPO / "configs" / "teachers" / "qwen3-8b-base"


def paper_config(**train) -> dict:
    config: dict = {}
    for name in ("config.yaml", "configs/paper.yaml"):
        merge(config, yaml.safe_load((REPO / name).read_text()))
    merge(config, {"train": train})
    return validate_config(config, SCHEMA)


def test_each_way_counts_its_own_tokens_and_attention():
    ways = per_document(np.array([1, 3, 2, 2, 5]), batch_size=2, world=1, max_length=8)
    # micro-batches [1, 3] and [2, 2]; the fifth document makes no full micro-batch
    assert ways["full rows"] == PerDocument(8.0, 36.0)
    assert ways["padded"].tokens == 2.5 and ways["padded"].attention == (6 + 3) / 2  # rows of 3 and of 2
    assert ways["packed rows"].tokens == 2.5  # [1, 3] needs two rows of 3; [2, 2] two rows of 2
    assert ways["padding-free"].tokens == 2.0 and ways["padding-free"].attention == (1 + 6 + 3 + 3) / 4


def test_packing_shares_a_row_where_documents_fit():
    # first fit at width 4: [4], [1, 3], [1]
    ways = per_document(np.array([1, 4, 3, 1]), batch_size=4, world=1, max_length=8)
    assert ways["packed rows"] == PerDocument(3 * 4 / 4, 3 * 10 / 4)
    assert ways["padded"].tokens == 4 and ways["padding-free"].tokens == 9 / 4


def test_a_rank_prices_its_own_documents_not_the_global_batch():
    """Two ranks, batches of 6: the ranks' shares of [1, 6, 2, 4, 1, 3] are [1, 6, 2] and [4, 1, 3], each laid
    out at its own longest (6 and 4), not at the global batch's 6."""
    ways = per_document(np.array([1, 6, 2, 4, 1, 3]), batch_size=6, world=2, max_length=8)
    assert ways["padded"].tokens == (3 * 6 + 3 * 4) / 6 and ways["padded"].attention == (3 * 21 + 3 * 10) / 6
    assert ways["packed rows"].tokens == (2 * 6 + 2 * 4) / 6  # rows [1, 2], [6] and [4], [1, 3]


def attention_pairs(rows, document_mask: bool) -> float:
    """The causal-attention term Σ n(n+1)/2 that `rows` cost: a dense mask pays each row's width, a document
    mask (flex attention) each document's own (a token at position p of its document sees p + 1)."""
    if document_mask:
        return float(((rows.position_ids + 1) * rows.attention_mask).sum())
    count, width = rows.input_ids.shape
    return count * width * (width + 1) / 2


@pytest.mark.parametrize(("way", "padding_free", "attention"), [("padded", False, "sdpa"),
                                                               ("packed rows", True, "sdpa"),
                                                               ("padding-free", True, "flex_attention")])
def test_the_budget_prices_the_rows_the_trainer_runs(way, padding_free, attention):
    """On the budget's length draw at the paper's shape (64 documents of ≤ 8,192 tokens per update over 8
    ranks), the positions and attention pairs per document of every rank's rows as the trainer lays them
    out (Ranks.rows, then Batch.packed_or_padded) are the budget's (issue 58: with rows as wide as the
    global batch's longest they were 1.3× the budget's packed rows)."""
    from normgrow.train.data import collate
    from normgrow.train.distributed import Ranks

    batch_size, world, cap = 64, 8, 8192
    lengths = planned_lengths(1.0, batch_size * 40, cap).astype(np.int64)
    want = per_document(lengths, batch_size, world, cap)[way]
    positions = pairs = 0.0
    for documents in lengths.reshape(-1, batch_size):
        batch = collate([np.ones(n, dtype=np.int64) for n in documents], pad_id=0)
        for rank in range(world):
            rows = Ranks(rank, world, torch.device("cpu")).rows(batch, pad_id=0)
            rows = rows.packed_or_padded(0, padding_free, attention)
            positions += rows.input_ids.numel()
            pairs += attention_pairs(rows, document_mask=attention == "flex_attention")
    assert positions / len(lengths) == pytest.approx(want.tokens, rel=1e-9)
    assert pairs / len(lengths) == pytest.approx(want.attention, rel=1e-9)


@pytest.mark.parametrize("sigma", [0.75, 1.0, 1.25])
def test_the_planned_lengths_have_the_papers_mean_under_the_cap(sigma):
    lengths = planned_lengths(sigma, 400_000, cap=8192)
    assert lengths.max() <= 8192 and lengths.min() >= 1
    assert lengths.mean() == pytest.approx(PAPER_TOKENS_PER_DOCUMENT, rel=0.01)


def test_a_mean_at_or_over_the_cap_puts_every_document_at_the_cap():
    assert (planned_lengths(1.0, 10, cap=128) == 128).all()  # the embedded default: 128-token documents
    assert planned_lengths(1.0, 100_000, cap=128, mean=60).mean() == pytest.approx(60, rel=0.02)


def test_padding_costs_more_the_wider_the_lengths_spread():
    padded = [per_document(planned_lengths(s, 100_000, 8192), 8, 1, 8192)["padded"].tokens for s in (0.5, 1.0, 1.5)]
    assert padded == sorted(padded) and padded[0] > PAPER_TOKENS_PER_DOCUMENT


@pytest.mark.parametrize("model_type", list(PREFIXES))
def test_the_matmul_count_is_every_familys_linear_weights(model_type):
    config = tiny_config(model_type)
    teacher = AutoModelForCausalLM.from_config(config)

    def linear(module) -> int:
        return sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))

    assert matmul_parameters(config) == (linear(teacher.model.layers[0]), linear(teacher.get_output_embeddings()))


def chain_and_one() -> tuple[list[Job], list[float]]:
    """Jobs 0 → 1 → 2 of an hour each, and job 3 of two hours on its own."""
    jobs = [Job(("a",), 1.0, frozenset()), Job(("b",), 1.0, frozenset({0})), Job(("c",), 1.0, frozenset({1})),
            Job(("d",), 2.0, frozenset())]
    return jobs, [1.0, 1.0, 1.0, 2.0]


def test_the_wall_time_is_the_work_on_one_node_and_the_critical_path_with_nodes_to_spare():
    jobs, hours = chain_and_one()
    assert wall_hours(jobs, hours, 1) == 5.0
    assert wall_hours(jobs, hours, 2) == 3.0  # the chain on one node, the two-hour job beside it
    assert wall_hours(jobs, hours, 8) == 3.0
    assert critical_path(jobs, hours) == [0, 1, 2]


def test_the_longest_remaining_chain_starts_first():
    """On two nodes, starting the lone two-hour jobs first would leave the chain for later (5 h)."""
    jobs = [Job(("a",), 1.0, frozenset()), Job(("b",), 1.0, frozenset({0})), Job(("c",), 1.0, frozenset({1})),
            Job(("d",), 2.0, frozenset()), Job(("e",), 2.0, frozenset())]
    assert wall_hours(jobs, [1.0, 1.0, 1.0, 2.0, 2.0], 2) == 4.0


def test_a_longer_chain_goes_first_among_the_jobs_that_become_ready():
    """After job 0, the chain 1 → 2 → 3 and the one-hour jobs 4 and 5 are ready: on two nodes the chain
    starts at once (4 h in all), not after them (5 h)."""
    after = [frozenset(), frozenset({0}), frozenset({1}), frozenset({2}), frozenset({0}), frozenset({0})]
    jobs = [Job((str(j),), 1.0, a) for j, a in enumerate(after)]
    assert wall_hours(jobs, [1.0] * 6, 2) == 4.0


def test_a_job_of_several_nodes_takes_that_many():
    config = paper_config()
    config["resources"]["train"]["nodes"] = 2  # 16 GPUs per phase: two nodes run one phase at a time
    b = budget(config, AutoConfig.from_pretrained(QWEN3_8B), 30.8, [2, 3, 4], samples=8_000)
    assert b["gpus_per_job"] == 16
    assert b["wall_hours"][2] == b["wall_hours"][3] == pytest.approx(b["gpu_hours"]["packed rows"] / 16)
    assert b["wall_hours"][4] < b["wall_hours"][2]


def test_the_layout_follows_padding_free_and_the_attention_kernel():
    assert config_way(paper_config(padding_free=False)) == "padded"
    assert config_way(paper_config(padding_free=True)) == "packed rows"
    flex = paper_config(padding_free=True)
    flex["student"]["attn_implementation"] = "flex_attention"
    assert config_way(flex) == "padding-free"


def test_a_group_pays_the_teacher_once_and_waits_for_its_phases_previous_jobs():
    config = paper_config()
    teacher = AutoConfig.from_pretrained(QWEN3_8B)
    costs = phase_costs(config, teacher, PerDocument(1000.0, 1000.0 * 1001 / 2))
    alone, grouped = training_jobs(config, costs, 1), training_jobs(config, costs, 64)
    assert len(alone) == 18 and len(grouped) == 7
    students = sum(c.student for c in costs.values())
    assert sum(job.flops for job in alone) == pytest.approx(students + sum(c.teacher for c in costs.values()))
    assert sum(job.flops for job in grouped) == pytest.approx(students + sum(costs[job.keys[0]].teacher
                                                                             for job in grouped))
    for jobs in (alone, grouped):
        assert len(critical_path(jobs, [1.0] * len(jobs))) == 3  # three phases in a row at most


def test_the_papers_budget_runs_padding_free_at_its_cost():
    """configs/paper.yaml trains packed rows (train.padding_free on sdpa): its GPU-hours are the packed
    ones, 0.40× the padded ones at σ = 1; its three-phase chain is the wall time on 8 nodes."""
    config = paper_config()
    b = budget(config, AutoConfig.from_pretrained(QWEN3_8B), 30.8, [1, 8], samples=50_000)
    assert b["way"] == "packed rows"
    hours = b["gpu_hours"]
    assert hours["padding-free"] < hours["packed rows"] < 0.45 * hours["padded"]
    assert b["wall_hours"][1] == pytest.approx(hours["packed rows"] / 8)  # every phase in turn on one node
    assert b["wall_hours"][8] == pytest.approx(sum(b["critical_path"]["hours"]))
    assert len(b["critical_path"]["hours"]) == 3
    assert b["disk_gb"]["students"] == pytest.approx(18 * 4 * 2.98e9 / 1e9, rel=0.01)
    assert b["disk_gb"]["resume states per training job"] == pytest.approx(61.6)



def test_the_budget_plans_documents_of_the_mean_it_is_given():
    b = budget(paper_config(), AutoConfig.from_pretrained(QWEN3_8B), 30.8, [1], samples=20_000, mean_tokens=300.0)
    assert b["mean_tokens"] == pytest.approx(300.0, rel=0.05)


def test_a_job_without_gpus_runs_on_one_device_whatever_its_ranks():
    """CPU ranks share one machine: the wall time is not divided by them."""
    config = paper_config()
    config["resources"]["train"].update(gpus=0, ranks_per_node=2, stand_in_gpus=False)
    b = budget(config, AutoConfig.from_pretrained(QWEN3_8B), 30.8, [1], samples=20_000)
    assert b["gpus_per_job"] == 1

def test_the_plan_command_prints_the_configs_gpu_hours(capsys):
    assert main(["plan", str(REPO / "config.yaml"), str(REPO / "configs" / "paper.yaml"), "--gpus", "8",
                 "--teacher-config", str(QWEN3_8B), "--nodes", "1", "8"]) == 0
    out = capsys.readouterr().out
    assert "    padded              3,586 GPU-hours  (2,919)\n" in out
    assert "    packed rows         1,440 GPU-hours  (1,181)  ← this config\n" in out
    assert "    padding-free        1,161 GPU-hours  (973)\n" in out
    assert "on   8 node(s):     32.2 h (1.34 days)" in out and "post-joint-longer seed 42's 3 jobs" in out
