"""Forecast results: per op, per phase and per step, for each target GPU.

This is the data layer: it imports nothing of Habitat above it. Two conveniences of
:class:`Forecast` belong to higher layers, ``forecast.compare()`` (analysis: ranking GPUs) and
``print(forecast)`` (present: the text view). They are *views*, plugged in by the package
(``habitat/__init__.py`` calls :func:`set_views` once it has imported analysis and present),
so data never imports upward and there is no import cycle. Importing any ``habitat.*`` module
first runs ``habitat/__init__``, so the views are always in place for users; a missing view
falls back to ``repr`` (for ``str``) or an error naming the module to import (for ``compare``).
"""
from __future__ import annotations

import json
import sys
import threading
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, overload

from habitat import _engine
from habitat.data import engine
from habitat.data.devices import get_device, target_names
from habitat.data.files import atomic_write_text, read_tail, read_trace_text
from habitat.data.op_rows import METHODS, OP_CLASSES, OpRows
from habitat.data.trace import tensor_args, trace_document_dict

# Stands for the steps while the rest of a forecast document is encoded (Forecast.to_json).
_STEPS_MARK = "\x00habitat-steps\x00"

#: Steps whose per-op detail is kept in memory (``keep_steps``); older steps keep only their
#: totals, so a forecast attached to a long training run stays small. ``save()`` writes the
#: trace of these steps and the totals of every step, and says how many lost their detail.
DEFAULT_KEEP_STEPS = 8
DEFAULT_HISTORY = DEFAULT_KEEP_STEPS  # the former name

SHAPE_BASED_METHODS = frozenset({"roofline", "learned_shape", "fallback"})


@dataclass(frozen=True)
class Prediction:
    """An op's forecast on one target: its whole time (children included), and its share:
    what it adds to the step total, each piece of work counted once (see csrc/predictor.h)."""

    time_us: float
    method: str
    share_us: float = 0.0
    share_method: str = ""

    @property
    def shape_based(self) -> bool:
        """True when the forecast came from the op's shapes alone (no measured kernels)."""
        return self.method in SHAPE_BASED_METHODS


@dataclass
class OpForecast:
    """One captured aten op with its predicted time on each target."""

    id: int
    name: str
    overload: str
    phase: str
    module_path: str
    autograd_node: str
    parent: int | None
    depth: int
    has_children: bool
    measured_us: float
    input_shapes: list[list[int]]
    dtypes: list[str]
    op_class: str | None
    flops: float
    bytes: float
    predictions: dict[str, Prediction]

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    def time_us(self, target: str) -> float:
        return self.predictions[_canonical(target)].time_us

    def method(self, target: str) -> str:
        return self.predictions[_canonical(target)].method

    def share_us(self, target: str) -> float:
        """What this op adds to the step's total on `target`."""
        return self.predictions[_canonical(target)].share_us


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
                self._ops = _op_forecasts_from_rows(self._trace, self._op_results)
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
        name = self.targets[0] if target is None else _canonical(target)
        if name not in self.total_ms:
            raise KeyError(f"{target!r} was not a forecast target; targets: {', '.join(self.targets)}")
        return self.total_ms[name]

    def step_ms(self, target: str | None = None) -> float:
        """The step time the user will see on `target`: the host's launch cadence and its
        waits for the device included (the timeline); the kernel sum (time_ms) when the step
        has no timeline."""
        name = _canonical(target) if target is not None else self.targets[0]
        t = self.timeline.get(name)
        return t["step_ms"] if t and t.get("valid") else self.time_ms(name)

    def host_bound(self, target: str | None = None) -> bool | None:
        """True when the GPU would wait for the host more than 10% of the step on `target`;
        None without a timeline."""
        name = _canonical(target) if target is not None else self.targets[0]
        t = self.timeline.get(name)
        return bool(t["host_bound"]) if t and t.get("valid") else None

    def leaf_ops(self) -> list[OpForecast]:
        """Ops that called no other op."""
        return [op for op in self.ops if not op.has_children]

    def counted_ops(self, target: str) -> list[OpForecast]:
        """The ops whose shares add up to the step's total on `target`."""
        name = _canonical(target)
        return [op for op in self.ops if op.predictions[name].share_us > 0]

    def top_ops(self, target: str, n: int = 10) -> list[OpForecast]:
        """The `n` ops adding the most to the step's total on `target` (ties in step order).
        Chosen from the per-op columns: only those `n` ops become objects (``print(forecast)``
        of a step of a million ops does not build a million)."""
        name = _canonical(target)
        with _detail_lock:
            built = bool(self._ops)
        table = None if built else self.op_table
        trace = None if table is None else self.trace
        if table is None or trace is None or name not in table.targets:
            return sorted(self.counted_ops(name), key=lambda op: op.predictions[name].share_us,
                          reverse=True)[:n]
        return self.ops_at(_top_indices(table, name, n))

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
        return _op_forecasts_at(trace, table, indices)

    def text_view(self) -> "StepText | None":
        """The step as the engine's JSON, encoded once and not decoded, to read a few of its
        ops (:meth:`StepText.top_ops`) from a step of a million without a dict per op; None
        when it does not apply (the step's trace is decoded already, or the engine does not
        hold the step: then :meth:`top_ops` is as cheap)."""
        with _detail_lock:
            if (self._trace is not None or self._ops or self._rows is None
                    or not isinstance(self._detail, _StoredDetail)):
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
            **({"timeline": {t: {k: v[k] for k in _TIMELINE_SUMMARY if k in v}
                             for t, v in self.timeline.items()}} if self.timeline else {}),
        }


