"""Forecast results: per op, per phase and per step, for each target GPU.

:class:`Forecast` (this module) holds a run's steps (:class:`~habitat.data.step_list.StepList`)
of :class:`~habitat.data.step_forecast.StepForecast`, each with its ops'
:class:`~habitat.data.op_forecast.OpForecast`; saved files are read by
:mod:`habitat.data.saved_forecast`. Those names are importable from here too.

This is the data layer: it imports nothing of Habitat above it at import time. Three
conveniences of :class:`Forecast` belong to higher layers: ``print(forecast)`` (present: the
text view), ``forecast.compare()`` (analysis: ranking GPUs) and ``forecast.on_clusters()``
(analysis: multi-GPU forecasts). Each is a function of the package root (``habitat/__init__.py``
imports every layer before any forecast exists), which these methods import when called, so
``print(forecast)`` is followed from here and nothing is plugged in at import time.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

from habitat.data import engine
from habitat.data.devices import target_names
from habitat.data.files import atomic_write_text, read_input_bytes
from habitat.data.op_forecast import SHAPE_BASED_METHODS, OpForecast, Prediction
from habitat.data.op_rows import OpRows
from habitat.data.saved_forecast import read_step_history, saved_targets, saved_targets_of_file
from habitat.data.step_forecast import StepForecast, StoredDetail, step_from_summary, summary_views
from habitat.data.step_list import StepList
from habitat.data.step_text import StepText
from habitat.data.trace import trace_document_dict

__all__ = ["DEFAULT_HISTORY", "DEFAULT_KEEP_STEPS", "SHAPE_BASED_METHODS", "Forecast",
           "OpForecast", "Prediction", "StepForecast", "StepList", "StepText",
           "read_step_history", "saved_targets_of_file"]

# Stands for the steps while the rest of a forecast document is encoded (Forecast.to_json).
_STEPS_MARK = "\x00habitat-steps\x00"

#: Steps whose per-op detail is kept in memory (``keep_steps``); older steps keep only their
#: totals, so a forecast attached to a long training run stays small. ``save()`` writes the
#: trace of these steps and the totals of every step, and says how many lost their detail.
DEFAULT_KEEP_STEPS = 8
DEFAULT_HISTORY = DEFAULT_KEEP_STEPS  # the former name

#: Distinct summaries whose totals' containers Forecast._add_forecast keeps for reuse.
_SHARED_SUMMARIES = 16


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
        return self._append(step_from_summary(step.get("index", 0), step.get("wall_ms", 0.0),
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
            views = summary_views(summary)
            if len(shared) >= _SHARED_SUMMARIES:
                del shared[next(iter(shared))]  # the oldest
            shared[id(summary)] = (summary, views)
        return self._append(step_from_summary(index, measured_ms, summary, detail, rows, views))

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
        steps: Sequence[StepForecast] = self.steps
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
        source: bytes | bytearray | dict[str, Any]  # a file's bytes, or the document itself
        if isinstance(trace, (str, Path)):
            # The bytes as read (decompressed), handed to the engine as they are: no second
            # copy as text while it parses (issue 34: the peak of reading stays ~ the size).
            source = read_input_bytes(trace)
            where = f" '{trace}'"
            if names is None:
                names = saved_targets(source)
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
            try:
                error = type(e)(message)
            except TypeError:  # a ValueError whose constructor takes more (UnicodeDecodeError)
                error = ValueError(message)
            raise error from None
        del source
        forecast = cls(names, origin, keep_steps=keep_steps, host_speed=host_speed)
        for capsule, index, wall_ms, summary, rows in steps:
            forecast._add_forecast(index, wall_ms, summary, StoredDetail(capsule, rows), rows)
        return forecast

    load = from_trace

    # ----- choosing a GPU ------------------------------------------------------------
    def compare(self, targets: str | Sequence[str] = "all", **options: Any) -> Any:
        """Ranks GPUs by predicted time, cost and memory fit (see :mod:`habitat.analysis.compare`)."""
        import habitat  # analysis' view, through the package root (see the module's docstring)

        return habitat._compare_forecast(self, targets, **options)

    def on_clusters(self, parallel: Any = None, *, check: bool = False) -> list[Any]:
        """The latest detailed step on each of :attr:`clusters` (ParallelForecast objects; see
        :mod:`habitat.analysis.parallel`), with `parallel` or the predictor's parallelism.
        ``check=True`` only validates the clusters and the parallelism (raises ValueError)."""
        import habitat  # analysis' view, through the package root (see the module's docstring)

        return habitat._forecast_on_clusters(self, self.clusters,
                                             self.parallel if parallel is None else parallel,
                                             check=check)

    # ----- display -------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Forecast(targets={self.targets}, steps={len(self.steps)})"

    def __str__(self) -> str:
        import habitat  # present's text view, through the package root (see the module's docstring)

        return habitat._forecast_text(self)
