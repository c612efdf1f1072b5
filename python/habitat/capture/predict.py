"""``habitat.predict_on``: capture each training step's aten ops and forecast them on GPUs.

    with habitat.predict_on("A100") as forecast:   # or ["A100", "H100", "L4"]
        loss = model(x).loss; loss.backward(); opt.step()
    print(forecast)

Each ``with`` block is one step; reuse the same ``predict_on`` object across steps and its
forecast accumulates. Ops are captured in C++ (a dispatcher fallback, see
torch_plugin/capture/capture_key.h) with their shapes, phase, module path and autograd node;
at the end of the block the step is forecast for every target.

predict_on is the facade; each job has its module: which steps are detailed, fingerprinted
or timed (:mod:`~habitat.capture.schedule`, torch-free), one step's capture window
(:mod:`~habitat.capture.record`), the background forecast and the sinks
(:mod:`~habitat.capture.worker`), reused forecasts of steady-state steps
(:mod:`~habitat.capture.reuse`), what is read from the machine and torch
(:mod:`~habitat.capture.environment`) and the multi-GPU arguments
(:mod:`~habitat.capture.clusters`).
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
import warnings
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable, Sequence

from habitat import _C
from habitat.capture import modules as _modules
from habitat.capture import phase as _phase
from habitat.capture.clusters import set_clusters
from habitat.capture.cupti import KernelTracing, hold_nvtx, release_nvtx
from habitat.capture.environment import (
    BYTES_PER_RECORDED_OP,
    DEFAULT_MAX_OPS_PER_STEP,
    MIN_DEFAULT_MAX_OPS,
    default_max_ops_per_step,
    precision_flags,
    trace_origin,
)
from habitat.capture.mistakes import HabitatUsageWarning, forward_only, fresh_predictors, new_serial
from habitat.capture.record import HabitatWarning, decode_step, open_windows, record_step, settle_key
from habitat.capture.reuse import STEADY_MIN_STEPS
from habitat.capture.schedule import DEFAULT_DETAIL_STEPS, DEFAULT_FINGERPRINT_EVERY, StepSchedule
from habitat.capture.sinks import StepSink, log_dir_sinks
from habitat.capture.worker import ForecastWorker, sink_list
from habitat.data.forecast import DEFAULT_KEEP_STEPS, Forecast

__all__ = ["BYTES_PER_RECORDED_OP", "DEFAULT_DETAIL_STEPS", "DEFAULT_FINGERPRINT_EVERY",
           "DEFAULT_MAX_OPS_PER_STEP", "MIN_DEFAULT_MAX_OPS", "STEADY_MIN_STEPS", "HabitatWarning",
           "HabitatUsageWarning",
           "decode_step", "default_max_ops_per_step", "predict_on", "record_step"]

#: The former name of :func:`~habitat.capture.environment.trace_origin` (benchmarks/accuracy/
#: real_models.py reads it).
_origin = trace_origin


class _TimedStep:
    """A steady-state step of predict_on that is only timed (no capture session)."""

    __slots__ = ("index", "start")

    def __init__(self) -> None:
        self.index = -1
        self.start = 0.0


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
        default_max_ops = max_ops_per_step is None
        if max_ops_per_step is None:
            max_ops_per_step = default_max_ops_per_step()
        if max_ops_per_step < 1:
            raise ValueError(f"max_ops_per_step must be at least 1, got {max_ops_per_step}")
        self._schedule = StepSchedule(detail_steps, detail_every, fingerprint_every)
        self._nvtx = nvtx
        self._nvtx_held = False  # a hold_nvtx() of this predictor, until close()
        self.forecast: Forecast = Forecast(targets, trace_origin(), host_speed=host_speed,
                                           keep_steps=keep_steps)
        set_clusters(self.forecast, world_size, interconnect, network, gpus_per_node, cluster,
                     parallel)
        if log_dir is not None and not os.fspath(log_dir).strip():
            raise ValueError("log_dir='' names no folder (it would write into the current "
                             "directory): give a folder such as log_dir='runs/exp1', or None")
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.max_ops_per_step = int(max_ops_per_step)
        self._lock = threading.Lock()
        self._sessions: dict[int, record_step | _TimedStep] = {}  # by thread id
        self._threads: set[int] = set()  # threads that ran a step since the last close()
        self._next_index = 0
        self._serial = new_serial()
        self._forward_only_warned = False
        sinks = [*(log_dir_sinks(self.log_dir) if self.log_dir else ()), *sink_list(on_step)]
        self._tracing = KernelTracing()
        self._worker = ForecastWorker(self.forecast, self._lock, sinks, verbose=verbose,
                                      max_ops_per_step=self.max_ops_per_step,
                                      default_max_ops=default_max_ops)
        self.forecast._wait = self.wait
        # The same dict, for views of the forecast (updated as the worker goes).
        self.forecast.step_counts = self._worker.counts  # type: ignore[attr-defined]
        if any(hasattr(sink, "close") for sink in sinks):
            _unclosed.add(self)
            _exit_on_sigterm()

    # The arguments, as given (the schedule holds them).
    detail_steps = property(lambda self: self._schedule.detail_steps)
    detail_every = property(lambda self: self._schedule.detail_every)
    fingerprint_every = property(lambda self: self._schedule.fingerprint_every)

    @property
    def verbose(self) -> bool:
        return self._worker.verbose

    @verbose.setter
    def verbose(self, value: bool) -> None:
        self._worker.verbose = value

    # ----- one step ------------------------------------------------------------------
    def __enter__(self) -> "Forecast":
        thread = threading.get_ident()
        with self._lock:
            if thread in self._sessions:
                raise RuntimeError(
                    "this predict_on(...) block is already open on this thread; each `with` is "
                    "one step, so close it before the next (for a second forecast of the same "
                    "ops, nest a separate habitat.predict_on(...) instead)")
            if not self._worker.origin_fixed:
                self.forecast.origin.update(precision_flags())
            if thread not in self._threads:  # the first step on this thread since close()
                self._threads.add(thread)
                if self._nvtx and not self._nvtx_held:
                    hold_nvtx()
                    self._nvtx_held = True
                _modules.note_predicting(self)  # code compiled on this thread keeps the key
            kind = self._schedule.begin(self._next_index, self._worker.queued_detailed)
            self._worker.step_began_locked(kind == "detailed")
            if kind == "timed":
                # The common steady-state step: only timed, one lock, no capture session.
                timed = _TimedStep()
                self._sessions[thread] = timed
        if kind != "detailed" and _C.cupti_active():
            self._tracing.close()  # no kernel tracing (nor its per-op cost) in steady state
        if kind == "timed":
            settle_key()  # off: the step's ops skip Habitat entirely (eager code)
            timed.start = time.perf_counter()
            return self.forecast
        # The step's index is given when it ends normally, so a failed step leaves no gap.
        try:
            recording = record_step(-1, max_ops=self.max_ops_per_step, tracing=self._tracing,
                                    detailed=kind == "detailed")
            recording.__enter__()
        except BaseException:
            if kind == "detailed":
                with self._lock:
                    self._worker.detailed_ended_locked()
            raise
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
                if isinstance(recording, _TimedStep):
                    # A timed step: the forecast of the latest fingerprint, with its own time.
                    wall_ms = (stop - recording.start) * 1e3
                    self._worker.reuse_locked(recording.index, wall_ms, self._schedule.timed(wall_ms))
        if not isinstance(recording, _TimedStep):
            watch = _modules.graph_watch() if recording.detailed else None  # the window resets it
            try:
                recording.__exit__(exc_type, exc, tb)
            finally:
                if recording.detailed:
                    with self._lock:
                        self._worker.detailed_ended_locked()
            if recording.captured is not None:
                self._submit(recording)
                self._check_usage(recording, watch)
            settle_key()  # code between steps (data loading, logging) skips Habitat too
        if self._worker.busy:
            self._worker.raise_messages()
        return False  # never swallow the user's exception

    def _check_usage(self, recording: record_step, watch: _modules.GraphWatch | None) -> None:
        """Warns once about a forward-only step or a predictor per step (capture/mistakes.py)."""
        messages = [fresh_predictors.step_ended(self._serial, self.forecast.targets,
                                                recording.fingerprint, recording.captured.wall_ms)]
        if watch is not None and watch.built and not watch.used and not self._forward_only_warned:
            self._forward_only_warned = True
            messages.append(forward_only(recording.index))
        for message in messages:
            if message:
                warnings.warn(message, HabitatUsageWarning, stacklevel=3)

    def _submit(self, recording: record_step) -> None:
        """A recorded step for the worker: forecast in detail, or reusing a forecast."""
        fingerprint, index = recording.fingerprint, recording.index
        with self._lock:
            if recording.detailed:
                self._schedule.detailed(index, fingerprint)
                self._worker.detailed_locked(index, recording.captured, recording.peak_bytes,
                                             fingerprint)
            else:
                # Unknown shapes are measured, not forecast (the next step is recorded in
                # detail), as are steps finding the worker far behind.
                known = self._schedule.fingerprinted(index, fingerprint)
                self._worker.reuse_locked(index, recording.captured.wall_ms,
                                          fingerprint if known else None)

    @property
    def step_counts(self) -> dict[str, int]:
        """How the steps so far were handled (waits for the steps still being forecast):
        ``detailed`` (recorded and forecast in full), ``reused`` (steady state: the forecast
        of a detailed step with the same fingerprint, with the step's own measured time),
        ``skipped`` (measured, not forecast: a new fingerprint, or the worker far behind)."""
        self.wait()
        return self._worker.counts

    def wait(self) -> None:
        """Waits until every finished step is forecast (reading the forecast does this)."""
        self._worker.wait(stacklevel=6)

    def close(self) -> None:
        """Forecasts the steps still pending, writes ``log_dir/forecast.json`` and closes the
        TensorBoard writer. The object can be used again afterwards."""
        self.wait()
        self._worker.shutdown()
        # Training with Habitat is over: no global hooks stay behind (module calls and
        # optimizer steps pay nothing), no kernel tracing, no NVTX ranges.
        with self._lock:
            self._threads.clear()
            held, self._nvtx_held = self._nvtx_held, False
        if held:
            release_nvtx()
        _modules.forget_predicting(self)
        if open_windows() == 0:
            _modules.uninstall()
            _phase.uninstall()
            # Nor the capture key on this thread (the boxed fallback every op would still pass
            # through), unless compiled code guards on it.
            if _C._capture_key_included() and not _modules.compiled_code_seen():
                _C._capture_release_thread()
        self._tracing.close()
        errors = self._worker.close_sinks()
        _unclosed.discard(self)
        if not _unclosed:
            _default_sigterm()
        for e in errors:  # closing must not raise into the user's code
            warnings.warn(f"habitat: a sink failed to close ({type(e).__name__}: {e})",
                          HabitatWarning, stacklevel=2)


_unclosed: "weakref.WeakSet[predict_on]" = weakref.WeakSet()


def _sigterm(signum: int, frame: Any) -> None:
    """SIGTERM while predictors are open: exit as Python exits, so that the atexit handler
    below writes their last steps and files (the default action kills the process at once).
    The exit status is 128 + 15, as a shell reports a process killed by SIGTERM."""
    raise SystemExit(128 + signum)


def _exit_on_sigterm() -> None:
    """Installs _sigterm where SIGTERM has its default action (a handler of the program's
    own, or one installed off the main thread, is left alone)."""
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _sigterm)
    except (ValueError, OSError, AttributeError):  # not the main thread, or no SIGTERM here
        pass


def _default_sigterm() -> None:
    """Gives SIGTERM its default action back once no predictor is open."""
    try:
        if signal.getsignal(signal.SIGTERM) is _sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError, AttributeError):
        pass


@atexit.register
def _close_at_exit() -> None:
    """Writes the last log_dir files of predictors the program did not close."""
    for predictor in list(_unclosed):
        try:
            predictor.close()
        except Exception as e:  # exiting: report, never raise
            print(f"habitat: could not close the sinks of {predictor.log_dir or 'predict_on'} at exit ({type(e).__name__}: {e})",
                  file=sys.stderr)