#: The timeline figures kept in a step's summary (saved forecasts, steps.jsonl): the numbers,
#: not the notes, which describe the trace and are the same every step.
_TIMELINE_SUMMARY = ("valid", "step_ms", "host_ms", "kernel_sum_ms", "device_busy_ms",
                     "gpu_busy_fraction", "host_bound", "host_speed")


def _canonical(target: str) -> str:
    return get_device(target).name


def _shapes_and_dtypes(op: dict[str, Any]) -> tuple[list[list[int]], list[str]]:
    shapes: list[list[int]] = []
    dtypes: list[str] = []
    for _, meta in tensor_args(op):
        shapes.append(list(meta.get("shape", [])))
        dtypes.append(meta.get("dtype", ""))
    return shapes, dtypes


_detail_lock = threading.Lock()


def _op_forecast(op: dict[str, Any], op_class: str, flops: float, nbytes: float,
                 predictions: dict[str, Prediction]) -> OpForecast:
    """One op's OpForecast: its trace fields and its row's forecast."""
    shapes, dtypes = _shapes_and_dtypes(op)
    return OpForecast(
        id=op["id"], name=op["name"], overload=op.get("overload", ""),
        phase=op.get("phase", "other"), module_path=op.get("module_path", ""),
        autograd_node=op.get("autograd_node", ""), parent=op.get("parent"),
        depth=op.get("depth", 0), has_children=op.get("has_children", False),
        measured_us=op.get("wall_us", 0.0), input_shapes=shapes, dtypes=dtypes,
        op_class=op_class, flops=flops, bytes=nbytes, predictions=predictions)


def _op_forecasts_at(step: dict[str, Any], rows: OpRows, indices: Sequence[int]) -> list[OpForecast]:
    """OpForecast objects of the ops at `indices` (row order is the step's op order) alone,
    read from the rows' numpy columns: the top ops of a million-op step cost a few objects."""
    a = rows.array
    targets = rows.targets
    ops = []
    for i in indices:
        row = a[i]
        ops.append(_op_forecast(
            step["ops"][i], OP_CLASSES[int(row["op_class"])], float(row["flops"]), float(row["bytes"]),
            {t: Prediction(float(row["time_us"][k]), METHODS[int(row["method"][k])],
                           float(row["share_us"][k]), METHODS[int(row["share_method"][k])])
             for k, t in enumerate(targets)}))
    return ops


