"""``habitat.predict_on``: capture each training step's aten ops and forecast them on GPUs.

    with habitat.predict_on("A100") as forecast:   # or ["A100", "H100", "L4"]
        loss = model(x).loss; loss.backward(); opt.step()
    print(forecast)

Each ``with`` block is one step; reuse the same ``predict_on`` object across steps and its
forecast accumulates. Ops are captured in C++ (a dispatcher fallback, see
torch_plugin/capture_key.h) with their shapes, phase, module path and autograd node; at the
end of the block the step is forecast for every target.
"""
from __future__ import annotations

import atexit
import json
import os
import platform
import statistics
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterable, Sequence

import torch

from habitat import _C, _engine
from habitat._version import __version__
from habitat.capture import modules as _modules
from habitat.capture import phase as _phase
from habitat.capture.compile import install_compile_callbacks
from habitat.capture.cupti import KernelTracing, hold_nvtx, origin_device, release_nvtx
from habitat.capture.sinks import StepSink, history_handler, log_dir_sinks, tensorboard_handler
from habitat.data.engine import forecast_captured
from habitat.data.forecast import DEFAULT_KEEP_STEPS, Forecast, StepForecast

#: Most ops recorded in one step by default, on a machine with memory to spare; the rest run
#: untouched and are counted as dropped. The default is lower where memory is short (see
#: default_max_ops_per_step).
DEFAULT_MAX_OPS_PER_STEP = 2_000_000
#: Fewest ops the default records, however little memory is free.
MIN_DEFAULT_MAX_OPS = 100_000
#: Bytes a recorded op holds until its step is forecast (C++ records of its arguments,
#: shapes and names): measured at 6.9 KB per op on a CPU capture of 200k ops (benchmarks/
#: scale/scale.py); rounded up.
BYTES_PER_RECORDED_OP = 8 * 1024
#: Share of the memory available when predict_on starts that one step's records may use.
RECORD_MEMORY_SHARE = 0.25


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def default_max_ops_per_step() -> int:
    """Ops one step records by default: as many as fit in a quarter of the memory available
    now (BYTES_PER_RECORDED_OP each), between MIN_DEFAULT_MAX_OPS and DEFAULT_MAX_OPS_PER_STEP,
    so a runaway step cannot exhaust the machine's memory."""
    available = _available_memory()
    if available is None:
        return DEFAULT_MAX_OPS_PER_STEP
    fits = int(available * RECORD_MEMORY_SHARE) // BYTES_PER_RECORDED_OP
    return max(MIN_DEFAULT_MAX_OPS, min(DEFAULT_MAX_OPS_PER_STEP, fits))
#: Detailed steps captured but not yet forecast: while this many wait for the worker, later
#: steps are recorded in steady state (fingerprint and wall time only), so the training
#: thread never waits for the worker.
MAX_PENDING_STEPS = 2
#: Steady-state steps queued for the worker at most; more are skipped (and counted).
MAX_QUEUED_STEPS = 256
#: Steps recorded in full detail at the start of a run (the first ones differ: optimizer state
#: is created, caches warm up); later steps are detailed only when their fingerprint is new.
DEFAULT_DETAIL_STEPS = 2
#: Steady-state steps between two whose fingerprint is computed (see predict_on's
#: fingerprint_every); the others are only timed, with the capture key off their thread. A
#: fingerprinted step costs +12-18 % of a launch-bound step (benchmarks/overhead/steady_ab.py
#: --fingerprint-every 1, CPU proxies), so one in 20 keeps the amortised cost under 1 %.
DEFAULT_FINGERPRINT_EVERY = 20
#: TIME_CHANGE_STEPS timed steps in a row this far (relative, same direction) from their
#: fingerprint's usual time make the next step a fingerprinted one: a new batch size or an
#: eval step often shows in the step time first (not in a launch-bound step, whose time does
#: not follow shapes). The new time becomes the usual one at once, so a lasting change (also
#: a busier machine) costs one fingerprinted step, not one per step until it is forgotten.
TIME_CHANGE = 0.5
TIME_CHANGE_STEPS = 3
#: Steady-state steps whose reused forecast waits before the worker is woken for them (all
#: of them are handled at once, in order; reading the forecast handles them at once too).
REUSE_BATCH = 32
#: A reused step's sinks (log_dir files, TensorBoard, on_step) run in Python on the forecast
#: thread and hold the GIL the training loop needs: a tiny model's log_dir made its steps 4-8x
#: slower. After SINK_ALLOWANCE_S of sink time, the sinks of reused steps get SINK_SHARE of
#: the training time those steps took; the steps between are *coalesced*: forecast, counted
#: (``forecast.steps``), written to the step history and TensorBoard's scalars (one event
#: record, encoded in C++), not sent to the other sinks.
#: Detailed steps always reach them all.
SINK_SHARE = 0.02
SINK_ALLOWANCE_S = 1.0
#: The timeline's host is calibrated to the median wall time of a fingerprint's latest
#: STEADY_WINDOW steady-state steps, once STEADY_MIN_STEPS are seen; the median moving by more
#: than STEADY_RECALIBRATE (relative) since forecasts the detailed step again.
STEADY_WINDOW = 15
STEADY_MIN_STEPS = 5
STEADY_RECALIBRATE = 0.1
#: Detailed steps that try to catch a new steady-state fingerprint before it is given up.
WANTED_ATTEMPTS = 3
#: Distinct step fingerprints whose forecast is kept for reuse (e.g. train and eval steps).
MAX_FINGERPRINTS = 8


