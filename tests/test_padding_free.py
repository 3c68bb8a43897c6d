"""Batches without padding (`train.padding_free`): documents laid end to end with per-document
positions and attention that stops at document boundaries read the same tokens, give the same loss
positions, labels, teacher hidden states, student logits and loss terms as the padded batch, and a
phase trained that way matches the padded one within the multi-rank tolerances."""

import io

import pandas as pd
import pytest
import torch
from conftest import SEED, make_teacher, tiny_run_config, train_alone
from safetensors.torch import load_file

from normgrow.design.curriculum import phase_spec
from normgrow.design.execution import Execution
from normgrow.model.layout import PLACEMENTS
from normgrow.model.student import BlockStackStudent, at_positions
from normgrow.train.data import Batch
from normgrow.train.forward import causal_lm_hidden, positions_and_labels
from normgrow.train.objective import Objective, fused_objective

LENGTHS = [5, 12, 3, 7, 12, 2, 4]
PAD = 0


def padded_batch(lengths=LENGTHS, seed: int = 1) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths)), PAD, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(1, 64, (n,), generator=generator)
        mask[i, :n] = 1
    return Batch(ids, mask)


def documents(batch: Batch) -> list[list[int]]:
    """Each document's tokens, in the order the batch's positions restart."""
    out = []
    for ids, mask, positions in zip(batch.input_ids, batch.attention_mask, batch.position_ids, strict=True):
        for token, real, position in zip(ids.tolist(), mask.tolist(), positions.tolist(), strict=True):
            if real and position == 0:
                out.append([])
            if real:
                out[-1].append(token)
    return out


def test_packing_lays_the_documents_end_to_end_within_the_batch_width():
    batch = padded_batch()
    packed = batch.packed(PAD)
    width = batch.input_ids.shape[1]
    assert packed.input_ids.shape == (4, width)  # first fit: 5+3+2, 12, 7+4, 12
    assert packed.tokens == batch.tokens
    want = [row[:n].tolist() for row, n in zip(batch.input_ids, LENGTHS, strict=True)]
    assert sorted(documents(packed)) == sorted(want)  # every document whole, positions restarting at 0
    assert documents(packed) == [want[i] for i in (0, 2, 5, 1, 3, 6, 4)]
    assert (packed.input_ids[~packed.attention_mask.bool()] == PAD).all()


def test_the_loss_positions_and_labels_are_the_padded_batchs():
    batch = padded_batch()
    (positions, labels), (packed_positions, packed_labels) = (positions_and_labels(b)
                                                              for b in (batch, batch.packed(PAD)))
    assert len(packed_positions) == len(positions) == sum(n - 1 for n in LENGTHS)
    assert sorted(packed_labels.tolist()) == sorted(labels.tolist())
    two = padded_batch([9, 4, 5])  # rows 9 and 4+5: no label of the 4 crosses into the 5
    (_, padded_labels), (_, packed_labels) = (positions_and_labels(b) for b in (two, two.packed(PAD)))
    assert two.packed(PAD).input_ids.shape[0] == 2 and torch.equal(packed_labels, padded_labels)


def in_packed_order(values: torch.Tensor, batch: Batch, packed: Batch) -> torch.Tensor:
    """The padded batch's per-loss-position `values` (document by document) in the packed batch's order."""
    want = [row[:n].tolist() for row, n in zip(batch.input_ids, batch.attention_mask.sum(1).tolist(), strict=True)]
    bounds = torch.tensor([0, *[len(d) - 1 for d in want]]).cumsum(0).tolist()
    order = [want.index(document) for document in documents(packed)]
    return torch.cat([values[bounds[i]:bounds[i + 1]] for i in order])


