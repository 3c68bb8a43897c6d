"""The reliability tests' fault injection (normgrow.train.faults): the variable's grammar and the slow fault."""

import time

import pytest

from normgrow.train.faults import Faults


def test_a_slow_fault_lengthens_every_update_of_its_phase_only(monkeypatch):
    monkeypatch.setenv("NORMGROW_FAULT", "slow@50:abc")
    faults = Faults.from_environment()
    start = time.perf_counter()
    for step in (1, 2):
        faults.for_phase("abcdef").after_update(step)
    assert time.perf_counter() - start >= 0.1
    start = time.perf_counter()
    faults.for_phase("0123").after_update(1)  # another phase: no pause
    assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize("value", ["slow", "slow@x", "sleep@5"])
def test_a_malformed_fault_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv("NORMGROW_FAULT", value)
    with pytest.raises(ValueError, match=f"NORMGROW_FAULT={value}: expected one of nan, term, kill, slow"):
        Faults.from_environment()


def test_faults_combine_and_a_slow_save_pauses_before_each_state(monkeypatch):
    """`slow@MS,slowsave@MS`: slower updates and slower resume states, as the torchrun grace test needs."""
    monkeypatch.setenv("NORMGROW_FAULT", "slow@10,slowsave@120:abc")
    faults = Faults.from_environment()
    start = time.perf_counter()
    faults.for_phase("abcdef").before_state()
    assert time.perf_counter() - start >= 0.12
    start = time.perf_counter()
    faults.for_phase("0123").before_state()  # another phase: no pause before its state
    faults.for_phase("0123").after_update(1)  # but its updates are slow
    assert 0.01 <= time.perf_counter() - start < 0.1