class HabitatWarning(UserWarning):
    """Something went wrong in Habitat; the training step itself was not affected."""


_thread = threading.local()  # open predict_on windows on this thread; whether it forecasts


def _open_windows() -> int:
    return getattr(_thread, "open", 0)


def _host() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.node()


def _autocast_enabled() -> bool:
    return any(torch.is_autocast_enabled(device) for device in ("cpu", "cuda"))


def _autocast_dtype() -> str:
    """The dtype autocast casts to ("bfloat16"), "" when off; CUDA's region wins over CPU's,
    as in the capture plugin's per-op reading."""
    for device in ("cuda", "cpu"):
        if torch.is_autocast_enabled(device):
            return str(torch.get_autocast_dtype(device)).removeprefix("torch.")
    return ""


def _read_switch(read: Callable[[], Any], on_conflict: Any) -> Any:
    """A legacy precision getter; torch (2.9+) raises when the program set the newer
    fp32_precision API so that the two disagree: the legacy state is then the default, so the
    new API changed it (as the capture plugin reads it, torch_compat.h)."""
    try:
        return read()
    except RuntimeError:
        return on_conflict


def _precision_flags() -> dict[str, Any]:
    """The precision switches in force now, as the trace origin records them (format 2)."""
    return {
        "allow_tf32": bool(_read_switch(lambda: torch.backends.cuda.matmul.allow_tf32, True)),
        "autocast": _autocast_enabled(),
        "cudnn_allow_tf32": bool(_read_switch(lambda: torch.backends.cudnn.allow_tf32, True)),
        "float32_matmul_precision": _read_switch(torch.get_float32_matmul_precision, "high"),
        "autocast_dtype": _autocast_dtype(),
    }


def _origin(device: str = "cpu") -> dict[str, Any]:
    return {
        "device": device,
        "host": _host(),
        "torch_version": torch.__version__,
        "habitat_version": __version__,
        **_precision_flags(),
    }


def _gpu_of(captured: Any) -> str | None:
    """The database name of the first CUDA device the captured step's ops touched, if any."""
    device = _engine.captured_cuda_device(captured.capsule)
    if device is None:
        return None
    return origin_device(int(device.split(":")[1]) if ":" in device else 0)


class _AllocatorPeak:
    """The CUDA caching allocator's peak during a step, read without resetting the user's
    peak statistics: exact when the step set a new peak, unknown (None) otherwise."""

    def __init__(self) -> None:
        self._before: int | None = None
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self._before = torch.cuda.max_memory_allocated()

    def step_peak(self) -> int | None:
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return None
        after = torch.cuda.max_memory_allocated()
        return after if self._before is None or after > self._before else None


class record_step:  # noqa: N801
    """Captures the aten ops of a block as one trace step, without forecasting them.

    ``step`` holds the step (a trace step dict, docs/trace-format.md) after the block ends
    normally; it stays None when the block raised. The step is kept in C++ and decoded on
    first use of ``step``. :class:`predict_on` is built on this.
    """

    def __init__(self, index: int = 0, *, max_ops: int = DEFAULT_MAX_OPS_PER_STEP,
                 tracing: KernelTracing | None = None, detailed: bool = True) -> None:
        if max_ops < 1:
            raise ValueError(f"max_ops_per_step must be at least 1, got {max_ops}")
        self.index = index
        self.max_ops = int(max_ops)
        # detailed=False: a steady-state step. Only its wall time and fingerprint are kept: no
        # op records, module paths, phases or kernels (no device synchronisation), and no
        # global hooks are installed for it.
        self.detailed = bool(detailed)
        self.fingerprint = 0  # after the block: hash of op names, shapes and dtypes
        self.fingerprint_ops = 0
        self.captured: Any = None  # a _C._CapturedStep once the block ended normally
        self.peak_bytes = 0  # the allocator's peak during the step on a GPU, 0 = unknown
        self._step: dict[str, Any] | None = None
        self._session: Any = None
        # CUPTI tracing of the step's kernels; the outermost window traces (it flushes them all).
        self._tracing = tracing
        self._traced = False
        self._peak: _AllocatorPeak | None = None

    def __enter__(self) -> "record_step":
        if self._session is not None:
            raise RuntimeError("this record_step block is already open")
        detailed = self.detailed
        session = _C._CaptureSession(self.max_ops, detailed)
        outermost = _open_windows() == 0
        if detailed:
            if outermost:
                _modules.reset_thread()
            _modules.acquire()
            _phase.acquire()
        if outermost:
            install_compile_callbacks()  # torch._dynamo.reset() drops them: renew each step
        try:
            self._traced = (detailed and self._tracing is not None and outermost
                            and self._tracing.begin_step())
            session.begin()
        except BaseException:
            if self._traced:
                self._tracing.end_step()  # type: ignore[union-attr]
            if detailed:
                _modules.release()
                _phase.release()
            raise
        self._peak = _AllocatorPeak() if outermost and detailed else None
        _thread.open = _open_windows() + 1
        self._session = session
        # A window never exited (an exception between __enter__ and the with, a predictor
        # dropped while open) would record every later op of the thread: closed when this
        # object is collected.
        self._abandoned = weakref.finalize(self, _close_abandoned, session, detailed,
                                           threading.get_ident(),
                                           self._tracing if self._traced else None)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        session, self._session = self._session, None
        self._abandoned.detach()
        tracing = self._tracing if self._traced else None
        try:
            # The session's end joins the kernels (C++); they must have finished by then.
            flushed = tracing is not None and tracing.prepare_flush()
            captured, warning = session.end(self.index)
            self.fingerprint, self.fingerprint_ops = session.fingerprint, session.fingerprint_ops
            if tracing is not None:
                tracing.end_step(flushed=flushed)
        finally:
            _thread.open = _open_windows() - 1
            if self.detailed:
                if _open_windows() == 0:
                    _modules.reset_thread()
                _modules.release()
                _phase.release()
        if warning:
            warnings.warn(warning, HabitatWarning, stacklevel=2)
        if exc_type is None:
            self.captured = captured
            self.peak_bytes = (self._peak.step_peak() if self._peak is not None else None) or 0
        return False  # never swallow the user's exception

    @property
    def step(self) -> dict[str, Any] | None:
        if self._step is None and self.captured is not None:
            self._step = decode_step(self.captured, self.peak_bytes)
        return self._step