def loss_terms(student, teacher, rows: Batch) -> dict[str, torch.Tensor]:
    """The fused KD + CE of `student` on `rows` (means over their loss positions), as the trainer computes it."""
    positions, labels = positions_and_labels(rows)
    hidden = at_positions(student(rows.input_ids, rows.attention_mask, rows.position_ids), positions)
    teacher_hidden = causal_lm_hidden(teacher, rows, positions)
    return fused_objective(Objective(), hidden, student.lm_head.weight, teacher_hidden,
                           teacher.get_output_embeddings().weight, labels, chunk=5)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_teacher_and_student_see_each_document_alone(placement):
    """Per-token teacher hidden states, student logits and the fused loss's terms equal the padded
    batch's (the attention of a token never reaches the document before it in its row)."""
    teacher = make_teacher()
    student = BlockStackStudent.from_teacher(teacher, placement, 2, 1, seed=0)
    batch = padded_batch()
    packed = batch.packed(PAD)
    (positions, _), (packed_positions, _) = positions_and_labels(batch), positions_and_labels(packed)
    with torch.no_grad():
        torch.testing.assert_close(causal_lm_hidden(teacher, packed, packed_positions),
                                   in_packed_order(causal_lm_hidden(teacher, batch, positions), batch, packed),
                                   rtol=1e-5, atol=1e-5)
        logits = student.lm_head(at_positions(student(batch.input_ids, batch.attention_mask), positions))
        packed_logits = student.lm_head(at_positions(
            student(packed.input_ids, packed.attention_mask, position_ids=packed.position_ids),
            packed_positions))
        torch.testing.assert_close(packed_logits, in_packed_order(logits, batch, packed), rtol=1e-5, atol=1e-5)
        terms, packed_terms = loss_terms(student, teacher, batch), loss_terms(student, teacher, packed)
    for key, value in terms.items():
        torch.testing.assert_close(packed_terms[key], value, rtol=1e-5, atol=1e-6, msg=key)


def test_a_varlen_kernel_reads_the_batch_in_one_row_and_the_others_in_rows_of_its_width():
    batch = padded_batch()
    assert batch.packed_or_padded(PAD, False, "flex_attention") is batch  # padded unless train.padding_free
    one = batch.packed_or_padded(PAD, True, "flex_attention")
    assert one.input_ids.shape == (1, sum(LENGTHS)) and one.attention_mask.all()  # no padding at all
    assert documents(one) == [row[:n].tolist() for row, n in zip(batch.input_ids, LENGTHS, strict=True)]
    assert torch.equal(batch.packed_or_padded(PAD, True, "sdpa").input_ids, batch.packed(PAD).input_ids)


def with_attention(model, implementation: str):
    """`model` computing its attention with `implementation` (its layers read the shared config)."""
    model.config._attn_implementation = implementation
    return model


def test_flex_attention_in_one_row_computes_the_padded_batch(monkeypatch):
    """student.attn_implementation: flex_attention with train.padding_free: the batch in one row, attention
    within each document from the position ids (a document mask, as a BlockMask), gives the padded sdpa
    batch's teacher hidden states, student logits and loss terms. Forward only: torch's FlexAttention has
    no backward on CPU (tests/test_gpu.py trains a phase with it on a GPU)."""
    from torch.nn.attention.flex_attention import BlockMask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    flex, masks = ALL_ATTENTION_FUNCTIONS["flex_attention"], []

    def recorded(module, query, key, value, attention_mask, **kwargs):  # flex attention, its masks kept
        masks.append(attention_mask)
        return flex(module, query, key, value, attention_mask, **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "flex_attention", recorded)
    teacher = make_teacher()
    student = BlockStackStudent.from_teacher(teacher, "post", 2, 1, seed=0).eval()
    batch = padded_batch()
    one = batch.packed_or_padded(PAD, True, "flex_attention")
    (positions, _), (one_positions, _) = positions_and_labels(batch), positions_and_labels(one)
    with torch.no_grad():
        hidden = causal_lm_hidden(teacher, batch, positions)
        logits = student.lm_head(at_positions(student(batch.input_ids, batch.attention_mask), positions))
        terms = loss_terms(student, teacher, batch)
        with_attention(teacher, "flex_attention"), with_attention(student, "flex_attention")
        torch.testing.assert_close(causal_lm_hidden(teacher, one, one_positions),
                                   in_packed_order(hidden, batch, one), rtol=1e-5, atol=1e-5)
        one_logits = student.lm_head(at_positions(
            student(one.input_ids, one.attention_mask, position_ids=one.position_ids), one_positions))
        torch.testing.assert_close(one_logits, in_packed_order(logits, batch, one), rtol=1e-5, atol=1e-5)
        one_terms = loss_terms(student, teacher, one)
    for key, value in terms.items():
        torch.testing.assert_close(one_terms[key], value, rtol=1e-5, atol=1e-6, msg=key)
    # the teacher's 2 layers and the student's 2, twice each (hidden states and logits, then the loss terms)
    assert len(masks) == 2 * 2 + 2 * 2 and all(isinstance(m, BlockMask) for m in masks)


