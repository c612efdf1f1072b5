"""Accuracy of the host-aware step time (the timeline) on the recorded GPU runs.

Each recorded trace (benchmarks/results/<gpu>/traces/<workload>.json.gz, one detailed step,
with ``benchmark.measured.median_ms``: the plain step timed with CUDA events, back to back) is
re-forecast

- for its own GPU: the timeline's step time against the measured step;
- for the other GPU: against the other machine's measured step, first with the origin's host
  (host_speed 1.0, the default), then with the other machine's host as the reference host:
  host_speed = the median ratio of the two machines' host times (the timeline's host_ms, from
  the traces alone) over the *other* workloads, so a workload never informs its own forecast;
- as a CPU-traced step (proxy): the same trace with its kernels and GPU origin removed, the
  host cadence from the eager-PyTorch host model calibrated on the *other* workloads' traces
  (habitat.analysis.host_model), the device side shape-based.

No measured step time is used by any forecast: measured times appear only in the error columns.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from habitat.analysis.host_model import calibrate, load_document
from habitat.data.checkout import checkout_path
from habitat.data.forecast import Forecast


def _results_dir() -> Path:
    try:
        return checkout_path("benchmarks/results")
    except FileNotFoundError:
        return Path.cwd() / "benchmarks" / "results"  # recorded_traces() names what is missing


RESULTS = _results_dir()
MACHINES = {"h100-sxm5-80gb": "H100-SXM5-80GB", "h200-sxm-141gb": "H200-SXM-141GB"}
# Later GPU runs (trace format 2: CUPTI launch times, syncs, Habitat's per-op cost) by folder;
# each is evaluated on its own GPU and against the format-1 folder of the other GPU.
LATER_RUNS = {"h100-sxm5-80gb-2026-11-23": "H100-SXM5-80GB"}
# The folder a run is compared with on the other GPU.
OTHER_FOLDER = {"h100-sxm5-80gb": "h200-sxm-141gb", "h200-sxm-141gb": "h100-sxm5-80gb",
                "h100-sxm5-80gb-2026-11-23": "h200-sxm-141gb"}
FOLDERS = {**MACHINES, **LATER_RUNS}


@dataclass
class Row:
    machine: str            # database name of the trace's GPU
    workload: str           # "resnet50_bf16"
    measured_ms: float      # the origin's measured step
    kernel_sum_ms: float    # the forecast before timelines: sum of kernels on the origin
    step_ms: float          # the timeline's step on the origin
    host_ms: float
    gpu_busy: float
    host_bound: bool
    overhead_per_op_us: float
    overhead_source: str
    other: str = ""
    other_measured_ms: float = 0.0
    cross_ms: float = 0.0             # on the other GPU, origin host
    cross_ref_host_ms: float = 0.0    # on the other GPU, the other machine's host (held out)
    ref_host_speed: float = 1.0
    cpu_proxy_ms: float | None = None  # CPU-origin proxy on the origin GPU
    cpu_proxy_host_bound: bool | None = None
    cpu_proxy_host_ms: float | None = None    # its modelled host time
    cpu_proxy_kernel_ms: float | None = None  # its shape-based device time
    notes: list[str] = field(default_factory=list)
    folder: str = ""        # the run's folder under benchmarks/results
    trace_format: int = 1
    steady_wall_ms: float = 0.0  # the trace's step wall time (a steady-state step of predict_on in format 2)
    traced_host_ms: float = 0.0  # the traced step's host span before Habitat's time is removed
    overhead_removed_ms: float = 0.0
    # The host calibration (format 2: the host cadence scaled to the trace's steady-state step
    # wall, timeline_calibrate.cpp): its factor (1.0: none), and the own-GPU timeline without it.
    host_scale: float = 1.0
    uncalibrated_ms: float = 0.0

    @staticmethod
    def error(forecast: float, measured: float) -> float:
        return 100.0 * (forecast / measured - 1.0)

    @property
    def own_error(self) -> float:
        return self.error(self.step_ms, self.measured_ms)

    @property
    def kernel_sum_error(self) -> float:
        return self.error(self.kernel_sum_ms, self.measured_ms)

    @property
    def uncalibrated_error(self) -> float:
        return self.error(self.uncalibrated_ms, self.measured_ms)

    @property
    def cross_error(self) -> float:
        return self.error(self.cross_ms, self.other_measured_ms)

    @property
    def cross_ref_error(self) -> float:
        return self.error(self.cross_ref_host_ms, self.other_measured_ms)

    @property
    def cpu_proxy_error(self) -> float | None:
        return None if self.cpu_proxy_ms is None else self.error(self.cpu_proxy_ms, self.measured_ms)


def recorded_traces(results: Path = RESULTS, later: bool = False) -> dict[tuple[str, str], Path]:
    """(machine folder, workload) -> trace path, for every recorded trace (the format-1 runs;
    with `later`, also the later runs of LATER_RUNS)."""
    out = {}
    for folder in (FOLDERS if later else MACHINES):
        for path in sorted((results / folder / "traces").glob("*.json.gz")):
            out[(folder, path.name.removesuffix(".json.gz"))] = path
    if not out:
        raise FileNotFoundError(f"no recorded traces under {results}/<gpu>/traces")
    return out


def _timeline(doc: dict[str, Any], targets: list[str], host_speed: float = 1.0) -> dict[str, dict[str, Any]]:
    step = Forecast.from_trace(doc, targets, host_speed=host_speed).latest
    return {t: {**step.timeline[t], "total_ms": step.total_ms[t]} for t in targets}


def as_cpu_trace(doc: dict[str, Any]) -> dict[str, Any]:
    """The trace as if captured on a CPU: no origin GPU, no kernels (ops keep their shapes)."""
    proxy = copy.deepcopy(doc)
    proxy["origin"]["device"] = "cpu"
    for step in proxy["steps"]:
        for op in step["ops"]:
            op.pop("kernels", None)
    return proxy


class _HostModelFile:
    """HABITAT_HOST_MODEL pointing at `model` for the duration of a with-block."""

    def __init__(self, model: dict[str, Any]) -> None:
        self.model = model

    def __enter__(self) -> None:
        fd, self.path = tempfile.mkstemp(suffix=".json", prefix="habitat-host-model-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self.model, f)
        self.previous = os.environ.get("HABITAT_HOST_MODEL")
        os.environ["HABITAT_HOST_MODEL"] = self.path

    def __exit__(self, *exc: Any) -> None:
        if self.previous is None:
            os.environ.pop("HABITAT_HOST_MODEL", None)
        else:
            os.environ["HABITAT_HOST_MODEL"] = self.previous
        os.unlink(self.path)


def evaluate(results: Path = RESULTS, cpu_proxy: bool = True, later: bool = False) -> list[Row]:
    """Rows of the format-1 runs (MACHINES); with `later`, also of the later runs (LATER_RUNS),
    whose cross-GPU columns compare with the other GPU's format-1 run. The CPU-origin proxy's
    host model is calibrated on the format-1 runs only, as before the later runs existed."""
    traces = recorded_traces(results, later)
    docs = {key: load_document(path) for key, path in traces.items()}
    rows: dict[tuple[str, str], Row] = {}
    timelines: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for (folder, workload), doc in docs.items():
        origin = FOLDERS[folder]
        other_folder = OTHER_FOLDER[folder]
        other = FOLDERS[other_folder]
        t = _timeline(doc, [origin, other])
        timelines[(folder, workload)] = t
        own = t[origin]
        other_doc = docs.get((other_folder, workload))
        rows[(folder, workload)] = Row(
            machine=origin, workload=workload, measured_ms=doc["benchmark"]["measured"]["median_ms"],
            kernel_sum_ms=own["total_ms"], step_ms=own["step_ms"], host_ms=own["host_ms"],
            gpu_busy=own["gpu_busy_fraction"], host_bound=own["host_bound"],
            overhead_per_op_us=own["overhead_per_op_us"], overhead_source=own["overhead_source"],
            other=other, other_measured_ms=other_doc["benchmark"]["measured"]["median_ms"] if other_doc else 0.0,
            cross_ms=t[other]["step_ms"], notes=list(own.get("notes", [])),
            folder=folder, trace_format=int(doc.get("version", 1)),
            steady_wall_ms=float(doc["steps"][-1].get("wall_ms", 0.0)),
            overhead_removed_ms=float(own.get("overhead_removed_ms", 0.0)),
            host_scale=float(own.get("host_scale", 1.0)),
            uncalibrated_ms=own["uncalibrated_step_ms"],
            traced_host_ms=max((op["start_us"] + op["wall_us"] for op in doc["steps"][-1]["ops"]), default=0.0) / 1000)
    # The other machine as the reference host, its speed from the other workloads only, and
    # from traces recorded alike: a later run's host is calibrated to its steady-state steps
    # and the other machine's format-1 host is not, so its ratio is that of its machine's
    # format-1 run.
    for (folder, workload), row in rows.items():
        other_folder = OTHER_FOLDER[folder]
        ratio_folder = next((f for f, m in MACHINES.items() if m == FOLDERS[folder]), folder)
        ratios = [timelines[(ratio_folder, w)][FOLDERS[ratio_folder]]["host_ms"] / timelines[(other_folder, w)][FOLDERS[other_folder]]["host_ms"]
                  for (f, w) in rows if f == ratio_folder and w != workload and (other_folder, w) in timelines]
        if not ratios or (other_folder, workload) not in rows:
            continue
        row.ref_host_speed = statistics.median(ratios)
        row.cross_ref_host_ms = _timeline(docs[(folder, workload)], [row.other], row.ref_host_speed)[row.other]["step_ms"]
    if cpu_proxy:
        for (folder, workload), row in rows.items():
            model_name = workload.rsplit("_", 1)[0]
            held_in = [(f"{f}/{w}", d) for (f, w), d in docs.items()
                       if w.rsplit("_", 1)[0] != model_name and f in MACHINES]
            with _HostModelFile(calibrate(held_in)):
                t = _timeline(as_cpu_trace(docs[(folder, workload)]), [row.machine])[row.machine]
            row.cpu_proxy_ms = t["step_ms"] if t.get("valid") else None
            row.cpu_proxy_host_bound = t.get("host_bound")
            row.cpu_proxy_host_ms = t.get("host_ms")
            row.cpu_proxy_kernel_ms = t.get("kernel_sum_ms")
    return list(rows.values())


def own_errors_with_constant(overhead_per_op_us: float, results: Path = RESULTS) -> dict[tuple[str, str], float]:
    """Own-GPU errors (%) with a fixed per-op recording cost removed instead of the step's own
    wrapper-op estimate (e.g. the 2.86 us measured for a CUDA op in prof2_cupti.json)."""
    from habitat import _engine
    from habitat.data.engine import weights_dir

    out = {}
    for (folder, workload), path in recorded_traces(results).items():
        doc = load_document(path)
        origin = MACHINES[folder]
        _, steps = _engine.forecast_trace(json.dumps(doc), [origin], weights_dir(), 1.0, "",
                                          overhead_per_op_us)
        timeline = steps[-1][3]["timelines"][0]
        out[(origin, workload)] = Row.error(timeline["step_ms"], doc["benchmark"]["measured"]["median_ms"])
    return out


def host_difference(rows: list[Row]) -> str:
    """The two machines' host speeds compared on the same workloads (timeline host_ms)."""
    rows = [r for r in rows if r.folder in MACHINES or not r.folder]  # the format-1 runs
    by = {(r.machine, r.workload): r for r in rows}
    ratios = []
    for r in rows:
        if r.machine == "H100-SXM5-80GB" and ("H200-SXM-141GB", r.workload) in by:
            ratios.append(by[("H200-SXM-141GB", r.workload)].host_ms / r.host_ms)
    if not ratios:
        return "host difference: no workload traced on both machines"
    return (f"host difference: the H200 machine's host took {statistics.median(ratios):.2f}x the H100 "
            f"machine's host time for the same step (median over {len(ratios)} workloads, "
            f"range {min(ratios):.2f}-{max(ratios):.2f}; timeline host_ms, Habitat's recording removed)")