def _close_abandoned(session: Any, detailed: bool, thread: int,
                     tracing: KernelTracing | None) -> None:
    """Ends the window of a record_step collected while open (its ops are discarded). Only on
    the thread that opened it, where the capture state lives; elsewhere it is left open."""
    if threading.get_ident() != thread or not session.open:
        return
    try:
        session.end(-1)
        if tracing is not None:
            tracing.end_step()
    except Exception:  # noqa: BLE001 - collecting garbage must not raise
        pass
    _thread.open = max(0, _open_windows() - 1)
    if detailed:
        if _open_windows() == 0:
            _modules.reset_thread()
        _modules.release()
        _phase.release()


def _settle_key() -> None:
    """The capture key on the calling thread outside capture windows: off (ops skip Habitat
    entirely) until dynamo has compiled code in this process, then on, since compiled code
    guards on the thread's dispatch keys (compile._on_compile_start includes the key before
    dynamo builds the guards; dynamo restores the thread's keys after compiling)."""
    if _open_windows() != 0:
        return
    included = _C._capture_key_included()
    if _modules.compiled_code_seen():
        if not included:
            _C._capture_include_key()
    elif included:
        _C._capture_release_thread()


class _TimedStep:
    """A steady-state step of predict_on that is only timed (no capture session)."""

    __slots__ = ("index", "start")

    def __init__(self) -> None:
        self.index = -1
        self.start = 0.0


def decode_step(captured: Any, peak_bytes: int = 0) -> dict[str, Any]:
    """A captured step as a trace step dict (the encoding runs without the GIL), with the
    allocator's peak when known."""
    step = json.loads(_engine.captured_trace_json(captured.capsule))["steps"][0]
    if peak_bytes:
        step["measured_peak_bytes"] = peak_bytes
    return step


class _DecodedStep(dict):
    """A detailed step decoded once for the steady-state steps that reuse its forecast: their
    trace dicts (:class:`_ReusedStep`) share its ops, and the predictor caches it weakly, so it
    lives only while some step still holds its detail."""

    __slots__ = ("__weakref__", "_json_rest")

    def json_rest(self) -> str:
        """Its JSON without index and wall time, less the opening brace (encoded once)."""
        try:
            return self._json_rest
        except AttributeError:
            rest = {k: v for k, v in self.items() if k not in ("index", "wall_ms")}
            self._json_rest = json.dumps(rest)[1:]
            return self._json_rest


class _ReusedStep(dict):
    """The trace dict of a reused step: its own index and time, the decoded step's ops."""

    __slots__ = ("_source",)

    def __init__(self, source: _DecodedStep, index: int, wall_ms: float) -> None:
        super().__init__(source)
        self["index"], self["wall_ms"] = index, wall_ms
        self._source = source  # keeps the shared decode alive while this step holds detail

    def json_text(self) -> str:
        """The step as JSON (Forecast.to_json), its ops encoded once for all reusing steps."""
        rest = self._source.json_rest()
        head = f'{{"index":{json.dumps(self["index"])},"wall_ms":{json.dumps(self["wall_ms"])}'
        return head + ("," + rest if rest != "}" else "}")


