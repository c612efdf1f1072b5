"""predict_on's forecast worker: finished steps are queued on the training thread and forecast
on one background thread (``habitat-forecast-*``), in step order, then handed to the sinks.

The training thread never waits for it: a detailed step is forecast by the engine (without the
GIL), a steady-state step reuses the forecast of the detailed step with its fingerprint
(:mod:`habitat.capture.reuse`). Errors become warnings raised on the training thread at its
next step or read of the forecast.

The worker is a daemon thread of its own, not a ThreadPoolExecutor: Python shuts executors
down before the atexit handlers run, so a predictor left open lost its last steps and its
final save at exit (issue 34); this thread still runs when predict_on's atexit handler drains
it. After ``os.fork()`` the child gets a working predictor (a new worker thread, the same
lock released) whose sinks are off: the parent writes the log_dir files.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
import warnings
import weakref
from collections import deque
from typing import Any, Iterable

import torch

from habitat.capture.environment import BYTES_PER_RECORDED_OP, gpu_of
from habitat.capture.record import HabitatWarning, decode_step
from habitat.capture.reuse import ReusedForecasts
from habitat.capture.sinks import StepSink, history_handler, json_handler, tensorboard_handler
from habitat.data.engine import forecast_captured
from habitat.data.forecast import Forecast, StepForecast

#: Steady-state steps queued for the worker at most; more are skipped (and counted).
MAX_QUEUED_STEPS = 256
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
#: A detailed step is forecast once the next step has begun and no detailed step of the
#: predictor is recording (or someone reads the forecast, or the predictor closes),
#: DEFER_LIMIT_S after the worker reached it at the latest: the engine forecasting one step
#: beside the capture of the next slowed that step's host on the H100 of 2026-11-26 (resnet50
#: bf16: a 69.7 ms traced span where the same step captured alone took 49.1 ms), and the
#: forecast of that step then read the slowdown as the step's own host cadence.
DEFER_LIMIT_S = 5.0

_thread = threading.local()  # whether this thread is the forecast worker


class ForecastWorker:
    """Forecasts the queued steps of one predict_on into its :class:`Forecast` and runs the
    sinks. Its queue and counts are guarded by the predictor's `lock`: the step schedule
    decides against the queue in the same critical section (methods ending in ``_locked``
    are called holding it)."""

    def __init__(self, forecast: Forecast, lock: threading.Lock, sinks: list[StepSink], *,
                 verbose: bool, max_ops_per_step: int, default_max_ops: bool) -> None:
        self.forecast = forecast
        self._lock = lock
        self.sinks = sinks
        self.verbose = verbose
        self._max_ops_per_step = max_ops_per_step
        self._default_max_ops = default_max_ops  # the limit was the machine's default
        #: How the steps were handled: detailed, reused, skipped, coalesced.
        self.counts = {"detailed": 0, "reused": 0, "skipped": 0, "coalesced": 0}
        self.queued_detailed = 0  # detailed steps queued or being forecast
        #: The origin's device was read from a captured step (or set by the caller).
        self.origin_fixed = False
        self.reused = ReusedForecasts(forecast)
        self._queue: deque[tuple[Any, ...]] = deque()  # steps for the worker, in order
        self._draining = False  # the worker is on the queue (until it is empty)
        self._sink_credit_s = SINK_ALLOWANCE_S  # sink time reused steps may still take
        # The worker thread sleeps on `_wake` between batches; wait() sleeps on it until the
        # queue is drained.
        self._wake = threading.Condition(lock)
        self._thread: threading.Thread | None = None
        self._stopping = False
        # Held by the worker while it handles one step (the engine, the sinks), never with the
        # predictor's lock held first: os.fork waits for it, since a lock the engine held at
        # the fork (its cache of engines, interned names) stays locked for ever in the child.
        self._handling = threading.RLock()
        self._messages: deque[str] = deque()  # warnings from the worker, raised on our thread
        # A detailed step's forecast waits on `_quiet` (DEFER_LIMIT_S). A Condition apart from
        # `_wake`, so that the steps that notify it do not wake the idle worker thread.
        self._recording: set[int] = set()  # threads recording a detailed step now
        self._steps_begun = 0  # steps begun so far, of any kind
        self._detailed_ended = 0  # detailed steps ended so far
        self._readers = 0  # threads waiting for the forecast
        self._quiet = threading.Condition(lock)  # notified when any of the four changes
        _workers.add(self)

    # ----- the training thread's side ------------------------------------------------
    def step_began_locked(self, detailed: bool) -> None:
        """A step began on this thread; a detailed one records until detailed_ended_locked
        on the same thread (no detailed step is forecast meanwhile: DEFER_LIMIT_S)."""
        self._steps_begun += 1
        if detailed:
            self._recording.add(threading.get_ident())
        self._quiet.notify_all()

    def detailed_ended_locked(self) -> None:
        """The detailed step of this thread ended (or failed to begin)."""
        self._recording.discard(threading.get_ident())
        self._detailed_ended += 1
        self._quiet.notify_all()

    def detailed_locked(self, index: int, captured: Any, peak_bytes: int, fingerprint: int) -> None:
        """Queues a step recorded in detail, to be forecast by the engine once the next step
        has begun and no detailed step is recording."""
        self.queued_detailed += 1
        self._queue.append(("detailed", index, captured, peak_bytes, fingerprint,
                            (self._steps_begun, self._detailed_ended)))
        self._schedule_drain()

    def reuse_locked(self, index: int, wall_ms: float, fingerprint: int | None) -> None:
        """Queues a steady-state step to reuse the forecast of `fingerprint`; None (no
        detailed step had it) or a full queue: the step is measured, not forecast (skipped)."""
        if fingerprint is None or len(self._queue) >= MAX_QUEUED_STEPS:
            self.counts["skipped"] += 1
            return
        self._queue.append(("reuse", index, wall_ms, fingerprint))
        # A reused forecast is cheap: the worker takes them in batches (or when the
        # forecast is read), so steady-state steps do not wake it and contend for the GIL.
        if len(self._queue) >= REUSE_BATCH:
            self._schedule_drain()

    def wait(self, stacklevel: int) -> None:
        """Waits until every finished step is forecast (reading the forecast does this)."""
        if getattr(_thread, "forecasting", False):
            return  # the worker reading its own forecast (logging, printing)
        with self._lock:
            if self._queue:
                self._schedule_drain()  # reused steps still batched
            self._readers += 1  # a forecast read inside a detailed step is not kept waiting
            self._quiet.notify_all()
            try:
                while self._draining and self._thread is not None and self._thread.is_alive():
                    self._wake.wait(timeout=1.0)
            finally:
                self._readers -= 1
        self.raise_messages(stacklevel=stacklevel)

    def raise_messages(self, *, stacklevel: int = 3) -> None:
        """Raises the worker's warnings on the calling thread."""
        while self._messages:
            warnings.warn(self._messages.popleft(), HabitatWarning, stacklevel=stacklevel)

    @property
    def busy(self) -> bool:
        """Whether warnings are pending (checked at each step's end)."""
        return bool(self._messages)

    def shutdown(self) -> None:
        """Stops the worker thread (after :meth:`wait`); a later step starts a new one."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._wake.notify_all()
            self._quiet.notify_all()  # a deferred detailed step is forecast now
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _after_fork_in_child(self) -> None:
        """In a forked child: the parent's worker thread is gone and the parent writes the
        log_dir files; the child forecasts its own steps (and the parent's queued ones) on a
        worker of its own, with no sinks."""
        self._wake = threading.Condition(self._lock)
        self._quiet = threading.Condition(self._lock)
        self._handling = threading.RLock()  # (held by the forking thread, or a worker gone)
        # Only this thread survives the fork: no other thread records or reads in the child.
        self._recording &= {threading.get_ident()}
        self._readers = 0
        self._thread = None
        self._draining = False
        self._stopping = False
        self.sinks = []

    def close_sinks(self) -> list[Exception]:
        """Calls each sink's ``close()``; returns what they raised."""
        errors = []
        for sink in self.sinks:
            try:
                close = getattr(sink, "close", None)
                if close is not None:
                    close()
            except Exception as e:
                errors.append(e)
        return errors

    # ----- the worker thread ---------------------------------------------------------
    def _schedule_drain(self) -> None:
        """Starts the worker on the queue unless it is on it already (hold the lock)."""
        if self._draining:
            return
        self._draining = True
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"habitat-forecast-{next(_thread_names)}")
            self._thread.start()
        else:
            self._wake.notify_all()

    def _run(self) -> None:
        """The worker thread: drains the queue each time it is woken, until shut down."""
        while True:
            with self._lock:
                while not self._draining and not self._stopping:
                    self._wake.wait()
                if not self._draining:
                    return
            self._drain()

    def _drain(self) -> None:
        """Handles queued steps in order until the queue is empty."""
        while True:
            with self._lock:
                if not self._queue:
                    self._draining = False
                    self._wake.notify_all()
                    return
                if self._queue[0][0] == "detailed":
                    # Left in the queue while it waits, so a forked child still forecasts it.
                    self._quiet.wait_for(lambda at=self._queue[0][5]: self._quiet_after(*at),
                                         timeout=DEFER_LIMIT_S)
            with self._handling:
                self._handle_next()

    def _handle_next(self) -> None:
        """Forecasts the step at the head of the queue and runs its sinks (hold _handling)."""
        with self._lock:
            item = self._queue.popleft()  # the step waited for: only this thread takes from the queue
        try:
            if item[0] == "detailed":
                _, index, captured, peak_bytes, fingerprint, _ = item
                self._forecast_step(captured, peak_bytes, index, fingerprint)
            else:
                _, index, wall_ms, fingerprint = item
                self._reuse_forecast(index, wall_ms, fingerprint)
        except Exception as e:  # the worker must outlive any step
            self._messages.append(f"habitat: could not forecast step {item[1]} "
                                  f"({type(e).__name__}: {e}); the training step itself ran normally")
        finally:
            if item[0] == "detailed":
                with self._lock:
                    self.queued_detailed -= 1

    def _quiet_after(self, begun: int, ended: int) -> bool:
        """Whether a detailed step queued when `begun` steps had begun and `ended` detailed ones
        ended may be forecast now (hold the lock): the next step has begun, and either no
        detailed step records now or one has ended since (steps back to back, every one
        detailed, leave no moment without one); or someone waits for the forecast, or the
        worker is being shut down."""
        return ((self._steps_begun > begun and (not self._recording or self._detailed_ended > ended))
                or self._readers > 0 or self._stopping)

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1

    def _reuse_forecast(self, index: int, wall_ms: float, fingerprint: int) -> None:
        """A steady-state step: the forecast of the detailed step with its fingerprint,
        counted with the step's own measured time."""
        cached = self.reused.by_fingerprint.get(fingerprint)
        if cached is None:  # that detailed step could not be forecast
            self._count("skipped")
            return
        _thread.forecasting = True
        cached = self.reused.calibrated(fingerprint, wall_ms, cached)
        summary, captured, peak_bytes, rows, calibrated_to_ms = cached

        def detail() -> tuple[dict[str, Any], Any]:  # called under the detail lock
            return self.reused.trace(fingerprint, captured, peak_bytes, index, wall_ms,
                                     calibrated_to_ms), rows

        forecast = self.forecast._add_forecast(index, wall_ms, summary, detail, rows)
        self._count("reused")
        if not self.sinks and not self.verbose:
            return
        credit = min(SINK_ALLOWANCE_S, self._sink_credit_s + SINK_SHARE * wall_ms / 1e3)
        # Wall time, not CPU time: a sink that waits on I/O holds the worker as much as one
        # that computes (with CPU time, a slow disk let 749 of 1,020 steps be skipped).
        start = time.perf_counter()
        if credit <= 0:
            # Coalesced: only the step history (steps.jsonl, one short line) and the TensorBoard
            # scalars (one event record encoded in C++) are written, so every forecast step
            # stays on disk and in TensorBoard; their time counts against the share.
            self._count("coalesced")
            self._run_sinks(forecast, index, _coalesced_sinks(self.sinks))
        else:
            self._run_sinks(forecast, index)
        self._sink_credit_s = credit - (time.perf_counter() - start)

    def _forecast_step(self, captured: Any, peak_bytes: int, index: int,
                       fingerprint: int | None = None) -> None:
        _thread.forecasting = True
        try:
            if captured.dropped_ops:
                why = (f" (the default for this machine: a quarter of the memory available at "
                       f"start, ~{BYTES_PER_RECORDED_OP // 1024} KB per recorded op)"
                       if self._default_max_ops else "")
                self._messages.append(
                    f"habitat: step {index} ran more than {self._max_ops_per_step} ops{why}; "
                    f"{captured.dropped_ops} were not recorded and are missing from its forecast "
                    "(raise predict_on(..., max_ops_per_step=N) if the memory is there)")
            if not self.origin_fixed:
                gpu = gpu_of(captured) if torch.cuda.is_available() else None
                if gpu is not None:
                    self.forecast.origin["device"] = gpu
                self.origin_fixed = True
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
            self.reused.keep(fingerprint, summary_doc, captured, peak_bytes, rows)
        self._run_sinks(forecast, index)

    def _run_sinks(self, forecast: StepForecast, index: int, sinks: list[StepSink] | None = None) -> None:
        for sink in self.sinks if sinks is None else sinks:
            try:
                sink(self.forecast, forecast)
            except Exception as e:  # nor must a sink's
                self._messages.append(
                    f"habitat: {_sink_name(sink)} failed on step {index} ({type(e).__name__}: "
                    f"{e}); the training step itself ran normally")
        if self.verbose and sinks is None:
            print(forecast)


