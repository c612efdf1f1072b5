"""CUDA kernel tracing with CUPTI: the kernels each captured op launched on the GPU you have.

The C++ tracer (torch_plugin/cupti/cupti_tracer.h) tags every op's CUDA launches with a CUPTI
external correlation id, so each kernel record maps to exactly the op that launched it.
:class:`KernelTracing` drives it one step at a time and steps aside, with a single warning,
whenever it cannot trace: a CPU-only build, no GPU, no profiling permission, or another
CUPTI client (torch.profiler, Nsight) holding CUPTI. Forecasts then use per-op timing or
shapes, and training is never affected.
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from habitat import _C
from habitat.data.devices import UnknownDeviceError, get_device

__all__ = [
    "KernelTracing",
    "StepKernels",
    "cupti_available",
    "cupti_status",
    "measure_launch_overhead",
    "origin_device",
    "profiler_running",
]

#: The start-up measurement of CUPTI's own host time per kernel launch (once per process, at
#: the first traced step): LAUNCH_PROBE_LAUNCHES launches of a one-element in-place add, timed
#: with CUPTI's activity records off and on, LAUNCH_PROBE_ROUNDS times each, alternating.
LAUNCH_PROBE_LAUNCHES = 200
LAUNCH_PROBE_ROUNDS = 3

_warned: set[str] = set()
_launch_probe_failed = False  # the probe could not start CUPTI's records: not tried again

# NVTX ranges cost per op, so they stay on only while someone asked for them: each
# predict_on(nvtx=True) or KernelTracing(record_nvtx=True) holds a request until it closes.
_nvtx_lock = threading.Lock()
_nvtx_holds = 0


def _nvtx_by_env() -> bool:
    value = os.environ.get("HABITAT_NVTX", "")
    return value not in ("", "0")


def hold_nvtx() -> None:
    """Emits an NVTX range per captured op until the matching :func:`release_nvtx`."""
    global _nvtx_holds
    with _nvtx_lock:
        _nvtx_holds += 1
        _C.nvtx_request(True)


def release_nvtx() -> None:
    """Ends one :func:`hold_nvtx`; with none left, NVTX is back to ``HABITAT_NVTX``'s choice."""
    global _nvtx_holds
    with _nvtx_lock:
        _nvtx_holds = max(0, _nvtx_holds - 1)
        if _nvtx_holds == 0:
            _C.nvtx_request(_nvtx_by_env())


class CuptiWarning(UserWarning):
    """Kernel tracing is off or incomplete; forecasts fall back, training is unaffected."""


def _warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(f"habitat: {message}", CuptiWarning, stacklevel=3)


def cupti_status() -> str:
    """Why kernel tracing is or is not available: 'tracing', 'not started', or the reason."""
    if not _C.cupti_compiled():
        return _C.cupti_status()
    if not torch.cuda.is_available():
        return "CUPTI is compiled in, but torch sees no CUDA GPU: there are no kernels to trace"
    return _C.cupti_status()


def cupti_available() -> bool:
    """True when this build can trace CUDA kernels here: CUPTI compiled in, a CUDA GPU
    visible, and no failed attempt to start tracing (see :func:`cupti_status`)."""
    return bool(_C.cupti_compiled()) and torch.cuda.is_available() and bool(_C.cupti_available())


def profiler_running() -> bool:
    """Whether torch.profiler (Kineto, also a CUPTI client) is recording now."""
    enabled = getattr(torch.autograd.profiler, "_is_profiler_enabled", False)
    return bool(enabled() if callable(enabled) else enabled)


def origin_device(index: int | None = None) -> str:
    """The database name of CUDA device `index` (default: the current one), or "cpu".

    An unknown GPU keeps torch's name and warns: runtime-based forecasts need the origin's
    specifications, so its ops are then forecast from their shapes.
    """
    if not torch.cuda.is_available():
        return "cpu"
    name = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index).name
    try:
        return str(get_device(name).name)
    except UnknownDeviceError as exc:
        _warn_once(f"origin:{name}", f"this GPU ({name}) is not in the device database, so its "
                   f"measured kernels cannot be scaled to other GPUs and ops are forecast from "
                   f"their shapes. Describe it in a JSON file and pass it to "
                   f"habitat.data.devices.load_devices() ({exc})")
        return name