def _top_indices(table: OpRows, target: str, n: int) -> list[int]:
    """Positions of the `n` ops adding the most to the step's total on `target` (a name of
    ``table.targets``), ties in step order."""
    import numpy as np

    share = table.array["share_us"][:, table.targets.index(target)]
    counted = np.flatnonzero(share > 0)
    # A stable sort of the negated shares: equal shares keep step order, as sorted(reverse=True).
    return counted[np.argsort(-share[counted], kind="stable")][:max(0, n)].tolist()


class StepText:
    """A step held by the engine, as its JSON text (bytes), not decoded: the few ops a view
    prints are found by their id and decoded alone (``print(forecast)`` of a step of 90k ops
    decoded all of them to show ten). See :meth:`StepForecast.text_view`."""

    __slots__ = ("text", "rows", "step", "_ops_at")

    def __init__(self, text: bytes, rows: OpRows, step: StepForecast) -> None:
        self.text, self.rows, self.step = text, rows, step
        self._ops_at = text.find(b'"ops":[')

    def contains(self, piece: str) -> bool:
        """Whether `piece` occurs in the step's text (as JSON writes it: "/" escaped or not)."""
        encoded = json.dumps(piece)[1:-1].encode()
        return encoded in self.text or encoded.replace(b"/", b"\\/") in self.text

    def op_dict(self, op_id: int) -> dict[str, Any] | None:
        """The trace dict of the op with `op_id`, or None when the text does not name it
        exactly once as an op (the caller then decodes the step)."""
        if self._ops_at < 0:
            return None
        needle = b'{"id":%d,' % op_id
        at = self.text.find(needle, self._ops_at)
        if at < 0 or self.text.find(needle, at + 1) >= 0:
            return None
        decoder = json.JSONDecoder()
        width = 4096
        while True:
            window = self.text[at:at + width]
            try:
                op, _ = decoder.raw_decode(window.decode("utf-8", errors="ignore"))
                break
            except ValueError:
                if at + width >= len(self.text):
                    return None
                width *= 4
        if not isinstance(op, dict) or op.get("id") != op_id or "name" not in op:
            return None
        return op

    def ops_at(self, indices: Sequence[int]) -> list[OpForecast] | None:
        """The ops at `indices`, as :meth:`StepForecast.ops_at` gives them, or None."""
        ids = self.rows.array["id"]
        found = {}
        for i in indices:
            op = self.op_dict(int(ids[i]))
            if op is None:
                return None
            found[i] = op
        return _op_forecasts_at({"ops": found}, self.rows, indices)

    def top_ops(self, target: str, n: int = 10) -> list[OpForecast] | None:
        """:meth:`StepForecast.top_ops`, the chosen ops decoded alone; None when they could
        not be (then ask the step)."""
        name = _canonical(target)
        if name not in self.rows.targets:
            return None
        return self.ops_at(_top_indices(self.rows, name, n))


def _op_forecasts_from_rows(step: dict[str, Any], rows: OpRows) -> list[OpForecast]:
    c = rows.columns()
    targets = rows.targets
    n = len(targets)
    return [_op_forecast(op, c["op_class"][i], c["flops"][i], c["bytes"][i],
                         {targets[t]: Prediction(c["time_us"][t][i], c["method"][t][i],
                                                 c["share_us"][t][i], c["share_method"][t][i])
                          for t in range(n)})
            for i, op in enumerate(step["ops"])]


def _saved_targets(text: str) -> list[str] | None:
    """The targets a saved forecast names ("forecast": {"targets": [...]}, written after the
    trace by :meth:`Forecast.to_json`), found without parsing the whole document again."""
    at = text.rfind('"forecast"')
    if at < 0:
        return None
    try:  # the forecast section is the document's last key; parse just that part
        saved = json.loads("{" + text[at:])
    except ValueError:
        try:
            saved = json.loads(text)
        except ValueError:
            return None
    targets = saved.get("forecast", {}).get("targets") if isinstance(saved, dict) else None
    if not isinstance(targets, list):
        return None
    return [t for t in targets if isinstance(t, str)] or None