def sink_list(on_step: StepSink | Iterable[StepSink] | None) -> list[StepSink]:
    """predict_on's `on_step` as a list of sinks (a TypeError names one that is no callable)."""
    if on_step is None:
        return []
    sinks = [on_step] if callable(on_step) else list(on_step)
    for sink in sinks:
        if not callable(sink):
            raise TypeError(f"on_step takes callables sink(forecast, step), got {sink!r}")
    return sinks


def _coalesced_sinks(sinks: list[StepSink]) -> list[StepSink]:
    """What still runs for a coalesced step: the step history, TensorBoard's scalars, and
    forecast.json's catch-up (saved at most once a second while steps are coalesced)."""
    kept: list[StepSink] = []
    for s in sinks:
        if isinstance(s, history_handler):
            kept.append(s)
        elif isinstance(s, tensorboard_handler):
            kept.append(s.log_scalars)
        elif isinstance(s, json_handler):
            kept.append(s.catch_up)
    return kept


_thread_names = itertools.count()
#: Every worker alive, for os.fork (each holds its predictor's lock across the fork).
_workers: "weakref.WeakSet[ForecastWorker]" = weakref.WeakSet()
_forking: list[ForecastWorker] = []  # the workers held across the fork in progress


def _before_fork() -> None:
    # Each worker's step in hand first (it takes the predictor's lock inside), then the locks.
    _forking[:] = list(_workers)
    for worker in _forking:
        worker._handling.acquire()
    for worker in _forking:
        worker._lock.acquire()


def _after_fork_in_parent() -> None:
    for worker in _forking:
        worker._lock.release()
        worker._handling.release()
    _forking.clear()


def _after_fork_in_child() -> None:
    for worker in _forking:
        worker._lock.release()
        worker._after_fork_in_child()
    _forking.clear()


if hasattr(os, "register_at_fork"):
    # A fork while another thread held a predictor's lock would leave it locked for ever in
    # the child; the child's predictor then works (a worker of its own) without sinks.
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def _sink_name(sink: StepSink) -> str:
    return getattr(sink, "__qualname__", None) or type(sink).__name__