class predict_on:  # noqa: N801  (a context manager named like torch.no_grad)
    """Captures each ``with`` block as one training step and forecasts it on `targets`.

    Args:
        targets: a GPU name or a list of them (see ``habitat devices``); unknown names raise
            here, before any step runs.
        log_dir: if set, each step is logged to TensorBoard there and the forecast (trace
            included) is saved to ``log_dir/forecast.json`` (the sinks of
            :func:`habitat.capture.sinks.log_dir_sinks`, run before `on_step`).
        on_step: a callable ``on_step(forecast, step)`` or a list of them, called with the
            run's Forecast and each new StepForecast once it is forecast, on Habitat's
            background thread ``habitat-forecast-*`` (never the training thread), in step
            order; steps that reuse a forecast reach it in batches of up to 32 (or when the
            forecast is read). Ready-made: :class:`habitat.tensorboard_handler`,
            :class:`habitat.json_handler`. A sink's ``close()``, if any, runs at :meth:`close`.
        max_ops_per_step: ops recorded per step at most; more are run but not recorded
            (the step reports how many were dropped). Default: what fits in a quarter of the
            memory available at start (default_max_ops_per_step), at most 2,000,000.
        verbose: print each step's forecast when it is ready.
        detail_steps: the first steps recorded in full detail (default 2). Later steps run in
            *steady state*: the capture only hashes each op's name, shapes and dtypes into the
            step's fingerprint and measures the step's wall time; a step whose fingerprint
            matches a detailed step reuses that step's forecast (with its own measured time),
            and a step with a new fingerprint (new batch size, eval instead of train, dynamic
            shapes) makes the next step a detailed one, so forecasts follow shape changes.
        detail_every: also record every N-th step in detail (fresh per-op timings and, on a
            GPU, CUDA kernels); 0 (default) never re-samples a known step.
        nvtx: an NVTX range per captured op for Nsight Systems (costly per op; also
            HABITAT_NVTX=1).
        world_size, interconnect, network, gpus_per_node, cluster, parallel: also forecast each
            step on N GPUs of every target (``world_size=8, interconnect="nvlink"``), or on
            ``cluster=habitat.Cluster("H100", 16)`` (or a list of them), with ``parallel``
            "ddp" (default), "fsdp", "tp", "pp", or degrees such as "dp2,tp4" / "pp4x8". The
            step you run is one replica's (one rank's batch). Read them with
            ``forecast.on_clusters()``; ``print(forecast)`` lists them.
        fingerprint_every: in steady state, compute the fingerprint of every N-th step only
            (default 20; 1 = every step). The steps between are only timed: on an eager model
            the capture key is taken off the thread for them, so their ops skip Habitat
            entirely, and they reuse the forecast of the latest fingerprint. The gap starts
            at 1 step and doubles while the fingerprint repeats, up to N; a fingerprint that
            differs from the previous one (new shapes, or train and eval steps taking turns)
            brings it back to 1, so steps that alternate are each fingerprinted. Three timed
            steps in a row more than 50 % off their fingerprint's usual time make the next
            step a fingerprinted one, so a shape change is caught within about 3 steps when
            it shows in the step time, and within N steps otherwise. Between steps the key is
            off the thread too, so code outside the ``with`` block never reaches Habitat.
            (Once torch.compile has compiled code the key stays on the thread until
            :meth:`close`: dynamo guards on it.)
        host_speed: the speed of the host the forecast assumes, relative to this one (default
            1.0: the same host). The timeline (``forecast.step_ms``) plays the step's launch
            cadence at this speed; device work is unaffected.
        keep_steps: the latest steps whose per-op detail is kept in memory (and saved in
            ``forecast.json``'s trace); older steps keep their totals (default 8; None: every
            step). ``print(forecast)`` and the saved file say how many steps lost their detail.

    How each step was handled is in :attr:`step_counts` (also ``forecast.step_counts``):
    ``detailed``, ``reused`` (a steady-state step counted with the forecast of a detailed step
    with the same fingerprint), ``skipped`` (a steady-state step with a new fingerprint, or
    one that found the worker too far behind: measured, not forecast) and ``coalesced`` (reused
    steps forecast and written to ``log_dir/steps.jsonl`` and TensorBoard's per-step scalars,
    but not to TensorBoard's per-op detail, ``forecast.json`` or ``on_step``: after their first
    second of work, the sinks of reused steps get 2 % of the training time, since they run in
    Python and hold the GIL the training loop needs; detailed steps always reach them all).

    ``__enter__`` returns the :class:`~habitat.data.forecast.Forecast`, the same object every step.
    Steps are forecast on a background thread and the training loop never waits for it (when it
    is behind, steps are recorded in steady state, or skipped and counted); reading the forecast
    (or :meth:`close`) waits for the steps still being forecast. Errors
    while forecasting become :class:`HabitatWarning` (raised on the training thread at the next
    step or read); an exception inside the block propagates unchanged and the partial step is
    discarded. Call :meth:`close` when training ends to write the last ``log_dir`` files (a
    predictor left open does it at exit).
    """

    def __init__(self, targets: str | Sequence[str], *, log_dir: str | os.PathLike[str] | None = None,
                 on_step: StepSink | Iterable[StepSink] | None = None,
                 max_ops_per_step: int | None = None, verbose: bool = False,
                 detail_steps: int = DEFAULT_DETAIL_STEPS, detail_every: int = 0,
                 nvtx: bool = False, fingerprint_every: int = DEFAULT_FINGERPRINT_EVERY,
                 world_size: int | None = None, interconnect: str | None = None,
                 network: str | None = None, gpus_per_node: int | None = None,
                 cluster: Any = None, parallel: str | Any = None,
                 host_speed: float = 1.0, keep_steps: int | None = DEFAULT_KEEP_STEPS) -> None:
        self._default_max_ops = max_ops_per_step is None
        if max_ops_per_step is None:
            max_ops_per_step = default_max_ops_per_step()
        if max_ops_per_step < 1:
            raise ValueError(f"max_ops_per_step must be at least 1, got {max_ops_per_step}")
        if detail_steps < 1:
            raise ValueError(f"detail_steps must be at least 1, got {detail_steps}")
        if detail_every < 0:
            raise ValueError(f"detail_every must be 0 (never) or more, got {detail_every}")
        if fingerprint_every < 1:
            raise ValueError(f"fingerprint_every must be at least 1, got {fingerprint_every}")
        self.detail_steps = int(detail_steps)
        self.fingerprint_every = int(fingerprint_every)
        self._last_fingerprint: int | None = None  # of the latest fingerprinted step
        self._last_fingerprinted = -1  # its index
        # Steps from one fingerprinted step to the next: 1 after a step whose fingerprint
        # differs from the one before (shapes changed, or train and eval steps alternate),
        # doubling while it repeats, up to fingerprint_every.
        self._fingerprint_interval = 1
        self._check_next = False  # timed steps' time changed: fingerprint the next one
        self._last_shift = 0  # the latest timed step: +1 / -1 off its usual time, 0 not
        self._shifts = 0  # timed steps in a row with that shift
        self._usual_ms: dict[int, float] = {}  # timed steps' time per fingerprint (moving)
        # Steps begun per kind ('detailed', 'fingerprinted', 'timed'), for benchmarks.
        self._kind_counts = {"detailed": 0, "fingerprinted": 0, "timed": 0}
        self.detail_every = int(detail_every)
        self._nvtx = nvtx
        self._nvtx_held = False  # a hold_nvtx() of this predictor, until close()
        # Fingerprints of steady steps not known in detail, with the detailed steps left to
        # catch them: while any is wanted, steps are recorded in detail.
        self._wanted: dict[int, int] = {}
        self._known: dict[int, None] = {}  # fingerprints captured in detail, oldest first
        # Worker side: the forecast to reuse per fingerprint, (summary, captured, peak bytes, rows,
        # the steady-state wall time (ms) its timeline is calibrated to, 0.0 for none).
        self._by_fingerprint: dict[int, tuple[Any, ...]] = {}
        self._steady_walls: dict[int, deque[float]] = {}  # worker side: latest steady walls
        # Worker side: the decoded detailed step per fingerprint, while reused steps hold it
        # (saving forecast.json reads every kept step's trace: decode each fingerprint once).
        self._decoded: "weakref.WeakValueDictionary[int, _DecodedStep]" = weakref.WeakValueDictionary()
        self._queue: deque[tuple[Any, ...]] = deque()  # steps for the worker, in order
        self._queued_detailed = 0
        self._draining = False
        self._counts = {"detailed": 0, "reused": 0, "skipped": 0, "coalesced": 0}
        self._sink_credit_s = SINK_ALLOWANCE_S  # sink time reused steps may still take
        self.forecast: Forecast = Forecast(targets, _origin(), host_speed=host_speed,
                                           keep_steps=keep_steps)
        self._set_clusters(world_size, interconnect, network, gpus_per_node, cluster, parallel)
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.max_ops_per_step = int(max_ops_per_step)
        self.verbose = verbose
        self._lock = threading.Lock()
        self._sessions: dict[int, record_step] = {}  # by thread id
        self._threads: set[int] = set()  # threads that ran a step since the last close()
        self._next_index = 0
        self._origin_fixed = False
        self._sinks: list[StepSink] = [*(log_dir_sinks(self.log_dir) if self.log_dir else ()),
                                       *_sink_list(on_step)]
        self._tracing = KernelTracing()
        self._worker: ThreadPoolExecutor | None = None
        self._pending: deque[Future[None]] = deque()
        self._messages: deque[str] = deque()  # warnings from the worker, raised on our thread
        self.forecast._wait = self.wait
        # The same dict, for views of the forecast (updated as the worker goes).
        self.forecast.step_counts = self._counts  # type: ignore[attr-defined]
        if any(hasattr(sink, "close") for sink in self._sinks):
            _unclosed.add(self)

    # ----- one step ------------------------------------------------------------------
    def __enter__(self) -> "Forecast":
        thread = threading.get_ident()
        with self._lock:
            if thread in self._sessions:
                raise RuntimeError(
                    "this predict_on(...) block is already open on this thread; each `with` is "
                    "one step, so close it before the next (for a second forecast of the same "
                    "ops, nest a separate habitat.predict_on(...) instead)")
            if not self._origin_fixed:
                self.forecast.origin.update(_precision_flags())
            if thread not in self._threads:  # the first step on this thread since close()
                self._threads.add(thread)
                if self._nvtx and not self._nvtx_held:
                    hold_nvtx()
                    self._nvtx_held = True
                _modules.note_predicting(self)  # code compiled on this thread keeps the key
            kind = self._next_kind_locked()
            self._kind_counts[kind] += 1
            if kind == "timed":
                # The common steady-state step: only timed, one lock, no capture session.
                timed = _TimedStep()
                self._sessions[thread] = timed  # type: ignore[assignment]
        if kind != "detailed" and _C.cupti_active():
            self._tracing.close()  # no kernel tracing (nor its per-op cost) in steady state
        if kind == "timed":
            _settle_key()  # off: the step's ops skip Habitat entirely (eager code)
            timed.start = time.perf_counter()
            return self.forecast
        # The step's index is given when it ends normally, so a failed step leaves no gap.
        recording = record_step(-1, max_ops=self.max_ops_per_step, tracing=self._tracing,
                                detailed=kind == "detailed")
        recording.__enter__()
        with self._lock:
            self._sessions[thread] = recording
        return self.forecast

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        stop = time.perf_counter()
        with self._lock:
            recording = self._sessions.pop(threading.get_ident())
            if exc_type is None:
                recording.index = self._next_index
                self._next_index += 1
                if type(recording) is _TimedStep:
                    self._submit_timed_locked(recording.index, (stop - recording.start) * 1e3)
        if type(recording) is not _TimedStep:
            recording.__exit__(exc_type, exc, tb)
            if recording.captured is not None:
                self._submit(recording)
            _settle_key()  # code between steps (data loading, logging) skips Habitat too
        if self._messages or self._pending:
            self._raise_messages(wait=False)
        return False  # never swallow the user's exception

    @property
    def step_counts(self) -> dict[str, int]:
        """How the steps so far were handled (waits for the steps still being forecast):
        ``detailed`` (recorded and forecast in full), ``reused`` (steady state: the forecast
        of a detailed step with the same fingerprint, with the step's own measured time),
        ``skipped`` (measured, not forecast: a new fingerprint, or the worker far behind)."""
        self.wait()
        return self._counts

    # ----- which steps are detailed ----------------------------------------------------
    def _next_kind_locked(self) -> str:
        """'detailed', 'fingerprinted' (steady state) or 'timed' (steady state, no capture).
        Hold the lock."""
        n = self._next_index  # steps that ended normally: a failed one takes no slot
        wanted = (n < self.detail_steps or bool(self._wanted)
                  or (self.detail_every > 0 and n % self.detail_every == 0))
        # The worker is behind on detailed steps: record this one in steady state instead
        # (a later step is detailed once it caught up), never wait for it.
        if wanted and self._queued_detailed < MAX_PENDING_STEPS:
            return "detailed"
        if (self._check_next or self._last_fingerprint is None
                or n - self._last_fingerprinted >= self._fingerprint_interval):
            return "fingerprinted"
        return "timed"

    def _submit_timed_locked(self, index: int, wall_ms: float) -> None:
        """A timed step: the forecast of the latest fingerprint, with the step's own time.
        Hold the lock."""
        fingerprint = self._last_fingerprint
        usual = self._usual_ms.get(fingerprint)  # type: ignore[arg-type]
        # Timed steps in a row off the usual time in the same direction: a change, not a
        # one-off (a busy machine, a garbage collection).
        shift = 0 if usual is None or abs(wall_ms / usual - 1) <= TIME_CHANGE else (
            1 if wall_ms > usual else -1)
        self._shifts = self._shifts + 1 if shift != 0 and shift == self._last_shift else 1
        self._last_shift = shift
        if shift != 0 and self._shifts >= TIME_CHANGE_STEPS:
            self._check_next = True
            # The new time is the usual one from now on: a lasting change is checked once.
            self._usual_ms[fingerprint] = wall_ms  # type: ignore[index]
            self._shifts = self._last_shift = 0
        else:
            self._usual_ms[fingerprint] = wall_ms if usual is None else 0.8 * usual + 0.2 * wall_ms  # type: ignore[index]
        if fingerprint not in self._known or len(self._queue) >= MAX_QUEUED_STEPS:
            self._counts["skipped"] += 1
            return
        self._queue.append(("reuse", index, wall_ms, fingerprint))
        if len(self._queue) >= REUSE_BATCH:
            self._schedule_drain()

    # ----- forecasting, off the training thread --------------------------------------
    def _submit(self, recording: record_step) -> None:
        fingerprint = recording.fingerprint
        with self._lock:
            self._fingerprint_interval = (
                min(2 * self._fingerprint_interval, self.fingerprint_every)
                if fingerprint == self._last_fingerprint else 1)
            self._last_fingerprint, self._last_fingerprinted = fingerprint, recording.index
            self._check_next = False
            if recording.detailed:
                self._known.pop(fingerprint, None)
                self._known[fingerprint] = None
                while len(self._known) > MAX_FINGERPRINTS:
                    self._known.pop(next(iter(self._known)))
                if self._wanted.pop(fingerprint, None) is None:
                    # Not the step that was wanted (e.g. train and eval steps alternate): try
                    # again at the next step, a couple of times at most (shapes that never
                    # repeat do not keep every step detailed).
                    self._wanted = {fp: left - 1 for fp, left in self._wanted.items() if left > 1}
                item: tuple[Any, ...] = ("detailed", recording.index, recording.captured,
                                         recording.peak_bytes, fingerprint)
                self._queued_detailed += 1
            elif fingerprint in self._known and len(self._queue) < MAX_QUEUED_STEPS:
                item = ("reuse", recording.index, recording.captured.wall_ms, fingerprint)
            else:
                # Measured, not forecast: new shapes (the next step is recorded in detail), or
                # a worker far behind.
                if fingerprint not in self._known:
                    self._wanted[fingerprint] = WANTED_ATTEMPTS
                self._counts["skipped"] += 1
                return
            self._queue.append(item)
            # A reused forecast is cheap: the worker takes them in batches (or when the
            # forecast is read), so steady-state steps do not wake it and contend for the GIL.
            if item[0] == "detailed" or len(self._queue) >= REUSE_BATCH:
                self._schedule_drain()

    def _schedule_drain(self) -> None:
        """Starts the worker on the queue unless it is on it already (hold the lock)."""
        if self._draining:
            return
        self._draining = True
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="habitat-forecast")
        self._pending.append(self._worker.submit(self._drain))

    def _drain(self) -> None:
        """The worker: handles queued steps in order until the queue is empty."""
        while True:
            with self._lock:
                if not self._queue:
                    self._draining = False
                    return
                item = self._queue.popleft()
            try:
                if item[0] == "detailed":
                    _, index, captured, peak_bytes, fingerprint = item
                    self._forecast_step(captured, peak_bytes, index, fingerprint)
                else:
                    _, index, wall_ms, fingerprint = item
                    self._reuse_forecast(index, wall_ms, fingerprint)
            finally:
                if item[0] == "detailed":
                    with self._lock:
                        self._queued_detailed -= 1

    def _set_clusters(self, world_size: int | None, interconnect: str | None, network: str | None,
                      gpus_per_node: int | None, cluster: Any, parallel: Any) -> None:
        """Multi-GPU forecasts of each step (forecast.on_clusters(), print(forecast)): checked
        here, before any step runs."""
        self.forecast.clusters = _cluster_specs(self.forecast.targets, world_size, interconnect,
                                                network, gpus_per_node, cluster)
        self.forecast.parallel = parallel
        if self.forecast.clusters:
            self.forecast.on_clusters(check=True)
        elif parallel is not None:
            raise ValueError("parallel= needs a cluster: give world_size=N or cluster=habitat.Cluster(...)")

    def wait(self) -> None:
        """Waits until every finished step is forecast (reading the forecast does this)."""
        if getattr(_thread, "forecasting", False):
            return  # the worker reading its own forecast (logging, printing)
        with self._lock:
            if self._queue:
                self._schedule_drain()  # reused steps still batched
        self._raise_messages(wait=True, stacklevel=5)

    def _raise_messages(self, *, wait: bool, stacklevel: int = 3) -> None:
        with self._lock:
            futures = list(self._pending)
        for future in futures:
            if not wait and not future.done():
                break
            future.result()
            with self._lock:
                if self._pending and self._pending[0] is future:
                    self._pending.popleft()
        while self._messages:
            warnings.warn(self._messages.popleft(), HabitatWarning, stacklevel=stacklevel)

    def _count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def _reuse_forecast(self, index: int, wall_ms: float, fingerprint: int) -> None:
        """A steady-state step: the forecast of the detailed step with its fingerprint,
        counted with the step's own measured time."""
        cached = self._by_fingerprint.get(fingerprint)
        if cached is None:  # that detailed step could not be forecast
            self._count("skipped")
            return
        _thread.forecasting = True
        cached = self._calibrated_to_steady_steps(fingerprint, wall_ms, cached)
        summary, captured, peak_bytes, rows, _ = cached

        def detail() -> tuple[dict[str, Any], Any]:  # called under the detail lock
            decoded = self._decoded.get(fingerprint)
            if decoded is None:
                decoded = _DecodedStep(decode_step(captured, peak_bytes))
                self._decoded[fingerprint] = decoded
            return _ReusedStep(decoded, index, wall_ms), rows

        forecast = self.forecast._add_forecast(index, wall_ms, summary, detail, rows)
        self._count("reused")
        if not self._sinks and not self.verbose:
            return
        credit = min(SINK_ALLOWANCE_S, self._sink_credit_s + SINK_SHARE * wall_ms / 1e3)
        start = time.thread_time()
        if credit <= 0:
            # Coalesced: only the step history (steps.jsonl, one short line) and the TensorBoard
            # scalars (one event record encoded in C++) are written, so every forecast step
            # stays on disk and in TensorBoard; their time counts against the share.
            self._count("coalesced")
            self._run_sinks(forecast, index, _coalesced_sinks(self._sinks))
        else:
            self._run_sinks(forecast, index)
        self._sink_credit_s = credit - (time.thread_time() - start)

    def _calibrated_to_steady_steps(self, fingerprint: int, wall_ms: float,
                                    cached: tuple[Any, ...]) -> tuple[Any, ...]:
        """The detailed step's forecast with the timeline's host calibrated to the median wall
        time of this fingerprint's latest steady-state steps (they record nothing, or only a
        fingerprint; a detailed step's host is slowed by the capture and CUPTI beyond what the
        engine removes per op). Forecast again once STEADY_MIN_STEPS are seen, and again when
        their median moves by more than STEADY_RECALIBRATE; GPU origins only (a CPU origin's
        host cadence is modelled, not replayed). Worker side."""
        if self.forecast.origin.get("device", "cpu") == "cpu":
            return cached
        if fingerprint not in self._steady_walls and len(self._steady_walls) >= MAX_FINGERPRINTS:
            for gone in [fp for fp in self._steady_walls if fp not in self._by_fingerprint]:
                del self._steady_walls[gone]
        walls = self._steady_walls.setdefault(fingerprint, deque(maxlen=STEADY_WINDOW))
        walls.append(wall_ms)
        if len(walls) < STEADY_MIN_STEPS:
            return cached
        median = statistics.median(walls)
        calibrated_to = cached[4]
        if calibrated_to and abs(median / calibrated_to - 1) <= STEADY_RECALIBRATE:
            return cached
        summary, captured, peak_bytes, _, _ = cached
        try:
            summary, rows = forecast_captured(captured.capsule, self.forecast.origin, self.forecast.targets,
                                              self.forecast.host_speed, steady_wall_ms=median)
        except Exception:  # the uncalibrated forecast stands
            return cached
        calibrated = (summary, captured, peak_bytes, rows, median)
        self._by_fingerprint[fingerprint] = calibrated
        return calibrated

    def _forecast_step(self, captured: Any, peak_bytes: int, index: int,
                       fingerprint: int | None = None) -> None:
        _thread.forecasting = True
        try:
            if captured.dropped_ops:
                why = (f" (the default for this machine: a quarter of the memory available at "
                       f"start, ~{BYTES_PER_RECORDED_OP // 1024} KB per recorded op)"
                       if self._default_max_ops else "")
                self._messages.append(
                    f"habitat: step {index} ran more than {self.max_ops_per_step} ops{why}; "
                    f"{captured.dropped_ops} were not recorded and are missing from its forecast "
                    "(raise predict_on(..., max_ops_per_step=N) if the memory is there)")
            if not self._origin_fixed:
                gpu = _gpu_of(captured) if torch.cuda.is_available() else None
                if gpu is not None:
                    self.forecast.origin["device"] = gpu
                self._origin_fixed = True
            # The engine runs without the GIL; the per-op detail (the step decoded, an object
            # per op) is built only when something reads it, so training threads keep the GIL.
            summary_doc, rows = forecast_captured(captured.capsule, self.forecast.origin,
                                                  self.forecast.targets, self.forecast.host_speed)
            forecast = self.forecast._add_forecast(
                index, captured.wall_ms, summary_doc,
                lambda: (decode_step(captured, peak_bytes), rows), rows)
        except Exception as e:  # a forecasting problem must not stop training
            self._count("skipped")
            self._messages.append(
                f"habitat: could not forecast step {index} ({type(e).__name__}: {e}); the "
                "training step itself ran normally")
            return
        self._count("detailed")
        if fingerprint is not None:
            cache = self._by_fingerprint
            cache.pop(fingerprint, None)
            cache[fingerprint] = (summary_doc, captured, peak_bytes, rows, 0.0)
            while len(cache) > MAX_FINGERPRINTS:
                cache.pop(next(iter(cache)))
        self._run_sinks(forecast, index)

    def _run_sinks(self, forecast: StepForecast, index: int, sinks: list[StepSink] | None = None) -> None:
        for sink in self._sinks if sinks is None else sinks:
            try:
                sink(self.forecast, forecast)
            except Exception as e:  # nor must a sink's
                self._messages.append(
                    f"habitat: {_sink_name(sink)} failed on step {index} ({type(e).__name__}: "
                    f"{e}); the training step itself ran normally")
        if self.verbose and sinks is None:
            print(forecast)

    def close(self) -> None:
        """Forecasts the steps still pending, writes ``log_dir/forecast.json`` and closes the
        TensorBoard writer. The object can be used again afterwards."""
        self.wait()
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)
        # Training with Habitat is over: no global hooks stay behind (module calls and
        # optimizer steps pay nothing), no kernel tracing, no NVTX ranges.
        with self._lock:
            self._threads.clear()
            held, self._nvtx_held = self._nvtx_held, False
        if held:
            release_nvtx()
        _modules.forget_predicting(self)
        if _open_windows() == 0:
            _modules.uninstall()
            _phase.uninstall()
            # Nor the capture key on this thread (the boxed fallback every op would still pass
            # through), unless compiled code guards on it.
            if _C._capture_key_included() and not _modules.compiled_code_seen():
                _C._capture_release_thread()
        self._tracing.close()
        errors = []
        for sink in self._sinks:
            try:
                close = getattr(sink, "close", None)
                if close is not None:
                    close()
            except Exception as e:
                errors.append(e)
        _unclosed.discard(self)
        for e in errors:  # closing must not raise into the user's code
            warnings.warn(f"habitat: a sink failed to close ({type(e).__name__}: {e})",
                          HabitatWarning, stacklevel=2)


