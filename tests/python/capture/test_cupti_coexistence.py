"""CUPTI coexistence, on any machine: Habitat's decisions when another CUPTI client
(torch.profiler's Kineto, Nsight) is present, with the CUPTI layer faked.

The fake stands in for habitat._C's cupti_* calls (everything else is the real extension) and
for the GPU (torch.cuda.is_available, torch.cuda.synchronize). torch.profiler is the real
one, profiling the CPU: its "is recording" flag is what Habitat reads. What cannot run
without a GPU (the C++ buffer callbacks, real CUPTI records) is in test_cupti.py's GPU tests.
"""
from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import habitat
from habitat import _C
from habitat.capture import cupti, predict
from habitat.capture import modules as habitat_modules
from habitat.capture import phase as habitat_phase

_NSIGHT = ("cuptiActivityRegisterCallbacks failed (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). "
           "Another CUPTI client (Nsight Systems/Compute, torch.profiler or another profiler) "
           "holds CUPTI; Habitat steps aside until it is gone")


class FakeCupti:
    """habitat._C with a fake CUPTI: one activity client at a time, a log of every call.

    It also models CUPTI's buffer rule: one pair of buffer callbacks per process (a client
    registering replaces the previous pair), a buffer is requested from the pair registered
    when records need room, and completed into the pair registered when it is flushed.
    While Habitat's kinds are enabled, the GPU work of any step (traced or not) keeps a
    buffer of Habitat's open. ``misdelivered`` lists every buffer completed into a client
    that did not request it, as (requester, receiver).
    """

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.active = False  # Habitat's kinds enabled (its C++ tracer started)
        self.registered: str | None = None  # whose callbacks CUPTI calls now
        self.open_buffer: str | None = None  # the requester of the buffer CUPTI fills now
        self.kineto_kinds = False
        self.delivered: list[tuple[str, str]] = []
        self.misdelivered: list[tuple[str, str]] = []
        self.held_by: str | None = None  # another client holding CUPTI (start fails)
        self.kernels = 3  # kernels the next flush returns
        self.syncs = 0

    def __getattr__(self, name: str) -> Any:  # the real extension for everything else
        return getattr(_C, name)

    def cupti_compiled(self) -> bool:
        return True

    def cupti_available(self) -> bool:
        return self.held_by is None

    def cupti_status(self) -> str:
        return "tracing" if self.active else "not started"

    def cupti_active(self) -> bool:
        return self.active

    # ----- CUPTI's buffer rule ------------------------------------------------------------
    def _gpu_work(self) -> None:
        """Kernels run: records need a buffer if any kind is enabled."""
        if self.open_buffer is None and (self.active or self.kineto_kinds) and self.registered:
            self.open_buffer = self.registered

    def _forced_flush(self) -> None:
        if self.open_buffer is not None and self.registered is not None:
            pair = (self.open_buffer, self.registered)
            self.delivered.append(pair)
            if pair[0] != pair[1]:
                self.misdelivered.append(pair)
        self.open_buffer = None

    def kineto_starts(self) -> None:
        """torch.profiler(CUDA) starting: Kineto registers its callbacks, enables its kinds."""
        self.registered = "kineto"
        self.kineto_kinds = True
        self._gpu_work()

    def kineto_stops(self) -> None:
        """Kineto's stop: a forced flush into its callbacks, then its kinds off (the same
        kinds as Habitat's: CUPTI keeps one switch per kind)."""
        self._gpu_work()
        self._forced_flush()
        self.kineto_kinds = False

    def step_runs(self) -> None:
        """Any training step's GPU work, traced or not."""
        self._gpu_work()

    # ----- habitat._C's cupti_* -----------------------------------------------------------
    def cupti_start(self, record_nvtx: bool = False) -> tuple[bool, str]:
        self.calls.append("start")
        if self.held_by is not None:
            return False, _NSIGHT
        self._forced_flush()  # the C++ start: the previous client's buffers go back to it
        self.registered = "habitat"
        self.active = True
        self._gpu_work()
        return True, "tracing"

    def cupti_stop(self) -> tuple[bool, str]:
        self.calls.append("stop")
        if self.active:  # the C++ stop: kinds off, then a forced flush
            self.active = False
            self._forced_flush()
        return True, ""

    def cupti_detach(self, reason: str) -> None:
        self.calls.append(f"detach: {reason}")
        self.active = False

    def _step_json(self) -> str:
        ops = {"0": [{"name": "k", "duration_us": 1.0, "grid": [1, 1, 1], "block": [1, 1, 1]}]
               * self.kernels} if self.kernels else {}
        return json.dumps({"ops": ops, "stats": {"kernels": self.kernels, "dropped": 0},
                           "ok": True, "message": "", "nvtx_ranges": 0, "nvtx_sample": []})

    def cupti_flush(self) -> str:
        self.calls.append("flush")
        self._forced_flush()
        return self._step_json()

    def cupti_last_step(self) -> str:
        self.calls.append("last_step")
        self._forced_flush()  # session.end flushed in C++
        return self._step_json()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCupti:
    fake = FakeCupti()
    monkeypatch.setattr(cupti, "_C", fake)
    monkeypatch.setattr(predict, "_C", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def synchronize(device: Any = None) -> None:
        fake.calls.append("synchronize")
        fake.syncs += 1

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    cupti._warned.clear()
    yield fake
    cupti._warned.clear()


def _cpu_profiler() -> Any:
    return profile(activities=[ProfilerActivity.CPU])


def test_tracing_steps_aside_while_torch_profiler_runs_and_comes_back(fake: FakeCupti) -> None:
    tracing = cupti.KernelTracing()
    assert tracing.begin_step() and fake.active
    kernels = tracing.end_step()
    assert kernels is not None and kernels.stats["kernels"] == 3
    # The step's end lets go of CUPTI: no kind on, no buffer of Habitat's left with CUPTI.
    assert fake.calls == ["start", "synchronize", "flush", "stop"]
    assert not fake.active and fake.open_buffer is None

    fake.calls.clear()
    with _profiled(fake) as prof:
        with pytest.warns(cupti.CuptiWarning, match="torch.profiler is running"):
            assert tracing.begin_step() is False
        # Habitat holds nothing between steps, so nothing to touch (Kineto owns CUPTI now).
        assert fake.calls == [] and not fake.active
        torch.add(torch.ones(2), 1)
        assert tracing.end_step() is None  # no synchronisation, no flush of Kineto's buffers
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # warned once, not per step
            assert tracing.begin_step() is False
            assert tracing.end_step() is None
    assert any(e.name == "aten::add" for e in prof.events())  # the profiler lost nothing
    assert "synchronize" not in fake.calls and "flush" not in fake.calls

    fake.calls.clear()
    assert tracing.begin_step()  # the profiler is gone: callbacks taken back, tracing again
    assert fake.calls == ["stop", "start"]
    assert tracing.end_step() is not None
    tracing.close()
    assert not fake.active
    assert fake.misdelivered == []
    assert ("kineto", "kineto") in fake.delivered and ("habitat", "habitat") in fake.delivered


@contextlib.contextmanager
def _profiled(fake: FakeCupti) -> Iterator[Any]:
    """torch.profiler as Kineto runs it with CUDA: registers at start, flushes at stop."""
    with _cpu_profiler() as prof:
        fake.kineto_starts()
        try:
            yield prof
        finally:
            fake.kineto_stops()


def test_traced_plain_and_profiled_steps_in_turns_deliver_every_buffer_to_its_owner(
        fake: FakeCupti) -> None:
    """benchmarks/overhead/gpu_table.py's pattern, which made Kineto print "bufferCompleted
    called with unknown buffer" on the H100: modes take turns in one process."""
    tracing = cupti.KernelTracing()
    for _ in range(4):
        assert tracing.begin_step()  # CUPTI only
        fake.step_runs()
        assert tracing.end_step() is not None
        fake.step_runs()  # a plain step
        with _profiled(fake):
            fake.step_runs()
        with predict.record_step(tracing=tracing):  # capture+CUPTI
            fake.step_runs()
            torch.add(torch.ones(2), 1)
        fake.step_runs()
    tracing.close()
    assert fake.misdelivered == []
    assert fake.delivered.count(("kineto", "kineto")) == 4
    assert fake.delivered.count(("habitat", "habitat")) == 8


def test_the_fake_reproduces_the_unknown_buffer_of_a_tracer_left_started(fake: FakeCupti) -> None:
    """The model catches the bug the H100 showed: tracing left on after a flushed step (as
    KernelTracing did), a plain step opens a buffer of Habitat's, and Kineto receives it."""
    fake.cupti_start()
    fake.step_runs()
    fake.cupti_flush()
    fake.step_runs()  # kinds still on: a new buffer, requested from Habitat's callbacks
    with _profiled(fake):
        pass
    assert fake.misdelivered == [("habitat", "kineto")]


def test_a_profiler_started_inside_a_traced_step_loses_nothing(fake: FakeCupti) -> None:
    tracing = cupti.KernelTracing()
    assert tracing.begin_step()
    with _cpu_profiler() as prof:
        with pytest.warns(cupti.CuptiWarning, match="started during a traced step"):
            torch.mul(torch.ones(2), 2)
            # The step's end: Habitat sees the profiler and neither synchronises nor flushes
            # (that would hand Kineto's records to Habitat's callbacks, or the reverse).
            assert tracing.prepare_flush() is False
        assert tracing.end_step() is None
    assert any(e.name == "aten::mul" for e in prof.events())
    assert fake.calls == ["start", "detach: torch.profiler started during the step"]
    assert tracing.begin_step()  # afterwards: re-registered and tracing
    assert fake.calls[-2:] == ["stop", "start"]
    tracing.close()


def test_only_a_profiler_started_inside_a_traced_step_can_receive_a_habitat_buffer(
        fake: FakeCupti) -> None:
    """The one crossing Habitat cannot prevent: Kineto registers while a traced step's buffer
    is open (no hook runs before the profiler starts). The step's kernels are given up, the
    next step re-registers, and from then on every buffer reaches its owner."""
    tracing = cupti.KernelTracing()
    assert tracing.begin_step()
    with pytest.warns(cupti.CuptiWarning, match="started during a traced step"):
        with _profiled(fake):
            fake.step_runs()
            assert tracing.end_step() is None
    assert fake.misdelivered == [("habitat", "kineto")]
    for _ in range(2):
        assert tracing.begin_step()
        fake.step_runs()
        assert tracing.end_step() is not None
        with _profiled(fake):
            fake.step_runs()
    tracing.close()
    assert fake.misdelivered == [("habitat", "kineto")]


def test_nsight_holding_cupti_makes_habitat_step_aside_with_one_warning(fake: FakeCupti) -> None:
    fake.held_by = "nsys"
    tracing = cupti.KernelTracing()
    with pytest.warns(cupti.CuptiWarning, match="Nsight Systems"):
        assert tracing.begin_step() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):  # each step asks again, quietly; never synchronises
            assert tracing.begin_step() is False
            assert tracing.end_step() is None
    assert "synchronize" not in fake.calls and not fake.active
    fake.held_by = None  # Nsight is gone
    assert tracing.begin_step() and fake.active
    tracing.close()


