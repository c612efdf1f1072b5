"""The step as seen from a traced (detailed) step alone, without the host calibration, on every
recorded format-2 GPU trace (issue 31).

A forecast's first figure comes from a detailed step, before any steady-state step exists to
calibrate its host cadence to. Each recorded format-2 trace (benchmarks/results/<run>/traces,
runs in FORMAT2_RUNS) is the second detailed step of ``predict_on``; it is re-forecast for its
own GPU and compared with the step the benchmark measured without Habitat
(``benchmark.measured.median_ms``):

- uncalibrated: the timeline's ``uncalibrated_step_ms``, the host cadence as the trace gives it
  with Habitat's own measured time taken out (no step wall time is used);
- calibrated: ``step_ms``, the host scaled to a steady-state step's wall (timeline_calibrate.cpp),
  and the factor (``host_scale``). Only the 2026-11-23/-26 H100 traces carry one (their
  ``wall_ms``, shorter than the traced ops); the first-step traces were saved right after the
  detailed steps, their ``wall_ms`` is the traced step's own, and the engine leaves their host
  as traced: ``steady_wall_ms`` 0, calibrated equal to uncalibrated, and no calibrated figures
  in ``summary`` (benchmarks/timeline/first_step.py's table has the live run's calibrated step).

Beside them, where the traced host time goes (``host breakdown``): the traced span, what the
capture timed itself per op (``overhead_us``), Habitat's time before ops (``own_before_us``;
the step's ``hook_overhead_us`` in older traces), what the engine removed beyond those (the
capture's untimed per-op cost estimated from wrapper ops, the lead-in), CUPTI's measured cost
per launch where the trace records it, idle stalls (no op open on any thread for over 1 ms;
not removed), and what is left over the measured step per kernel launch.

No measured step time is used by any forecast: measured times appear only in the error columns.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from habitat.analysis.host_model import load_document
from habitat.data.checkout import checkout_path
from habitat.data.forecast import Forecast

#: Recorded runs whose traces are format 2 (CUPTI launch times, syncs, Habitat's own times):
#: folder under benchmarks/results -> the GPU they ran on.
FORMAT2_RUNS = {"h100-sxm5-80gb-2026-11-23": "H100-SXM5-80GB",
                "h100-sxm5-80gb-2026-11-26": "H100-SXM5-80GB",
                "first-step-H200-SXM-141GB-2026-11-27/run1": "H200-SXM-141GB",
                "first-step-H200-SXM-141GB-2026-11-27/run2": "H200-SXM-141GB",
                "first-step-H200-SXM-141GB-2026-11-28/run1": "H200-SXM-141GB",
                "first-step-H200-SXM-141GB-2026-11-28/run2": "H200-SXM-141GB"}
#: Gaps on the traced clock with no op open on any thread, longer than this: idle stalls (the
#: threshold of benchmarks/timeline/README.md).
STALL_US = 1000.0
#: A step whose measured kernels sum to within this share of the measured step is device-bound
#: (issue 31's rule for the verdict).
DEVICE_BOUND_WITHIN = 0.05


@dataclass
class Row:
    run: str
    workload: str
    machine: str
    measured_ms: float            # the benchmark's untraced step (CUDA events, median)
    kernel_sum_ms: float          # the trace's kernels on the origin
    uncalibrated_ms: float        # the step as seen from the traced step alone
    calibrated_ms: float          # the same, host calibrated to the trace's steady-state wall
    host_scale: float             # the calibration's factor (1.0: none)
    host_bound: bool              # the uncalibrated forecast's verdict
    gpu_busy: float               # its GPU-busy share
    uncalibrated_host_ms: float   # its host time per step
    steady_wall_ms: float         # the untraced wall the host is calibrated to (0: none)
    traced_span_ms: float         # first op start to last op end, as traced
    recorded_ms: float            # sum of overhead_us: the capture's own timed work per op
    before_ms: float              # own_before_us (or the step's hook_overhead_us)
    other_removed_ms: float       # removed by the engine beyond those: untimed per-op, lead-in
    cupti_removed_ms: float       # CUPTI's measured cost per launch x launches (0: not recorded)
    stalls_ms: float              # idle stalls (not removed)
    launches: int                 # kernel launches in the step
    launch_overhead_us: float     # CUPTI's cost per launch recorded in the trace (0: none)

    @staticmethod
    def error(forecast: float, measured: float) -> float:
        return 100.0 * (forecast / measured - 1.0)

    @property
    def uncalibrated_error(self) -> float:
        return self.error(self.uncalibrated_ms, self.measured_ms)

    @property
    def calibrated_error(self) -> float:
        return self.error(self.calibrated_ms, self.measured_ms)

    @property
    def device_bound_measured(self) -> bool:
        """The measured kernels sum to the measured step (within 5%): the untraced step was
        device-bound."""
        return abs(self.kernel_sum_ms / self.measured_ms - 1.0) <= DEVICE_BOUND_WITHIN

    @property
    def left_per_launch_us(self) -> float:
        """The uncalibrated host's excess over the measured step, per launch (host-bound steps)."""
        return 1000.0 * (self.uncalibrated_host_ms - self.measured_ms) / max(1, self.launches)