def _cluster_specs(targets: list[str], world_size: int | None, interconnect: str | None,
                   network: str | None, gpus_per_node: int | None, cluster: Any) -> list[Any]:
    """predict_on's multi-GPU arguments as the clusters a Forecast holds."""
    if cluster is not None:
        if world_size is not None or interconnect is not None or network is not None:
            raise ValueError("give either cluster=habitat.Cluster(...) or world_size/interconnect/network, "
                             "not both")
        return list(cluster) if isinstance(cluster, (list, tuple)) else [cluster]
    if world_size is None:
        if interconnect is not None or network is not None or gpus_per_node is not None:
            raise ValueError("interconnect, network and gpus_per_node describe a cluster: also give "
                             "world_size (e.g. world_size=8)")
        return []
    return [{"gpu": t, "world_size": int(world_size), "gpus_per_node": gpus_per_node,
             "interconnect": interconnect, "network": network} for t in targets]


def _coalesced_sinks(sinks: list[StepSink]) -> list[StepSink]:
    """What still runs for a coalesced step: the step history, and TensorBoard's scalars."""
    return [s if isinstance(s, history_handler) else s.log_scalars for s in sinks
            if isinstance(s, (history_handler, tensorboard_handler))]


def _sink_list(on_step: StepSink | Iterable[StepSink] | None) -> list[StepSink]:
    if on_step is None:
        return []
    sinks = [on_step] if callable(on_step) else list(on_step)
    for sink in sinks:
        if not callable(sink):
            raise TypeError(f"on_step takes callables sink(forecast, step), got {sink!r}")
    return sinks


def _sink_name(sink: StepSink) -> str:
    return getattr(sink, "__qualname__", None) or type(sink).__name__


_unclosed: "weakref.WeakSet[predict_on]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    """Writes the last log_dir files of predictors the program did not close."""
    for predictor in list(_unclosed):
        try:
            predictor.close()
        except Exception as e:  # exiting: report, never raise
            print(f"habitat: could not close the sinks of {predictor.log_dir or 'predict_on'} at exit ({type(e).__name__}: {e})",
                  file=sys.stderr)