def host_breakdown(rows: list[Row]) -> str:
    """Where the later runs' traced host time goes: the traced span, what was removed as
    Habitat's, and the trace's own step wall time (a steady-state step of predict_on, which
    records no ops: the plain step's host time when the host is the bottleneck). Not used by
    any forecast."""
    lines = ["| run | workload | traced host span ms | Habitat's time removed ms (us/op, source) "
             "| host after removal ms | steady-state step wall ms | host scale | host calibrated ms "
             "| timeline uncalibrated ms (err) | timeline calibrated ms (err) | measured ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.folder not in LATER_RUNS:
            continue
        lines.append(f"| {r.folder} | {r.workload} | {r.traced_host_ms:.1f} "
                     f"| {r.overhead_removed_ms:.2f} ({r.overhead_per_op_us:.2f}, {r.overhead_source}) "
                     f"| {r.host_ms / r.host_scale:.1f} | {r.steady_wall_ms:.1f} | {r.host_scale:.2f} | {r.host_ms:.1f} "
                     f"| {r.uncalibrated_ms:.1f} ({_pct(r.uncalibrated_error)}) | {r.step_ms:.1f} ({_pct(r.own_error)}) "
                     f"| {r.measured_ms:.1f} |")
    return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1f}%"


def markdown(rows: list[Row]) -> str:
    lines = ["| origin | run (format) | workload | measured ms | kernel sum ms (err) | timeline ms (err) | host ms | GPU busy | bound "
             "| overhead us/op (source) | other GPU measured | cross, origin host (err) | cross, ref host x speed (err) "
             "| CPU-origin proxy ms (err) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        proxy = "" if r.cpu_proxy_ms is None else (
            f"{r.cpu_proxy_ms:.1f} ({_pct(r.cpu_proxy_error)}; host {r.cpu_proxy_host_ms:.1f}, "
            f"kernels {r.cpu_proxy_kernel_ms:.1f})")
        lines.append(
            f"| {r.machine} | {r.folder} ({r.trace_format}) | {r.workload} | {r.measured_ms:.1f} | {r.kernel_sum_ms:.1f} ({_pct(r.kernel_sum_error)}) "
            f"| {r.step_ms:.1f} ({_pct(r.own_error)}) | {r.host_ms:.1f} | {100 * r.gpu_busy:.0f}% "
            f"| {'host' if r.host_bound else 'device'} | {r.overhead_per_op_us:.2f} ({r.overhead_source}) "
            f"| {r.other_measured_ms:.1f} | {r.cross_ms:.1f} ({_pct(r.cross_error)}) "
            f"| {r.cross_ref_host_ms:.1f} x{r.ref_host_speed:.2f} ({_pct(r.cross_ref_error)}) | {proxy} |")
    return "\n".join(lines)


