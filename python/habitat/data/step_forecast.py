"""The forecast of one step for every target (:class:`StepForecast`): its totals at once, its
per-op detail (the step's trace, the engine's per-op rows, OpForecast objects) loaded on first
use and dropped when the step leaves the forecast's history."""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from habitat import _engine
from habitat.data import engine
from habitat.data.op_forecast import OpForecast, canonical, op_forecasts_at, op_forecasts_from_rows, top_indices
from habitat.data.op_rows import OpRows
from habitat.data.step_text import StepText

# A long run holds one StepForecast per step: no per-instance __dict__ where slots exist.
_SLOTS: dict[str, Any] = {"slots": True} if sys.version_info >= (3, 10) else {}


@dataclass(**_SLOTS)
class StepForecast:
    """The forecast of one captured step for every target. Steps forecast alike (predict_on's
    steady-state steps reuse a detailed step's forecast) share their totals' dicts: read
    them, do not change them."""

    index: int
    measured_ms: float
    targets: list[str]
    total_ms: dict[str, float]
    phase_ms: dict[str, dict[str, float]]
    method_ops: dict[str, dict[str, int]]
    unsupported: list[str]
    # The step as the user sees it on each target (csrc/include/habitat/timeline.h): step_ms,
    # host_ms, kernel_sum_ms, gpu_busy_fraction, host_bound, phases, notes. Empty for a step
    # forecast without a timeline (a CPU-traced step without a host model, an older save).
    timeline: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Ops the capture ran but did not record (predict_on's max_ops_per_step): missing from
    # every figure of the step, and every view says so.
    dropped_ops: int = 0
    # The per-op detail is built on first use (the totals are there at once): a loader of
    # (the step as captured, the engine's per-op forecasts). Dropped past the history.
    _detail: Callable[[], tuple[dict[str, Any], OpRows | None]] | None = field(
        default=None, repr=False, compare=False)
    _ops: list[OpForecast] = field(default_factory=list, repr=False)
    _trace: dict[str, Any] | None = field(default=None, repr=False)
    # Loaded but not yet turned into OpForecast objects: the engine's per-op rows. Reading
    # `trace` alone (memory analysis) never builds them.
    _op_results: OpRows | None = field(default=None, repr=False, compare=False)
    # The engine's per-op rows when known without loading the trace (op_table reads them).
    _rows: OpRows | None = field(default=None, repr=False, compare=False)
    # The step as the engine holds it (C++ structs in a capsule), when it does: analyses of
    # large steps (the memory estimate) read it without decoding the trace.
    _capsule: Any = field(default=None, repr=False, compare=False)

    @property
    def ops(self) -> list[OpForecast]:
        """Every captured op with its per-target predictions (empty past the history).
        Builds an object per op and target: for large steps read :attr:`op_table` instead."""
        self._load()
        with _detail_lock:
            if self._op_results is not None and self._trace is not None:
                self._ops = op_forecasts_from_rows(self._trace, self._op_results)
                self._op_results = None
        return self._ops

    @property
    def op_table(self) -> OpRows | None:
        """The per-op forecasts as columns, in step order (``op_table.array`` is a numpy
        structured array: id, flops, bytes, time_us[T], share_us[T], method codes, ...; see
        :class:`habitat.data.op_rows.OpRows`), without an object per op or reading the step's
        trace. None past the history."""
        with _detail_lock:
            if self._rows is not None:
                return self._rows
        self._load()
        with _detail_lock:
            return self._op_results

    @property
    def trace(self) -> dict[str, Any] | None:
        """The step as captured (a trace step dict); None past the history."""
        self._load()
        return self._trace

    @property
    def captured(self) -> Any:
        """The step as the engine holds it (a capsule habitat._engine reads), or None (a step
        forecast from a dict, or past the history)."""
        return self._capsule

    @property
    def holds_trace(self) -> bool:
        """Whether the step as captured is still held (``trace`` is not None), without
        decoding it."""
        with _detail_lock:
            return self._detail is not None or self._trace is not None

    def _load(self) -> None:
        with _detail_lock:
            if self._detail is None:
                return
            self._trace, self._op_results = self._detail()
            self._detail = None

    def drop_detail(self) -> None:
        """Keeps only the totals (a step that left the forecast's history)."""
        with _detail_lock:
            self._detail, self._ops, self._trace, self._op_results = None, [], None, None
            self._rows = self._capsule = None

    def time_ms(self, target: str | None = None) -> float:
        """Predicted time of this step on `target` (default: the first target), as
        :meth:`Forecast.time_ms` gives for the latest step."""
        name = self.targets[0] if target is None else canonical(target)
        if name not in self.total_ms:
            raise KeyError(f"{target!r} was not a forecast target; targets: {', '.join(self.targets)}")
        return self.total_ms[name]

    def step_ms(self, target: str | None = None) -> float:
        """The step time the user will see on `target`: the host's launch cadence and its
        waits for the device included (the timeline); the kernel sum (time_ms) when the step
        has no timeline."""
        name = canonical(target) if target is not None else self.targets[0]
        t = self.timeline.get(name)
        return t["step_ms"] if t and t.get("valid") else self.time_ms(name)

    def host_bound(self, target: str | None = None) -> bool | None:
        """True when the GPU would wait for the host more than 10% of the step on `target`;
        None without a timeline."""
        name = canonical(target) if target is not None else self.targets[0]
        t = self.timeline.get(name)
        return bool(t["host_bound"]) if t and t.get("valid") else None

    def host_scale(self, target: str | None = None) -> float | None:
        """The factor the host cadence of `target`'s timeline was calibrated by, to the wall
        time of untraced steps of the run (predict_on's steady-state steps): 1.0 for the step
        as traced; None without a timeline. ``timeline[target]["uncalibrated_step_ms"]`` is
        the step as seen without it."""
        name = canonical(target) if target is not None else self.targets[0]
        t = self.timeline.get(name)
        return float(t.get("host_scale", 1.0)) if t and t.get("valid") else None

    def leaf_ops(self) -> list[OpForecast]:
        """Ops that called no other op."""
        return [op for op in self.ops if not op.has_children]

    def counted_ops(self, target: str) -> list[OpForecast]:
        """The ops whose shares add up to the step's total on `target`."""
        name = canonical(target)
        return [op for op in self.ops if op.predictions[name].share_us > 0]

    def top_ops(self, target: str, n: int = 10) -> list[OpForecast]:
        """The `n` ops adding the most to the step's total on `target` (ties in step order).
        Chosen from the per-op columns: only those `n` ops become objects (``print(forecast)``
        of a step of a million ops does not build a million)."""
        name = canonical(target)
        with _detail_lock:
            built = bool(self._ops)
        table = None if built else self.op_table
        trace = None if table is None else self.trace
        if table is None or trace is None or name not in table.targets:
            return sorted(self.counted_ops(name), key=lambda op: op.predictions[name].share_us,
                          reverse=True)[:n]
        return self.ops_at(top_indices(table, name, n))

    def ops_at(self, indices: Sequence[int]) -> list[OpForecast]:
        """The ops at `indices` (positions in the step's op order) alone, as :attr:`ops` would
        give them, without building an object for every other op."""
        with _detail_lock:
            built = self._ops
        if built:
            return [built[i] for i in indices]
        table = self.op_table
        trace = self.trace
        if table is None or trace is None:
            ops = self.ops
            return [ops[i] for i in indices]
        return op_forecasts_at(trace, table, indices)

    def text_view(self) -> "StepText | None":
        """The step as the engine's JSON, encoded once and not decoded, to read a few of its
        ops (:meth:`StepText.top_ops`) from a step of a million without a dict per op; None
        when it does not apply (the step's trace is decoded already, or the engine does not
        hold the step: then :meth:`top_ops` is as cheap)."""
        with _detail_lock:
            if (self._trace is not None or self._ops or self._rows is None
                    or not isinstance(self._detail, StoredDetail)):
                return None
            capsule, rows = self._capsule, self._rows
        return StepText(_engine.captured_trace_json(capsule), rows, self)

    def op_count(self) -> int:
        """How many ops the step holds in detail (0 past the history), without building an
        object per op."""
        with _detail_lock:
            if self._ops:
                return len(self._ops)
        table = self.op_table
        return len(table) if table is not None else len(self.ops)

    def summary(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "measured_ms": self.measured_ms,
            "total_ms": self.total_ms,
            "phase_ms": self.phase_ms,
            "method_ops": self.method_ops,
            "unsupported": self.unsupported,
            **({"dropped_ops": self.dropped_ops} if self.dropped_ops else {}),
            **({"timeline": {t: {k: v[k] for k in _TIMELINE_SUMMARY if k in v}
                             for t, v in self.timeline.items()}} if self.timeline else {}),
        }


#: The timeline figures kept in a step's summary (saved forecasts, steps.jsonl): the numbers,
#: not the notes, which describe the trace and are the same every step.
_TIMELINE_SUMMARY = ("valid", "step_ms", "host_ms", "kernel_sum_ms", "device_busy_ms",
                     "gpu_busy_fraction", "host_bound", "host_speed")

_detail_lock = threading.Lock()


class StoredDetail:
    """The detail loader of a step the engine holds as C++ structs: its trace step (decoded
    on first use) and its per-op rows; `capsule` is the step itself (StepForecast.captured)."""

    __slots__ = ("capsule", "rows")

    def __init__(self, capsule: Any, rows: OpRows) -> None:
        self.capsule, self.rows = capsule, rows

    def __call__(self) -> tuple[dict[str, Any], Any]:
        return engine.step_of_capsule(self.capsule), self.rows


def step_from_summary(index: int, measured_ms: float, summary: dict[str, Any],
                      detail: Callable[[], tuple[dict[str, Any], Any]],
                      rows: OpRows | None = None,
                      views: tuple[Any, ...] | None = None) -> StepForecast:
    """A step's forecast from the engine's summary document; `detail` loads the per-op part
    (`rows`, when given, are its per-op columns, readable without loading the trace).
    `views`: the totals' containers of an earlier step with this very summary, shared."""
    if views is None:
        views = summary_views(summary)
    targets, total_ms, phase_ms, method_ops, unsupported, timeline = views
    return StepForecast(
        index=index, measured_ms=measured_ms, targets=targets, total_ms=total_ms,
        phase_ms=phase_ms, method_ops=method_ops, unsupported=unsupported, _detail=detail,
        _rows=rows, timeline=timeline, _capsule=getattr(detail, "capsule", None),
        dropped_ops=int(summary.get("dropped_ops", 0)),
    )


def summary_views(summary: dict[str, Any]) -> tuple[Any, ...]:
    """The totals' containers of a summary document: targets, total_ms, phase_ms, method_ops,
    unsupported, timeline (StepForecast's fields)."""
    targets = list(summary["targets"])
    totals = {t["target"]: t for t in summary["totals"]}
    return (targets, {t: totals[t]["total_ms"] for t in targets},
            {t: dict(totals[t]["phases"]) for t in targets},
            {t: dict(totals[t]["methods"]) for t in targets},
            list(summary.get("unsupported", [])),
            {t["target"]: t for t in summary.get("timelines", [])})

