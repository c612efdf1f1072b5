"""TensorBoard view of a forecast: one TensorBoard run per target GPU, so every chart draws
each GPU as its own line, coloured and named by TensorBoard; the step time as seen first.

``habitat.predict_on(..., log_dir="runs/x")`` writes these to ``runs/x/<run name>/`` (one
folder per ``predict_on``); a saved trace can be logged with ``habitat predict TRACE --target
A100 --log-dir runs/x``. Then run ``tensorboard --logdir runs``. A logger's folder holds:

- ``<folder>/``: the step measured on this machine, the per-op text table and the
  custom-scalars layout (the "Custom Scalars" tab: the step as seen of every GPU on one chart);
- ``<folder>/<gpu>/`` (the canonical device name, e.g. ``A100-SXM4-80GB``): that GPU's
  charts. Each chart is one tag, the same in every GPU's folder:

  ``Step time, ms/as seen`` the step as the user will see it (host launch cadence and waits
  included; the kernel sum where there is no timeline), ``Step time, ms/kernels`` the kernel
  sum, ``Step time, ms, by phase/<phase>`` (kernels), ``Where the GPU waits/GPU busy`` and
  ``.../host-bound`` (1 when the GPU waits for the host), ``Top ops, us/<phase>:<module>:<op>``
  (what each of the step's top ops adds to it) and the histogram ``Time per op, us/share``.

TensorBoard's Time Series tab sorts groups by name ("/" first, capitals before lower case) and
opens the first two: ``Step time, ms`` and ``Step time, ms, by phase``; the rest start folded.

What is written when (``detail_every``, default ``DEFAULT_DETAIL_EVERY`` = 100):

- every step, predict_on's coalesced steps included: the scalars, one event record per folder
  encoded in C++ (:class:`EventFile`; benchmarks/overhead/tb_scalars.py);
- every ``detail_every`` steps, and whenever the step's ops change (a different op count or
  method mix, e.g. an evaluation step or a new shape): the top-op scalars, the histograms and
  the per-op text table, which is the bulk: 36 KB for a 237-op step and 3 GPUs, hundreds of
  KB for large steps. Building it needs every op's detail, so skipping it also keeps the
  per-op objects unbuilt.
"""
from __future__ import annotations

import functools
import itertools
import os
import re
import socket
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from habitat.present import timeline_view, view
from habitat.present.escape import markdown_text

if TYPE_CHECKING:
    from habitat.data.forecast import Forecast, OpForecast, StepForecast

#: Tag groups (the part of a tag before its first "/"); see the module's docstring. No tag
#: holds a regular expression's special characters: the Custom Scalars tab reads the tags it
#: matched as patterns again.
STEP = "Step time, ms"
PHASE = "Step time, ms, by phase"
WAITS = "Where the GPU waits"
TOP_OPS = "Top ops, us"
OP_HISTOGRAM = "Time per op, us"
OPS_TABLE = "habitat-ops"
#: The tags of a step's time in each GPU's folder, and the measured one in the logger's own.
AS_SEEN = f"{STEP}/as seen"
KERNELS = f"{STEP}/kernels"
MEASURED = f"{STEP}/measured on this machine"
DEFAULT_TOP_OPS = 10
#: Steps between two logs of the per-op detail (table, histograms, top-op scalars).
DEFAULT_DETAIL_EVERY = 100

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:\-#]+")


#: Seconds between two flushes of the event file to disk (and at each detail step and close).
FLUSH_SECS = 5

_file_counter = itertools.count()


