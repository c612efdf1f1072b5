"""One capture window: :class:`record_step` records the aten ops of a block as a trace step
in C++ (a dispatcher fallback, torch_plugin/capture/capture_key.h); and the capture key's
state on the thread between windows. predict_on opens one per detailed or fingerprinted step.
"""
from __future__ import annotations

import json
import threading
import warnings
import weakref
from types import TracebackType
from typing import Any

from habitat import _C, _engine
from habitat.capture import modules as _modules
from habitat.capture import phase as _phase
from habitat.capture.compile import install_compile_callbacks
from habitat.capture.cupti import KernelTracing
from habitat.capture.environment import DEFAULT_MAX_OPS_PER_STEP, AllocatorPeak


class HabitatWarning(UserWarning):
    """Something went wrong in Habitat; the training step itself was not affected."""


_thread = threading.local()  # open capture windows on this thread


def open_windows() -> int:
    return getattr(_thread, "open", 0)


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
        self._peak: AllocatorPeak | None = None

    def __enter__(self) -> "record_step":
        if self._session is not None:
            raise RuntimeError("this record_step block is already open")
        detailed = self.detailed
        session = _C._CaptureSession(self.max_ops, detailed)
        outermost = open_windows() == 0
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
        self._peak = AllocatorPeak() if outermost and detailed else None
        _thread.open = open_windows() + 1
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
            _thread.open = open_windows() - 1
            if self.detailed:
                if open_windows() == 0:
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
    _thread.open = max(0, open_windows() - 1)
    if detailed:
        if open_windows() == 0:
            _modules.reset_thread()
        _modules.release()
        _phase.release()


def settle_key() -> None:
    """The capture key on the calling thread outside capture windows: off (ops skip Habitat
    entirely) until dynamo has compiled code in this process, then on, since compiled code
    guards on the thread's dispatch keys (compile._on_compile_start includes the key before
    dynamo builds the guards; dynamo restores the thread's keys after compiling)."""
    if open_windows() != 0:
        return
    included = _C._capture_key_included()
    if _modules.compiled_code_seen():
        if not included:
            _C._capture_include_key()
    elif included:
        _C._capture_release_thread()


def decode_step(captured: Any, peak_bytes: int = 0) -> dict[str, Any]:
    """A captured step as a trace step dict (the encoding runs without the GIL), with the
    allocator's peak when known."""
    step = json.loads(_engine.captured_trace_json(captured.capsule))["steps"][0]
    if peak_bytes:
        step["measured_peak_bytes"] = peak_bytes
    return step