def measure_launch_overhead(launch: Callable[[], None], records_on: Callable[[], bool],
                            records_off: Callable[[], None], synchronize: Callable[[], None], *,
                            launches: int = LAUNCH_PROBE_LAUNCHES,
                            rounds: int = LAUNCH_PROBE_ROUNDS,
                            clock: Callable[[], float] = time.perf_counter) -> float | None:
    """CUPTI's own host time per kernel launch, in microseconds: `launches` calls of `launch`
    (one kernel each) timed on the host with CUPTI's activity records off, then on
    (`records_on()` starts them, False when it cannot; `records_off()` flushes and stops them),
    `rounds` times; the fastest round of each mode (the least disturbed by anything else on the
    host), their difference per launch, at least 0. None when the records could not be started.

    The timeline takes this cost out of each launch of a traced step (the step's
    ``launch_overhead_us``): measured here, on this host, rather than assumed."""
    if launches < 1 or rounds < 1:
        raise ValueError(f"launches and rounds must be at least 1, got {launches} and {rounds}")

    def timed() -> float:
        synchronize()
        t0 = clock()
        for _ in range(launches):
            launch()
        elapsed = clock() - t0
        synchronize()
        return elapsed

    for _ in range(max(1, launches // 10)):  # warm-up: caches, the kernel's first load
        launch()
    off: list[float] = []
    on: list[float] = []
    for _ in range(rounds):
        off.append(timed())
        if not records_on():
            return None
        try:
            on.append(timed())
        finally:
            records_off()
    return max(0.0, (min(on) - min(off)) / launches * 1e6)


def _probe_launch_overhead() -> float | None:
    """measure_launch_overhead on the current CUDA device, with Habitat's CUPTI client."""
    x = torch.zeros(1, device="cuda")

    def launch() -> None:
        x.add_(1.0)

    def records_on() -> bool:
        return bool(_C.cupti_start(False)[0])

    def records_off() -> None:
        torch.cuda.synchronize()
        _C.cupti_flush()  # the probe's kernels are no step's: dropped
        _C.cupti_stop()

    with torch.no_grad():
        return measure_launch_overhead(launch, records_on, records_off, torch.cuda.synchronize)


@dataclass
class StepKernels:
    """The kernels of one step, per op id, with the record counts (never silently lossy)."""

    ops: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # trace-format kernels
    stats: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    message: str = ""
    nvtx_ranges: int = 0
    nvtx_sample: list[str] = field(default_factory=list)
    orphan_kernels: int = 0  # kernels of ops the step did not hold (past its record cap)

    @classmethod
    def from_json(cls, text: str) -> "StepKernels":
        doc = json.loads(text)
        return cls(ops={int(k): v for k, v in doc["ops"].items()}, stats=doc["stats"],
                   ok=doc["ok"], message=doc["message"], nvtx_ranges=doc["nvtx_ranges"],
                   nvtx_sample=list(doc["nvtx_sample"]),
                   orphan_kernels=int(doc.get("orphan_kernels", 0)))

    def problems(self) -> list[str]:
        """What makes this step's kernel list incomplete, in words (empty when it is not)."""
        s = self.stats
        out = [] if self.ok else [self.message]
        if s.get("dropped"):
            out.append(f"CUPTI dropped {s['dropped']} activity records (its buffers were full)")
        if s.get("overflow"):
            out.append(f"{s['overflow']} records exceeded the per-step bound and were discarded")
        if s.get("incomplete"):
            out.append(f"{s['incomplete']} kernels had not finished when the step was flushed")
        if s.get("stale"):
            out.append(f"{s['stale']} kernels arrived after their step was flushed")
        return out


class KernelTracing:
    """Kernel tracing for a sequence of steps, with the warn-once fallback.

    Standalone::

        tracing.begin_step()          # is this step traced?
        ...                           # ops run inside ScopedKernelAttribution (C++; tests: _C._OpScope)
        kernels = tracing.end_step()  # synchronise, flush, kernels per op id

    With the capture session, whose end attaches the kernels in C++ (KernelTracer::flush_into)::

        tracing.begin_step(); session.begin()
        ...
        tracing.prepare_flush(); session.end()   # synchronise, then C++ flushes and attaches
        tracing.end_step(flushed=True)           # counts of that flush, warnings; stops CUPTI

    CUPTI is held only from begin_step to end_step: between steps no activity kind is enabled
    and no buffer of Habitat's is with CUPTI, so torch.profiler can take over cleanly.
    """

    def __init__(self, *, enabled: bool = True, record_nvtx: bool = False,
                 measure_launch_cost: bool = True) -> None:
        self.enabled = enabled
        self.record_nvtx = record_nvtx
        # Before the process's first traced step: CUPTI's host time per launch on this host
        # (measure_launch_overhead), kept in every traced step for the timeline.
        self.measure_launch_cost = measure_launch_cost
        self._nvtx_held = False
        self._hold_nvtx()
        self._restart = False
        self._tracing = False
        self._prepared = False

    @property
    def tracing(self) -> bool:
        """Whether the current step's kernels are being traced."""
        return self._tracing

    def begin_step(self) -> bool:
        self._tracing = self._prepared = False
        self._hold_nvtx()  # again after a close()
        if not self.enabled:
            return False
        if not torch.cuda.is_available():
            return False  # no GPU, no kernels: forecasts come from shapes, as documented
        if not _C.cupti_compiled():
            _warn_once("unavailable", f"{cupti_status()}. Ops are timed without kernel detail.")
            return False
        if profiler_running():
            if _C.cupti_active():
                _C.cupti_detach("torch.profiler is running")
            self._restart = True
            _warn_once("profiler", "torch.profiler is running, and CUPTI serves one client at a "
                       "time: Habitat pauses its kernel tracing until the profiler stops (ops "
                       "are timed without kernel detail meanwhile)")
            return False
        if self._restart:
            # Another client may have replaced our callbacks or disabled our kinds.
            _C.cupti_stop()
            self._restart = False
        if self.measure_launch_cost and _C.cupti_launch_overhead() is None and not _C.cupti_active():
            self._measure_launch_cost()
        ok, message = _C.cupti_start(self.record_nvtx)
        if not ok:
            _warn_once(f"start:{message}", message)
            return False
        self._tracing = True
        return True

    @staticmethod
    def _measure_launch_cost() -> None:
        global _launch_probe_failed
        if _launch_probe_failed:
            return
        try:
            us = _probe_launch_overhead()
        except Exception as exc:  # noqa: BLE001 - a probe must never break the user's step
            us = None
            _warn_once("probe", f"could not measure CUPTI's cost per kernel launch ({exc}); the "
                       "timeline keeps it in the traced host cadence")
        if us is None:
            _launch_probe_failed = True
            return
        _C.cupti_set_launch_overhead(us)

    def prepare_flush(self) -> bool:
        """Readies the step's records for a flush; False when the step's kernels are lost."""
        if not self._tracing:
            return False
        if profiler_running():  # started during the step: it took CUPTI over
            _C.cupti_detach("torch.profiler started during the step")
            self._tracing = False
            self._restart = True
            _warn_once("profiler", "torch.profiler started during a traced step: that step's "
                       "kernels are incomplete; Habitat pauses its kernel tracing until the "
                       "profiler stops")
            return False
        torch.cuda.synchronize()  # a kernel still running would arrive without an end time
        self._prepared = True
        return True

    def end_step(self, *, flushed: bool = False) -> StepKernels | None:
        """The step's kernels (None when it was not traced). `flushed`: the capture session
        already flushed and attached them; only its counts are returned."""
        if not self._tracing or not (self._prepared or self.prepare_flush()):
            self._tracing = False
            return None
        self._tracing = self._prepared = False
        kernels = StepKernels.from_json(_C.cupti_last_step() if flushed else _C.cupti_flush())
        # Let go of CUPTI until the next traced step: kinds off, every buffer we lent forced
        # back. CUPTI completes a buffer into whichever client's callbacks are registered
        # then, so a profiler started between steps (it registers its own) would otherwise
        # receive ours ("bufferCompleted called with unknown buffer"), and plain steps would
        # pay for activity records nobody reads.
        ok, message = _C.cupti_stop()
        if not ok:
            _warn_once(f"stop:{message[:60]}", message)
        for problem in kernels.problems():
            _warn_once(f"problem:{problem.split(' ', 2)[-1][:40]}", problem)
        if kernels.stats.get("kernels", 0) == 0:
            # Nothing at all: an idle step, or another CUPTI client took over mid-step.
            self._restart = True
        return kernels

    def _hold_nvtx(self) -> None:
        if self.record_nvtx and not self._nvtx_held:  # collecting the ranges implies emitting them
            hold_nvtx()
            self._nvtx_held = True

    def close(self) -> None:
        self._tracing = self._prepared = False
        if _C.cupti_active():
            _C.cupti_stop()
        if self._nvtx_held:
            release_nvtx()
            self._nvtx_held = False


@atexit.register
def _stop_at_exit() -> None:
    # While CUDA is still up: CUPTI may otherwise deliver buffers during interpreter teardown.
    if _C.cupti_active():
        _C.cupti_stop()