def idle_stalls_us(ops: list[dict[str, Any]], threshold_us: float = STALL_US) -> float:
    """Sum of the gaps longer than `threshold_us` in which no op is open on any thread."""
    spans = sorted((op.get("start_us", 0.0), op.get("start_us", 0.0) + op.get("wall_us", 0.0)) for op in ops)
    total, end = 0.0, None
    for start, stop in spans:
        if end is not None and start - end > threshold_us:
            total += start - end
        end = stop if end is None else max(end, stop)
    return total


def recorded_traces(results: Path | None = None) -> dict[tuple[str, str], Path]:
    """(run folder, workload) -> trace path for every run of FORMAT2_RUNS present."""
    results = results or checkout_path("benchmarks/results")
    out = {}
    for run in FORMAT2_RUNS:
        for path in sorted((results / run / "traces").glob("*.json.gz")):
            out[(run, path.name.removesuffix(".json.gz"))] = path
    if not out:
        raise FileNotFoundError(f"no format-2 traces under {results}/<run>/traces for runs {list(FORMAT2_RUNS)}")
    return out


def evaluate_trace(run: str, workload: str, doc: dict[str, Any]) -> Row:
    machine = FORMAT2_RUNS[run]
    step = doc["steps"][-1]
    ops = step["ops"]
    t = Forecast.from_trace(doc, [machine]).latest.timeline[machine]
    recorded = sum(op.get("overhead_us", 0.0) for op in ops)
    before = sum(op.get("own_before_us", 0.0) for op in ops)
    if not any("own_before_us" in op for op in ops):
        before = step.get("hook_overhead_us", 0.0)
    launches = sum(len(op.get("kernels", [])) for op in ops)
    per_launch = float(t.get("launch_overhead_us", 0.0) or 0.0)
    cupti = per_launch * sum(1 for op in ops for k in op.get("kernels", []) if "launch_us" in k)
    removed = 1000.0 * t["overhead_removed_ms"]
    starts = [op.get("start_us", 0.0) for op in ops]
    ends = [op.get("start_us", 0.0) + op.get("wall_us", 0.0) for op in ops]
    return Row(
        run=run, workload=workload, machine=machine,
        measured_ms=doc["benchmark"]["measured"]["median_ms"], kernel_sum_ms=t["kernel_sum_ms"],
        uncalibrated_ms=t["uncalibrated_step_ms"], calibrated_ms=t["step_ms"],
        host_scale=t["host_scale"], host_bound=False, gpu_busy=0.0, uncalibrated_host_ms=0.0,
        steady_wall_ms=t["calibration_wall_ms"],
        traced_span_ms=(max(ends) - min(starts)) / 1000.0 if ops else 0.0,
        recorded_ms=recorded / 1000.0, before_ms=before / 1000.0,
        other_removed_ms=(removed - recorded - before - cupti) / 1000.0, cupti_removed_ms=cupti / 1000.0,
        stalls_ms=idle_stalls_us(ops) / 1000.0, launches=launches, launch_overhead_us=per_launch)