def test_a_phase_trained_without_padding_matches_the_padded_one(workspace):
    """A few AdamW updates of phase 0: train.csv and eval.csv within the multi-rank tolerances, the
    token counts (Table A2) exactly, the final weights within 1e-4; the phase key is the padded one's."""
    config = tiny_run_config(phase_steps=2, batch_size=5)  # batches of 5 documents: some rows hold two or three
    spec = phase_spec(config, "post-freeze", SEED, 0)
    padded_key = spec.key
    outs = {}
    for padding_free in (False, True):
        config["train"]["padding_free"] = padding_free
        assert phase_spec(config, "post-freeze", SEED, 0).key == padded_key
        out = workspace["root"] / f"padding-free-{padding_free}"
        train_alone(spec, Execution.from_config(config), workspace["teacher"], workspace["tokens"], None, out,
                    log=io.StringIO())
        outs[padding_free] = out
    for table in ("train.csv", "eval.csv"):
        a, b = pd.read_csv(outs[True] / table), pd.read_csv(outs[False] / table)
        pd.testing.assert_frame_equal(a, b, check_exact=False, atol=1e-5, rtol=1e-6)
    assert pd.read_csv(outs[True] / "train.csv")["tokens"].tolist() == \
        pd.read_csv(outs[False] / "train.csv")["tokens"].tolist()
    weights, reference = (load_file(outs[k] / "student.safetensors") for k in (True, False))
    for name, value in reference.items():
        torch.testing.assert_close(weights[name], value, atol=1e-4, rtol=0, msg=name)


FLEX_GRAPHS = 8  # at most, over 2 widths × 3 modes (measured here: 8 graphs, counted over every function compiled)


@pytest.mark.slow
def test_flex_attention_compiles_few_graphs_over_widths_and_modes_and_never_falls_back():
    """A phase's flex attention under `strict_compilation` (what `train_phases` trains in) over two one-row
    widths in the three modes a phase runs it in (the teacher under inference mode, the student in training
    and in evaluation mode; forward only, without gradients, on the CPU): at most FLEX_GRAPHS compiled
    graphs. Past Dynamo's recompile limit it is an error, not the silent eager fallback (the full score
    matrix): with the limit at 1, a second width raises."""
    from torch._dynamo import config
    from torch._dynamo.exc import FailOnRecompileLimitHit

    from normgrow.train.compiled import compiled_graphs, strict_compilation

    torch._dynamo.reset()
    teacher = with_attention(make_teacher(), "flex_attention")
    student = with_attention(BlockStackStudent.from_teacher(teacher, "post", 2, 1, seed=0), "flex_attention")
    widths = [LENGTHS, LENGTHS[:5]]
    log = io.StringIO()
    before = compiled_graphs()
    # static shapes: inductor's CPU flex kernel fails to compile for dynamic ones (torch 2.13: C++ error,
    # `cur_qSplitSize2` not declared); a GPU compiles dynamic ones from the second width on, fewer graphs
    with strict_compilation(log), config.patch(automatic_dynamic_shapes=False):
        for lengths in widths:
            one = padded_batch(lengths).packed_or_padded(PAD, True, "flex_attention")
            with torch.inference_mode():
                causal_lm_hidden(teacher, one, positions_and_labels(one)[0])
            for training in (True, False):  # no gradient: FlexAttention has no backward on CPU
                student.train(training)
                with torch.no_grad():
                    student(one.input_ids, one.attention_mask, position_ids=one.position_ids)
    graphs = compiled_graphs() - before
    print(f"flex attention: {graphs} graphs over {len(widths)} widths × 3 modes")
    assert 0 < graphs <= FLEX_GRAPHS and f"compiled graphs: {graphs} " in log.getvalue()
    torch._dynamo.reset()
    limited = config.patch(recompile_limit=1, automatic_dynamic_shapes=False)
    with strict_compilation(log), limited, pytest.raises(FailOnRecompileLimitHit):
        for lengths in widths[:2]:
            one = padded_batch(lengths).packed_or_padded(PAD, True, "flex_attention")
            with torch.inference_mode():
                causal_lm_hidden(teacher, one, positions_and_labels(one)[0])