class EventFile:
    """One TensorBoard event file (``events.out.tfevents.<time>.<host>.<pid>.<n>``), appended
    with buffered writes on the caller's thread.

    Every record is framed by habitat._engine (length, masked CRC-32C), and a step's scalars
    are encoded there too (``tb_scalars_record``): a few microseconds for ~20 scalars, where
    SummaryWriter.add_scalar built a protobuf per scalar and framed it with a pure-Python CRC.
    That is what lets predict_on write the scalars of every step, coalesced ones included.
    The rarer summaries (histograms, text, the custom-scalars layout) are serialised with
    TensorBoard's protobufs and framed the same way, so a run has one event file.
    """

    def __init__(self, log_dir: str | Path) -> None:
        from habitat import _engine

        self._engine = _engine
        directory = Path(log_dir)
        directory.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self.path = directory / (f"events.out.tfevents.{int(now):010d}.{socket.gethostname()}"
                                 f".{os.getpid()}.{next(_file_counter)}")
        self._file = open(self.path, "ab", buffering=1 << 16)
        self._file.write(_engine.tb_file_version_record(now))
        self._file.flush()
        self._last_flush = time.monotonic()

    def scalars(self, step: int, tags: list[str], values: list[float]) -> None:
        """One record holding a scalar per tag at `step` (what add_scalar writes, per tag)."""
        self._file.write(self._engine.tb_scalars_record(step, time.time(), tags, values))
        if time.monotonic() - self._last_flush >= FLUSH_SECS:
            self.flush()

    def summary(self, summary: Any, step: int) -> None:
        """A tensorboard Summary protobuf at `step`."""
        from tensorboard.compat.proto.event_pb2 import Event

        event = Event(wall_time=time.time(), step=step, summary=summary)
        self._file.write(self._engine.tb_record(event.SerializeToString()))

    def flush(self) -> None:
        self._file.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def _summaries() -> Any:
    try:
        from torch.utils.tensorboard import summary
    except ImportError as exc:
        raise ImportError("TensorBoard logging needs the tensorboard package: "
                          f"pip install tensorboard ({exc})") from None
    return summary


def _op_key(op: "OpForecast") -> str:
    """A tag-safe name that follows the same op from step to step."""
    module = view.op_location(op)
    return _UNSAFE.sub("_", f"{op.phase}:{module}:{op.full_name}")


def ops_table(step: "StepForecast") -> str:
    """Markdown table of every op of `step` (sub-ops indented under their composite op)."""
    header = ["op", "module", "phase", "input shapes", "measured (us)"]
    header += [f"{t} (us)" for t in step.targets] + [f"method {t}" for t in step.targets]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for op in step.ops:
        # TensorBoard's text panel renders Markdown: what comes from the trace is escaped.
        cells = [markdown_text(c, starts_line=False) for c in (op.full_name, view.op_location(op), op.phase,
                                              view.format_shapes(op, sep="; "))]
        cells[0] = "&nbsp;&nbsp;" * op.depth + cells[0]
        cells.append(f"{op.measured_us:.1f}")
        cells += [f"{op.predictions[t].time_us:.2f}" for t in step.targets]
        cells += [markdown_text(op.predictions[t].method, starts_line=False) for t in step.targets]
        lines.append("| " + " | ".join(cells) + " |")
    title = (f"**Step {step.index}**: measured {step.measured_ms:.3f} ms on this machine; "
             + ", ".join(f"{t} {step.total_ms[t]:.3f} ms" for t in step.targets)
             + f". {len(step.ops)} ops; composite ops sum the indented ops under them.")
    return title + "\n\n" + "\n".join(lines)