def saved_targets_of_file(path: str | Path, tail_bytes: int = 1 << 20) -> list[str] | None:
    """The targets a saved forecast file names, read from the end of the file (where
    :meth:`Forecast.to_json` writes its "forecast" section) when it is there, so a large trace
    is not read twice (a gzip-compressed one is decompressed holding only its tail); the whole
    file otherwise."""
    tail, whole = read_tail(path, tail_bytes)
    at = tail.rfind(b'"forecast"')
    if at >= 0:
        try:
            saved = json.loads(b"{" + tail[at:])
            targets = saved.get("forecast", {}).get("targets") if isinstance(saved, dict) else None
            if isinstance(targets, list):
                return [t for t in targets if isinstance(t, str)] or None
        except ValueError:
            pass
    if whole:
        return _saved_targets(tail.decode("utf-8", errors="replace"))
    return _saved_targets(read_trace_text(path))


class _StoredDetail:
    """The detail loader of a step the engine holds as C++ structs: its trace step (decoded
    on first use) and its per-op rows; `capsule` is the step itself (StepForecast.captured)."""

    __slots__ = ("capsule", "rows")

    def __init__(self, capsule: Any, rows: OpRows) -> None:
        self.capsule, self.rows = capsule, rows

    def __call__(self) -> tuple[dict[str, Any], Any]:
        return engine.step_of_capsule(self.capsule), self.rows


def _stored_detail(capsule: Any, rows: OpRows) -> Callable[[], tuple[dict[str, Any], Any]]:
    return _StoredDetail(capsule, rows)


def _step_forecast(index: int, measured_ms: float, summary: dict[str, Any],
                   detail: Callable[[], tuple[dict[str, Any], Any]],
                   rows: OpRows | None = None,
                   views: tuple[Any, ...] | None = None) -> StepForecast:
    """A step's forecast from the engine's summary document; `detail` loads the per-op part
    (`rows`, when given, are its per-op columns, readable without loading the trace).
    `views`: the totals' containers of an earlier step with this very summary, shared."""
    if views is None:
        views = _summary_views(summary)
    targets, total_ms, phase_ms, method_ops, unsupported, timeline = views
    return StepForecast(
        index=index, measured_ms=measured_ms, targets=targets, total_ms=total_ms,
        phase_ms=phase_ms, method_ops=method_ops, unsupported=unsupported, _detail=detail,
        _rows=rows, timeline=timeline, _capsule=getattr(detail, "capsule", None),
    )


def _summary_views(summary: dict[str, Any]) -> tuple[Any, ...]:
    targets = list(summary["targets"])
    totals = {t["target"]: t for t in summary["totals"]}
    return (targets, {t: totals[t]["total_ms"] for t in targets},
            {t: dict(totals[t]["phases"]) for t in targets},
            {t: dict(totals[t]["methods"]) for t in targets},
            list(summary.get("unsupported", [])),
            {t["target"]: t for t in summary.get("timelines", [])})


#: Distinct summaries whose totals' containers Forecast._add_forecast keeps for reuse.
_SHARED_SUMMARIES = 16


