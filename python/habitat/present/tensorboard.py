"""TensorBoard view of a forecast: step times, phases and per-op predictions for each target GPU.

``habitat.predict_on(..., log_dir="runs/x")`` writes these to ``runs/x/<run name>/`` (one
TensorBoard run per ``predict_on``); a saved trace can be logged with ``python -m habitat predict
TRACE --target A100 --log-dir runs/x``. Then run ``tensorboard --logdir runs``.

What is written when (``detail_every``, default ``DEFAULT_DETAIL_EVERY`` = 100):

- every step: the scalars (measured time, predicted time and phases per GPU): 1.2 KB per
  step for 3 GPUs (measured by ``benchmarks/scale/scale.py``, benchmarks/results/scale-cpu.txt);
- every ``detail_every`` steps, and whenever the step's ops change (a different op count or
  method mix, e.g. an evaluation step or a new shape): the top-op scalars, the histograms and
  the per-op text table, which is the bulk: 36 KB for a 237-op step and 3 GPUs, hundreds of
  KB for large steps. 100k steps of that step: ~150 MB (it was ~3.6 GB with the detail every
  step).
  Building it needs every op's detail, so skipping it also keeps the per-op objects unbuilt.

Tags (``<gpu>`` is the canonical device name, e.g. ``A100-SXM4-80GB``):

- ``habitat-step/measured_ms``: the step's wall time measured on this machine;
- ``habitat-step/predicted_ms/<gpu>``: predicted iteration time;
- ``habitat-phase/<gpu>/<phase>_ms``: predicted forward / backward / optimizer / other time;
- ``habitat-top-ops/<gpu>/<phase>:<module>:<op>``: predicted time (us) of the step's top ops;
- ``habitat-op-time-us/<gpu>``: histogram of every leaf op's predicted time (us);
- ``habitat-ops`` (text): every op with its module, input shapes, measured and predicted times;
- a custom-scalars layout ("Habitat" tab) with predicted iteration time per GPU on one chart.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from habitat.present import timeline_view, view

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast, OpForecast, StepForecast

STEP = "habitat-step"
PHASE = "habitat-phase"
TOP_OPS = "habitat-top-ops"
OP_HISTOGRAM = "habitat-op-time-us"
OPS_TABLE = "habitat-ops"
DEFAULT_TOP_OPS = 10
#: Steps between two logs of the per-op detail (table, histograms, top-op scalars).
DEFAULT_DETAIL_EVERY = 100

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-#]+")


#: Seconds between two writes of queued TensorBoard events (and at close).
FLUSH_SECS = 5


def _summary_writer(log_dir: str) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ImportError("TensorBoard logging needs the tensorboard package: "
                          f"pip install tensorboard ({exc})") from None
    # Events queue up and the writer's thread writes them every FLUSH_SECS: flushing every
    # step made the forecast thread wait for the file at each step (1-2 ms a step).
    return SummaryWriter(log_dir=log_dir, max_queue=1000, flush_secs=FLUSH_SECS)


def _op_key(op: "OpForecast") -> str:
    """A tag-safe name that follows the same op from step to step."""
    module = view.op_location(op)
    return _UNSAFE.sub("_", f"{op.phase}:{module}:{op.full_name}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def ops_table(step: "StepForecast") -> str:
    """Markdown table of every op of `step` (sub-ops indented under their composite op)."""
    header = ["op", "module", "phase", "input shapes", "measured (us)"]
    header += [f"{t} (us)" for t in step.targets] + [f"method {t}" for t in step.targets]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for op in step.ops:
        name = "&nbsp;&nbsp;" * op.depth + op.full_name
        cells = [name, view.op_location(op), op.phase, view.format_shapes(op, sep="; "),
                 f"{op.measured_us:.1f}"]
        cells += [f"{op.predictions[t].time_us:.2f}" for t in step.targets]
        cells += [op.predictions[t].method for t in step.targets]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    title = (f"**Step {step.index}**: measured {step.measured_ms:.3f} ms on this machine; "
             + ", ".join(f"{t} {step.total_ms[t]:.3f} ms" for t in step.targets)
             + f". {len(step.ops)} ops; composite ops sum the indented ops under them.")
    return title + "\n\n" + "\n".join(lines)


class TensorBoardLogger:
    """Writes a forecast to TensorBoard event files in `log_dir`, one TensorBoard step per step.

    Scalars every step; the per-op detail (top-op scalars, histograms, the ops table) every
    ``detail_every`` steps and whenever the step's ops change (``detail_every=1``: every step).
    ``top_ops`` is how many ops per GPU get their own scalar chart. ``text_every`` is the
    former name of ``detail_every``.
    """

    def __init__(self, log_dir: str | Path, *, top_ops: int = DEFAULT_TOP_OPS,
                 detail_every: int = DEFAULT_DETAIL_EVERY, text_every: int | None = None) -> None:
        self.log_dir = str(log_dir)
        self.top_ops = top_ops
        self.detail_every = max(1, int(text_every if text_every is not None else detail_every))
        self._writer = _summary_writer(self.log_dir)
        self._layout_targets: list[str] | None = None
        self._logged = 0
        self._since_detail = 0
        self._last_signature: tuple[Any, ...] | None = None

    @property
    def text_every(self) -> int:
        return self.detail_every

    @staticmethod
    def _signature(step: "StepForecast") -> tuple[Any, ...]:
        """What identifies the step's ops without building them: op counts per method and
        phase totals' keys per target, and the ops not modelled."""
        return (tuple((t, tuple(sorted(step.method_ops[t].items()))) for t in step.targets),
                tuple(sorted(step.phase_ms[step.targets[0]])) if step.targets else (),
                tuple(step.unsupported))

    # ----- writing -------------------------------------------------------------------
    def log_step(self, forecast: "Forecast", step: "StepForecast") -> None:
        """Logs one forecast step (called by predict_on after each captured step)."""
        w = self._writer
        n = step.index
        targets = list(step.targets)
        if self._layout_targets != targets:
            w.add_custom_scalars(self.layout(targets))
            self._layout_targets = targets
        w.add_scalar(f"{STEP}/measured_ms", step.measured_ms, n)
        for t in targets:
            w.add_scalar(f"{STEP}/predicted_ms/{t}", step.total_ms[t], n)
            for phase in view.PHASES:
                if phase in step.phase_ms[t]:
                    w.add_scalar(f"{PHASE}/{t}/{phase}_ms", step.phase_ms[t][phase], n)
            timeline = timeline_view.summary(step, t)
            if timeline is not None:  # the step as seen: host cadence and syncs included
                w.add_scalar(f"{STEP}/step_ms/{t}", timeline["step_ms"], n)
                w.add_scalar(f"{STEP}/gpu_busy_fraction/{t}", timeline["gpu_busy_fraction"], n)
                w.add_scalar(f"{STEP}/host_bound/{t}", float(timeline["host_bound"]), n)
        signature = self._signature(step)
        detail = (self._logged == 0 or signature != self._last_signature
                  or self._since_detail + 1 >= self.detail_every)
        self._last_signature = signature
        self._logged += 1
        if detail and step.ops:
            self._since_detail = 0
            self._log_detail(step, n)
            w.flush()  # the first step and each detail step show at once
        else:
            self._since_detail += 1

    def _log_detail(self, step: "StepForecast", n: int) -> None:
        w = self._writer
        keys = tag_keys(step.ops)
        for t in step.targets:
            # Shares: each piece of work once, so the charts add up to the step's total.
            counted = step.counted_ops(t)
            for op in view.top_ops(step, t, self.top_ops):
                w.add_scalar(f"{TOP_OPS}/{t}/{keys[id(op)]}", op.predictions[t].share_us, n)
            if counted:
                w.add_histogram(f"{OP_HISTOGRAM}/{t}",
                                _as_array([op.predictions[t].share_us for op in counted]), n)
        w.add_text(OPS_TABLE, ops_table(step), n)

    def log_forecast(self, forecast: "Forecast") -> None:
        """Logs every step of `forecast` (a loaded trace, for example)."""
        for step in forecast.steps:
            self.log_step(forecast, step)

    @staticmethod
    def layout(targets: list[str]) -> dict[str, dict[str, list[Any]]]:
        """The custom-scalars layout: per-GPU series of a quantity on one chart."""
        charts: dict[str, list[Any]] = {
            "predicted iteration time per GPU (ms)": ["Multiline", [f"{STEP}/predicted_ms/.*"]],
            "measured step time on this machine (ms)": ["Multiline", [f"{STEP}/measured_ms"]],
            "step time as seen, host included, per GPU (ms)": ["Multiline", [f"{STEP}/step_ms/.*"]],
            "GPU busy fraction per GPU": ["Multiline", [f"{STEP}/gpu_busy_fraction/.*"]],
        }
        for phase in view.PHASES:
            charts[f"predicted {phase} time per GPU (ms)"] = [
                "Multiline", [f"{PHASE}/{re.escape(t)}/{phase}_ms" for t in targets]]
        return {"Habitat": charts}

    # ----- lifetime ------------------------------------------------------------------
    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "TensorBoardLogger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tag_keys(ops: list["OpForecast"]) -> dict[int, str]:
    """Tag keys for ops; repeats of the same op in the same module get #2, #3 ... in order."""
    seen: Counter[str] = Counter()
    keys = {}
    for op in ops:
        key = _op_key(op)
        seen[key] += 1
        keys[id(op)] = key if seen[key] == 1 else f"{key}#{seen[key]}"
    return keys


def _as_array(values: list[float]) -> Any:
    import numpy as np

    return np.asarray(values, dtype=np.float64)