class TensorBoardLogger:
    """Writes a forecast to TensorBoard event files under `log_dir`, one TensorBoard step per
    step: the logger's own folder (measured step, ops table, layout) and one folder per target
    GPU (see the module's docstring).

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
        self._summaries = _summaries()
        self._writer = EventFile(self.log_dir)
        self._gpu_writers: dict[str, EventFile] = {}
        self._layout_written = False
        self._logged = 0
        self._since_detail = 0
        self._last_signature: tuple[Any, ...] | None = None

    @property
    def text_every(self) -> int:
        return self.detail_every

    def _writer_of(self, run: str) -> EventFile:
        """The event file of a GPU's folder ("" is the logger's own)."""
        if not run:
            return self._writer
        writer = self._gpu_writers.get(run)
        if writer is None:
            writer = self._gpu_writers[run] = EventFile(Path(self.log_dir) / run_folder(run))
        return writer

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
        n = step.index
        if not self._layout_written:
            self._writer.summary(self._summaries.custom_scalars(self.layout()), 0)
            self._layout_written = True
        self.log_scalars(step)
        signature = self._signature(step)
        detail = (self._logged == 0 or signature != self._last_signature
                  or self._since_detail + 1 >= self.detail_every)
        self._last_signature = signature
        self._logged += 1
        if detail and step.ops:
            self._since_detail = 0
            self._log_detail(step, n)
            self.flush()  # the first step and each detail step show at once
        else:
            self._since_detail += 1

    def log_scalars(self, step: "StepForecast") -> None:
        """Writes the step's scalars only (one record per folder): cheap enough for every step,
        so predict_on calls it for the steps whose other sinks are coalesced."""
        for run, (tags, values) in scalars(step).items():
            self._writer_of(run).scalars(step.index, tags, values)

    def _log_detail(self, step: "StepForecast", n: int) -> None:
        summaries = self._summaries
        keys = tag_keys(step.ops)
        for t in step.targets:
            w = self._writer_of(t)
            # Shares: each piece of work once, so the charts add up to the step's total.
            counted = step.counted_ops(t)
            top = view.top_ops(step, t, self.top_ops)
            if top:
                w.scalars(n, [f"{TOP_OPS}/{keys[id(op)]}" for op in top],
                          [op.predictions[t].share_us for op in top])
            if counted:
                w.summary(summaries.histogram(
                    f"{OP_HISTOGRAM}/share", _as_array([op.predictions[t].share_us for op in counted]),
                    _histogram_bins()), n)
        self._writer.summary(summaries.text(OPS_TABLE, ops_table(step)), n)

    def log_forecast(self, forecast: "Forecast") -> None:
        """Logs every step of `forecast` (a loaded trace, for example)."""
        for step in forecast.steps:
            self.log_step(forecast, step)

    @staticmethod
    def layout() -> dict[str, dict[str, list[Any]]]:
        """The custom-scalars layout: a quantity per chart, each GPU's folder (a run) a line of
        it, so the charts need no per-GPU tags."""
        return {"Habitat": {
            "step time as seen per GPU (ms)": ["Multiline", [re.escape(AS_SEEN)]],
            "kernels per GPU (ms)": ["Multiline", [re.escape(KERNELS)]],
            "GPU busy per GPU (fraction of the step)": ["Multiline", [re.escape(f"{WAITS}/GPU busy")]],
            "measured step on this machine (ms)": ["Multiline", [re.escape(MEASURED)]],
        }}

    # ----- lifetime ------------------------------------------------------------------
    def flush(self) -> None:
        self._writer.flush()
        for writer in self._gpu_writers.values():
            writer.flush()

    def close(self) -> None:
        self._writer.close()
        for writer in self._gpu_writers.values():
            writer.close()

    def __enter__(self) -> "TensorBoardLogger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_folder(gpu: str) -> str:
    """The folder (and TensorBoard run) of a GPU under a logger's folder."""
    return _UNSAFE.sub("_", gpu)


def scalars(step: "StepForecast") -> dict[str, tuple[list[str], list[float]]]:
    """A step's scalars by run: "" (the logger's own folder: the measured step) and each
    target GPU (the step as seen, kernels, phases and, with a timeline, how busy the GPU is)."""
    out = {"": ([MEASURED], [float(step.measured_ms)])}
    for t in step.targets:
        tags = [AS_SEEN, KERNELS]
        values = [float(step.step_ms(t)), float(step.total_ms[t])]
        phases = step.phase_ms[t]
        for phase in view.PHASES:
            if phase in phases:
                tags.append(f"{PHASE}/{phase}")
                values.append(float(phases[phase]))
        timeline = timeline_view.summary(step, t)
        if timeline is not None:  # host cadence and syncs included
            tags += [f"{WAITS}/GPU busy", f"{WAITS}/host-bound"]
            values += [float(timeline["gpu_busy_fraction"]), float(timeline["host_bound"])]
        out[t] = (tags, values)
    return out


def tag_keys(ops: list["OpForecast"]) -> dict[int, str]:
    """Tag keys for ops; repeats of the same op in the same module get #2, #3 ... in order."""
    seen: Counter[str] = Counter()
    keys = {}
    for op in ops:
        key = _op_key(op)
        seen[key] += 1
        keys[id(op)] = key if seen[key] == 1 else f"{key}#{seen[key]}"
    return keys


@functools.lru_cache(maxsize=1)
def _histogram_bins() -> list[float]:
    """SummaryWriter's default ("tensorflow") bucket edges: +-1e-12 .. 1e20, x1.1 apart."""
    v, buckets = 1e-12, []
    while v < 1e20:
        buckets.append(v)
        v *= 1.1
    return [-b for b in reversed(buckets)] + [0] + buckets


def _as_array(values: list[float]) -> Any:
    import numpy as np

    return np.asarray(values, dtype=np.float64)
