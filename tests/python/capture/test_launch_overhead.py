"""CUPTI's own host time per kernel launch, measured at the start of tracing (issue 31): the
measurement with stand-ins for the GPU's launches and CUPTI's records, the value's path into
the C++ tracer (every traced step carries it as launch_overhead_us), and that nothing is
measured where there is nothing to trace."""
from __future__ import annotations

import warnings

import pytest
import torch

from habitat import _C
from habitat.capture import cupti


class FakeHost:
    """A host clock on which a launch takes `plain_us`, `cupti_us` more while CUPTI's records
    are on, and the first round of each mode `disturbed_us` more per launch (another process)."""

    def __init__(self, plain_us: float, cupti_us: float, disturbed_us: float = 0.0) -> None:
        self.now = 0.0
        self.plain_us, self.cupti_us, self.disturbed_us = plain_us, cupti_us, disturbed_us
        self.recording = False
        self.rounds = {False: 0, True: 0}
        self.launches = 0
        self.syncs = 0

    def clock(self) -> float:
        return self.now

    def launch(self) -> None:
        self.launches += 1
        extra = self.disturbed_us if self.rounds[self.recording] == 1 else 0.0
        self.now += 1e-6 * (self.plain_us + extra + (self.cupti_us if self.recording else 0.0))

    def synchronize(self) -> None:
        self.syncs += 1
        self.rounds[self.recording] += 1  # a timed loop begins after each synchronisation

    def on(self) -> bool:
        self.recording = True
        return True

    def off(self) -> None:
        self.recording = False


def test_the_cost_per_launch_is_the_difference_of_the_quietest_rounds() -> None:
    host = FakeHost(plain_us=4.0, cupti_us=6.5, disturbed_us=30.0)
    us = cupti.measure_launch_overhead(host.launch, host.on, host.off, host.synchronize,
                                       launches=100, rounds=3, clock=host.clock)
    assert us == pytest.approx(6.5)
    assert host.recording is False  # the records are off again afterwards
    assert host.launches == 10 + 2 * 3 * 100  # a warm-up, then three rounds of each mode


def test_a_cost_is_never_negative_and_needs_the_records() -> None:
    faster = FakeHost(plain_us=4.0, cupti_us=-0.5)  # noise can make the traced loop faster
    assert cupti.measure_launch_overhead(faster.launch, faster.on, faster.off, faster.synchronize,
                                         launches=10, rounds=2, clock=faster.clock) == 0.0
    host = FakeHost(plain_us=4.0, cupti_us=6.0)
    assert cupti.measure_launch_overhead(host.launch, lambda: False, host.off, host.synchronize,
                                         launches=10, rounds=2, clock=host.clock) is None
    with pytest.raises(ValueError, match="at least 1"):
        cupti.measure_launch_overhead(host.launch, host.on, host.off, host.synchronize, launches=0)


def test_the_tracer_keeps_the_measured_cost_for_the_steps() -> None:
    before = _C.cupti_launch_overhead()
    try:
        _C.cupti_set_launch_overhead(7.25)
        assert _C.cupti_launch_overhead() == 7.25
        _C.cupti_set_launch_overhead(-1.0)
        assert _C.cupti_launch_overhead() is None
    finally:
        _C.cupti_set_launch_overhead(-1.0 if before is None else before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_nothing_is_measured_without_a_gpu() -> None:
    tracing = cupti.KernelTracing()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tracing.begin_step() is False
    tracing.close()
    assert _C.cupti_launch_overhead() is None