class StepList(Sequence[StepForecast]):
    """Every step of a forecast, as a list to read (``len``, ``steps[i]``, ``steps[-1]``,
    slices, iteration), held compactly: a long run keeps a few numbers per step, not an object.

    The latest steps (those still holding per-op detail, ``keep_steps``) are StepForecast
    objects. An older step is stored as its index, its measured time and the position of its
    totals in a table of distinct totals (steps forecast alike share them: predict_on's reused
    steps), ~20 bytes, and becomes a StepForecast again (totals only, as it was once its detail
    was dropped) when read. Such a step is a new object each time it is read: change nothing
    in it (the totals were shared between steps before, too)."""

    __slots__ = ("_index", "_measured", "_totals_at", "_totals", "_totals_of", "_odd", "_live",
                 "_lock")

    def __init__(self) -> None:
        # The older steps, in order: index, measured ms, position in _totals.
        self._index = array("q")
        self._measured = array("d")
        self._totals_at = array("I")
        # Distinct totals: (targets, total_ms, phase_ms, method_ops, unsupported, timeline);
        # _totals_of finds one by id(total_ms) (the table holds it, so the id stays its own).
        self._totals: list[tuple[Any, ...]] = []
        self._totals_of: dict[int, int] = {}
        # Older steps that would not read back identically from the columns (an index that is
        # no int, a time that is no float, an object that is no plain StepForecast): by position.
        self._odd: dict[int, StepForecast] = {}
        # The latest steps, as appended (a list: indexed in O(1) when keep_steps is None).
        self._live: list[StepForecast] = []
        self._lock = threading.Lock()

    def append(self, step: StepForecast) -> None:
        with self._lock:
            self._live.append(step)

    def retire(self, keep: int) -> list[StepForecast]:
        """Stores all but the `keep` latest steps compactly; returns the steps it stored
        (whose detail the caller drops)."""
        with self._lock:
            leaving = len(self._live) - keep
            if leaving <= 0:
                return []
            retired = self._live[:leaving]
            del self._live[:leaving]
            for step in retired:
                self._store(step)
        return retired

    def _store(self, step: StepForecast) -> None:
        at = len(self._index)
        plain = (type(step) is StepForecast and type(step.index) is int
                 and -(1 << 63) <= step.index < (1 << 63) and type(step.measured_ms) is float)
        if not plain:
            self._odd[at] = step
            index, measured, position = 0, 0.0, 0
        else:
            index, measured = step.index, step.measured_ms
            totals = (step.targets, step.total_ms, step.phase_ms, step.method_ops,
                      step.unsupported, step.timeline)
            position = self._totals_of.get(id(step.total_ms), -1)
            if position < 0 or any(a is not b for a, b in zip(self._totals[position], totals)):
                position = len(self._totals)
                self._totals.append(totals)
                self._totals_of[id(step.total_ms)] = position
        self._index.append(index)
        self._measured.append(measured)
        self._totals_at.append(position)

    def _at(self, i: int) -> StepForecast:
        """The step at position `i` (0 <= i < len), under the lock."""
        stored = len(self._index)
        if i >= stored:
            return self._live[i - stored]
        odd = self._odd.get(i) if self._odd else None
        if odd is not None:
            return odd
        targets, total_ms, phase_ms, method_ops, unsupported, timeline = self._totals[self._totals_at[i]]
        return StepForecast(index=self._index[i], measured_ms=self._measured[i], targets=targets,
                            total_ms=total_ms, phase_ms=phase_ms, method_ops=method_ops,
                            unsupported=unsupported, timeline=timeline)

    def __len__(self) -> int:
        return len(self._index) + len(self._live)

    @overload
    def __getitem__(self, i: int) -> StepForecast: ...

    @overload
    def __getitem__(self, i: slice) -> list[StepForecast]: ...

    def __getitem__(self, i: int | slice) -> StepForecast | list[StepForecast]:
        with self._lock:
            n = len(self._index) + len(self._live)
            if isinstance(i, slice):
                return [self._at(j) for j in range(*i.indices(n))]
            j = i.__index__()
            if j < 0:
                j += n
            if not 0 <= j < n:
                raise IndexError("step index out of range")
            return self._at(j)

    def __iter__(self) -> Iterator[StepForecast]:
        i = 0
        while True:  # steps appended meanwhile are included, as a list's iterator does
            with self._lock:
                if i >= len(self._index) + len(self._live):
                    return
                step = self._at(i)
            yield step
            i += 1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StepList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return repr(list(self))