def _uncalibrated_view(row: Row, doc: dict[str, Any]) -> None:
    """The verdict, GPU-busy share and host time of the uncalibrated forecast."""
    plain = {**doc, "steps": [{**{k: v for k, v in s.items() if k != "uninstrumented_wall_ms"}, "wall_ms": 0.0}
                              for s in doc["steps"]]}
    t = Forecast.from_trace(plain, [row.machine]).latest.timeline[row.machine]
    row.host_bound, row.gpu_busy, row.uncalibrated_host_ms = t["host_bound"], t["gpu_busy_fraction"], t["host_ms"]


def evaluate(results: Path | None = None) -> list[Row]:
    rows = []
    for (run, workload), path in recorded_traces(results).items():
        doc = load_document(path)
        row = evaluate_trace(run, workload, doc)
        _uncalibrated_view(row, doc)
        rows.append(row)
    return rows


def summary(rows: list[Row]) -> dict[str, Any]:
    """The figures issue 31's targets name: uncalibrated within 10% mean and 20% each, calibrated
    within 10% each (over the traces with a steady-state wall to calibrate to), device-bound
    verdicts where the measured kernels fill the measured step."""
    def mean_abs(values: list[float]) -> float:
        return statistics.fmean(abs(v) for v in values) if values else float("nan")

    out: dict[str, Any] = {"traces": len(rows)}
    for name, group in [("all", rows)] + [(run, [r for r in rows if r.run == run]) for run in FORMAT2_RUNS]:
        if not group:
            continue
        calibrated = [r for r in group if r.steady_wall_ms > 0]
        out[name] = {
            "traces": len(group),
            "uncalibrated_mean_abs_pct": mean_abs([r.uncalibrated_error for r in group]),
            "uncalibrated_within_20pct": sum(abs(r.uncalibrated_error) <= 20 for r in group),
            "calibrated_traces": len(calibrated),
            "calibrated_mean_abs_pct": mean_abs([r.calibrated_error for r in calibrated]),
            "calibrated_within_10pct": sum(abs(r.calibrated_error) <= 10 for r in calibrated),
        }
    device_bound = [r for r in rows if r.device_bound_measured]
    out["device_bound_measured"] = [f"{r.run}/{r.workload}" for r in device_bound]
    out["device_bound_called_host_bound"] = [f"{r.run}/{r.workload}" for r in device_bound if r.host_bound]
    return out


def _pct(v: float) -> str:
    return f"{v:+.1f}%"


def markdown(rows: list[Row]) -> str:
    lines = ["| run | workload | measured ms | kernel sum ms | uncalibrated ms (err) | verdict, GPU busy "
             "| calibrated ms (err) | host scale | steady wall ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = ("host" if r.host_bound else "device") + f", {100 * r.gpu_busy:.0f}%"
        if r.device_bound_measured:
            verdict += " (measured: device)"
        lines.append(f"| {r.run} | {r.workload} | {r.measured_ms:.1f} | {r.kernel_sum_ms:.1f} "
                     f"| {r.uncalibrated_ms:.1f} ({_pct(r.uncalibrated_error)}) | {verdict} "
                     f"| {r.calibrated_ms:.1f} ({_pct(r.calibrated_error)}) | {r.host_scale:.2f} "
                     f"| {f'{r.steady_wall_ms:.1f}' if r.steady_wall_ms > 0 else 'none'} |")
    return "\n".join(lines)


def host_breakdown(rows: list[Row]) -> str:
    lines = ["| run | workload | traced span ms | capture's timed work ms | Habitat before ops ms "
             "| untimed + lead-in ms | CUPTI removed ms | idle stalls ms | host after removal ms "
             "| measured ms | left per launch us (launches) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        left = f"{r.left_per_launch_us:.1f} ({r.launches})" if r.host_bound else f"device-bound ({r.launches})"
        lines.append(f"| {r.run} | {r.workload} | {r.traced_span_ms:.1f} | {r.recorded_ms:.1f} | {r.before_ms:.1f} "
                     f"| {r.other_removed_ms:.1f} | {r.cupti_removed_ms:.1f} | {r.stalls_ms:.1f} "
                     f"| {r.uncalibrated_host_ms:.1f} | {r.measured_ms:.1f} | {left} |")
    return "\n".join(lines)