def summary(rows: list[Row]) -> dict[str, Any]:
    """Figures of the format-1 runs (as before the later runs existed), and under "later" the
    same figures of the later runs' rows (LATER_RUNS), when there are any."""
    later = [r for r in rows if r.folder in LATER_RUNS]
    out = _summary([r for r in rows if r.folder not in LATER_RUNS])
    if later:
        out["later"] = _summary(later)
    return out


def _summary(rows: list[Row]) -> dict[str, Any]:
    def mean_abs(values: list[float]) -> float:
        return statistics.fmean(abs(v) for v in values) if values else float("nan")

    proxy = [r.cpu_proxy_error for r in rows if r.cpu_proxy_error is not None]
    return {
        "traces": len(rows),
        "own_mean_abs_pct": mean_abs([r.own_error for r in rows]),
        "own_within_10pct": sum(abs(r.own_error) <= 10 for r in rows),
        "own_uncalibrated_mean_abs_pct": mean_abs([r.uncalibrated_error for r in rows]),
        "calibrated_traces": sum(r.host_scale < 1.0 for r in rows),
        "own_over_10pct": [f"{r.machine} {r.workload} {r.own_error:+.1f}%" for r in rows if abs(r.own_error) > 10],
        "kernel_sum_mean_abs_pct": mean_abs([r.kernel_sum_error for r in rows]),
        "cross_mean_abs_pct": mean_abs([r.cross_error for r in rows]),
        "cross_ref_host_mean_abs_pct": mean_abs([r.cross_ref_error for r in rows]),
        "cpu_proxy_mean_abs_pct": mean_abs(proxy) if proxy else None,
        "cpu_proxy_within_15pct": sum(abs(v) <= 15 for v in proxy),
    }