class Forecast:
    """Per-op and per-step forecasts of a training run for one or more target GPUs.

    Filled step by step by :func:`habitat.predict_on`, or built from a saved trace with
    :meth:`Forecast.load` / :meth:`Forecast.from_trace` (no model or GPU needed).
    """

    def __init__(self, targets: str | Sequence[str], origin: dict[str, Any] | None = None,
                 *, keep_steps: int | None = DEFAULT_KEEP_STEPS, history: int | None = None,
                 host_speed: float = 1.0) -> None:
        # "all", a name, a list of names: unknown names and values that are no GPU list
        # (None, 5, []) raise UnknownDeviceError with the same advice.
        self.targets: list[str] = target_names(targets)
        self.origin: dict[str, Any] = dict(origin or {"device": "cpu"})
        self._steps = StepList()
        if history is not None:  # the former name of keep_steps
            keep_steps = history
        if keep_steps is not None and (not isinstance(keep_steps, int) or keep_steps < 0):
            raise ValueError(f"keep_steps is a number of steps >= 0 (or None for all), got {keep_steps!r}")
        self.keep_steps: int | None = keep_steps
        #: The host's speed relative to the origin's host, for the timeline (2.0: a host that
        #: issues ops twice as fast). Device work is unaffected.
        self.host_speed: float = engine.check_host_speed(host_speed)
        #: Steps whose per-op detail was dropped (they keep their totals).
        self.dropped_detail_steps = 0
        # Set by predict_on: waits for steps still being forecast in the background.
        self._wait: Callable[[], None] | None = None
        #: Multi-GPU forecasts to make of each step (predict_on's world_size/cluster): the
        #: clusters (habitat.Cluster, or its keyword arguments as a dict) and the parallelism
        #: ("ddp", "tp", "pp4x8", ...).
        self.clusters: list[Any] = []
        self.parallel: Any = None
        # The latest distinct summaries appended (by id; each held, so its id stays its own)
        # and their totals' containers, shared by the steps that reuse them (predict_on's
        # steady steps: train and eval steps alternating reuse two).
        self._shared_views: dict[int, tuple[dict[str, Any], tuple[Any, ...]]] = {}

    @property
    def history(self) -> int | None:
        """The former name of :attr:`keep_steps`."""
        return self.keep_steps

    @history.setter
    def history(self, value: int | None) -> None:
        self.keep_steps = value

    @property
    def steps(self) -> StepList:
        """Every step forecast so far (steps past the history keep only their totals), as a
        list to read: older steps are held compactly and built again when read (StepList)."""
        if self._wait is not None:
            self._wait()
        return self._steps

    # ----- filling -------------------------------------------------------------------
    def add_step(self, step: dict[str, Any]) -> StepForecast:
        """Forecasts one captured step (a trace step dict) and appends it."""
        # The totals now; the per-op rows are read only if per-op detail is.
        summary, rows = engine.forecast_step_parts(self.origin, step, self.targets, self.host_speed)
        return self._append(_step_forecast(step.get("index", 0), step.get("wall_ms", 0.0),
                                           summary, lambda: (step, rows), rows))

    def _add_forecast(self, index: int, measured_ms: float, summary: dict[str, Any],
                      detail: Callable[[], tuple[dict[str, Any], Any]],
                      rows: OpRows | None = None) -> StepForecast:
        """Appends a step the engine already forecast (predict_on's worker): its summary
        document now, its per-op detail loaded by `detail` on first use. Steps passing the
        same summary object (a reused forecast, one of the last 16 distinct) share its totals'
        containers."""
        shared = self._shared_views
        entry = shared.get(id(summary))
        if entry is not None and entry[0] is summary:
            views = entry[1]
        else:
            views = _summary_views(summary)
            if len(shared) >= _SHARED_SUMMARIES:
                del shared[next(iter(shared))]  # the oldest
            shared[id(summary)] = (summary, views)
        return self._append(_step_forecast(index, measured_ms, summary, detail, rows, views))

    def _append(self, forecast: StepForecast) -> StepForecast:
        self._steps.append(forecast)
        # The step that just left the history window (every one, if keep_steps was lowered)
        # drops its detail and is stored compactly: older ones were when they left it.
        if self.keep_steps is not None:
            for step in self._steps.retire(self.keep_steps):
                step.drop_detail()
                self.dropped_detail_steps += 1
        return forecast

    def detail_note(self) -> str | None:
        """A sentence saying how many steps lost their per-op detail, or None when none did."""
        if not self.dropped_detail_steps:
            return None
        return (f"per-op detail kept for the last {self.keep_steps} step(s) only; "
                f"{self.dropped_detail_steps} older step(s) keep their totals "
                "(raise keep_steps=N, or None for all, to keep more)")

    # ----- queries -------------------------------------------------------------------
    def _step(self, step: int) -> StepForecast:
        if not self.steps:
            raise RuntimeError("no step has been forecast yet: run a training step inside "
                               "`with habitat.predict_on(...)` first")
        return self.steps[step]

    def time_ms(self, target: str | None = None, step: int = -1) -> float:
        """Predicted iteration time of `step` (default: the latest) on `target`."""
        return self._step(step).time_ms(target)

    def step_ms(self, target: str | None = None, step: int = -1) -> float:
        """The step time the user will see on `target` (host cadence and syncs included,
        see StepForecast.step_ms) of `step` (default: the latest)."""
        return self._step(step).step_ms(target)

    @property
    def ops(self) -> list[OpForecast]:
        """Every captured op of the latest step, with per-target predictions."""
        return self._step(-1).ops

    @property
    def latest(self) -> StepForecast:
        return self._step(-1)

    # ----- persistence ---------------------------------------------------------------
    def to_trace(self) -> dict[str, Any]:
        """The trace document of every step still held in detail."""
        steps = self.steps
        if self.keep_steps is not None:  # older steps lost their detail: do not walk them all
            steps = steps[max(0, len(steps) - self.keep_steps):] if self.keep_steps else []
        return engine.trace_document(self.origin, [s.trace for s in steps if s.trace is not None])

    def to_json(self, indent: int | None = None, *, last_steps: int | None = None) -> str:
        """The trace plus the forecast summary of every step (or of the last `last_steps`
        steps: a long run's log_dir keeps every step's totals in steps.jsonl instead), as one
        JSON document."""
        doc = self.to_trace()
        steps = self.steps
        shown = steps if last_steps is None or len(steps) <= last_steps else steps[len(steps) - last_steps:]
        doc["forecast"] = {"targets": self.targets, "steps": [s.summary() for s in shown],
                           "keep_steps": self.keep_steps,
                           "dropped_detail_steps": self.dropped_detail_steps}
        if len(shown) < len(steps):
            doc["forecast"]["omitted_step_totals"] = len(steps) - len(shown)
        note = self.detail_note()
        if note:
            doc["forecast"]["note"] = "the trace holds only the steps with detail: " + note
        if indent is not None:
            return json.dumps(doc, indent=indent)
        # Steps that share their ops with others (predict_on's reused steps) encode them once
        # (`json_text`): a log_dir's forecast.json is rewritten every few steps while training.
        steps_doc, doc["steps"] = doc["steps"], _STEPS_MARK
        head, tail = json.dumps(doc).split(json.dumps(_STEPS_MARK), 1)
        body = ",".join(s.json_text() if hasattr(s, "json_text") else json.dumps(s) for s in steps_doc)
        return f"{head}[{body}]{tail}"

    def save(self, path: str | Path, *, last_steps: int | None = None) -> Path:
        """Writes :meth:`to_json`; :meth:`Forecast.load` re-forecasts it for any GPU.

        The file is replaced atomically (a temporary file in the same directory, fsynced,
        then renamed over `path`): a crash or a full disk leaves the previous file intact.
        `last_steps`: only the totals of that many last steps (see :meth:`to_json`).
        """
        return atomic_write_text(Path(path), self.to_json(last_steps=last_steps))

    @classmethod
    def from_trace(cls, trace: dict[str, Any] | str | Path,
                   targets: str | Sequence[str] | None = None, *,
                   keep_steps: int | None = DEFAULT_KEEP_STEPS,
                   host_speed: float = 1.0) -> "Forecast":
        """Forecasts every step of a trace (a document or a path) for `targets`.

        The document is read once, by the engine (a dict directly, never encoded to JSON
        text; a file's text is parsed), which forecasts every step; the totals
        are read at once, each step's trace and per-op detail only when used. Its saved
        targets are used when `targets` is None. `targets` is checked before the file is read
        (an unknown name fails at once). `host_speed` scales the origin host's cadence in the
        timeline (2.0: a host twice as fast)."""
        names = target_names(targets) if targets is not None else None
        source: str | dict[str, Any]  # a file's text, or the document itself
        if isinstance(trace, (str, Path)):
            source = read_trace_text(trace)
            where = f" '{trace}'"
            if names is None:
                names = _saved_targets(source)
        else:
            # The dict itself goes to the engine, which reads it as it reads JSON text (same
            # checks and messages) without the text: json.dumps of a real step cost more than
            # forecasting it.
            source = trace_document_dict(trace)
            where = ""
            if names is None:
                saved = trace.get("forecast", {}).get("targets") if isinstance(trace, dict) else None
                names = list(saved) if saved else None
        if not names:
            raise ValueError("the trace names no targets: pass targets=['A100', ...]")
        names = target_names(names)
        try:
            origin, steps = engine.forecast_trace(source, names, engine.check_host_speed(host_speed))
        except ValueError as e:  # TraceFormatError: name the file
            message = str(e)
            if where and message.startswith("invalid habitat trace"):
                message = message.replace("invalid habitat trace", f"invalid habitat trace{where}", 1)
            elif where:
                message = f"invalid habitat trace{where}: {message}"
            raise type(e)(message) from None
        del source
        forecast = cls(names, origin, keep_steps=keep_steps, host_speed=host_speed)
        for capsule, index, wall_ms, summary, rows in steps:
            forecast._add_forecast(index, wall_ms, summary, _stored_detail(capsule, rows), rows)
        return forecast

    load = from_trace

    # ----- choosing a GPU ------------------------------------------------------------
    def compare(self, targets: str | Sequence[str] = "all", **options: Any) -> Any:
        """Ranks GPUs by predicted time, cost and memory fit (see :mod:`habitat.analysis.compare`)."""
        if _views.compare is None:
            raise RuntimeError("Forecast.compare needs habitat.analysis.compare: import habitat")
        return _views.compare(self, targets, **options)

    def on_clusters(self, parallel: Any = None, *, check: bool = False) -> list[Any]:
        """The latest detailed step on each of :attr:`clusters` (ParallelForecast objects; see
        :mod:`habitat.analysis.parallel`), with `parallel` or the predictor's parallelism.
        ``check=True`` only validates the clusters and the parallelism (raises ValueError)."""
        if _views.clusters is None:
            raise RuntimeError("Forecast.on_clusters needs habitat.analysis: import habitat")
        return _views.clusters(self, self.clusters, self.parallel if parallel is None else parallel,
                               check=check)

    # ----- display -------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Forecast(targets={self.targets}, steps={len(self.steps)})"

    def __str__(self) -> str:
        return repr(self) if _views.text is None else _views.text(self)