def test_a_step_without_kernels_takes_the_callbacks_back(fake: FakeCupti) -> None:
    """No kernel at all in a traced step: an idle step, or another client replaced Habitat's
    callbacks mid-step (Nsight attaching): the next step re-registers before tracing."""
    tracing = cupti.KernelTracing()
    fake.kernels = 0
    assert tracing.begin_step()
    tracing.end_step()
    fake.kernels = 3
    fake.calls.clear()
    assert tracing.begin_step()
    assert fake.calls == ["stop", "start"]
    tracing.close()


def test_predict_on_traces_only_detailed_steps_and_never_synchronises_in_steady_state(
        fake: FakeCupti) -> None:
    habitat_modules.uninstall()
    habitat_phase.uninstall()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    predictor = habitat.predict_on("A100")
    steps: list[tuple[str, bool]] = []  # (kind, CUPTI active inside the step)
    for _ in range(12):
        before = dict(predictor._schedule.kind_counts)
        with predictor:
            active = fake.active
            model(x).sum()
        steps.append((next(k for k, v in predictor._schedule.kind_counts.items() if v != before[k]), active))
    predictor.close()
    detailed = sum(kind == "detailed" for kind, _ in steps)
    assert detailed == predictor.step_counts["detailed"] == 2
    # CUPTI records only inside detailed steps; steady ones stop it first (no kinds enabled,
    # no per-op external correlation, no device synchronisation).
    assert all(active == (kind == "detailed") for kind, active in steps), steps
    assert fake.syncs == detailed
    assert fake.calls.count("start") == detailed and not fake.active


def test_predict_on_steps_aside_for_a_profiler_around_the_training_loop(fake: FakeCupti) -> None:
    habitat_modules.uninstall()
    habitat_phase.uninstall()
    model = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    predictor = habitat.predict_on("A100", detail_every=1)  # every step would trace
    with _cpu_profiler() as prof, pytest.warns(cupti.CuptiWarning, match="torch.profiler"):
        for _ in range(3):
            with predictor:
                model(x).sum()
            predictor.wait()
    assert "start" not in fake.calls and fake.syncs == 0
    assert predictor.step_counts["detailed"] == 3  # forecast all the same, without kernels
    assert sum(e.name == "aten::addmm" for e in prof.events()) >= 3
    with predictor:  # the profiler is gone: the next detailed step traces again
        model(x).sum()
    assert fake.calls.count("start") == 1 and fake.syncs == 1
    predictor.close()