@dataclass
class _Views:
    """The higher layers' functions behind Forecast.compare and str(Forecast)."""

    compare: Callable[..., Any] | None = None
    text: Callable[[Forecast], str] | None = None
    clusters: Callable[..., Any] | None = None


_views = _Views()


def set_views(*, compare: Callable[..., Any], text: Callable[[Forecast], str],
              clusters: Callable[..., Any] | None = None) -> None:
    """Plugs in ``forecast.compare(...)`` (``compare(forecast, targets, **options)``),
    ``str(forecast)`` (``text(forecast)``) and ``forecast.on_clusters()``
    (``clusters(forecast, clusters, parallel)``); called by ``habitat/__init__.py``."""
    _views.compare, _views.text = compare, text
    if clusters is not None:
        _views.clusters = clusters


def read_step_history(path: str | Path, run: str | None = None) -> list[dict[str, Any]]:
    """The per-step totals of a ``steps.jsonl`` history (``predict_on(..., log_dir=d)`` appends
    one line per step to ``d/steps.jsonl``), optionally of one run only. A last line cut short
    by a crash is skipped; every complete line is returned in file order."""
    from habitat.data.files import read_lines

    rows = []
    for line in read_lines(path):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if run is None or row.get("run") == run:
            rows.append(row)
    return rows
