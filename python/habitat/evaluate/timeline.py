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
from habitat.evaluate.checkout import checkout_path
from habitat.data.forecast import Forecast

def _results_dir() -> Path:
    try:
        return checkout_path("benchmarks/results")
    except FileNotFoundError:
        return Path.cwd() / "benchmarks" / "results"  # recorded_traces() names what is missing


RESULTS = _results_dir()
MACHINES = {"h100-sxm5-80gb": "H100-SXM5-80GB", "h200-sxm-141gb": "H200-SXM-141GB"}


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
    def cross_error(self) -> float:
        return self.error(self.cross_ms, self.other_measured_ms)

    @property
    def cross_ref_error(self) -> float:
        return self.error(self.cross_ref_host_ms, self.other_measured_ms)

    @property
    def cpu_proxy_error(self) -> float | None:
        return None if self.cpu_proxy_ms is None else self.error(self.cpu_proxy_ms, self.measured_ms)


def recorded_traces(results: Path = RESULTS) -> dict[tuple[str, str], Path]:
    """(machine folder, workload) -> trace path, for every recorded trace."""
    out = {}
    for folder in MACHINES:
        for path in sorted((results / folder / "traces").glob("*.json.gz")):
            out[(folder, path.name.removesuffix(".json.gz"))] = path
    if not out:
        raise FileNotFoundError(f"no recorded traces under {results}/<gpu>/traces")
    return out


def _timeline(doc: dict[str, Any], targets: list[str], host_speed: float = 1.0) -> dict[str, dict[str, Any]]:
    step = Forecast.from_trace(doc, targets, host_speed=host_speed).latest
    return {t: {**step.timeline[t], "total_ms": step.total_ms[t]} for t in targets}


def _cpu_proxy(doc: dict[str, Any]) -> dict[str, Any]:
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


def evaluate(results: Path = RESULTS, cpu_proxy: bool = True) -> list[Row]:
    traces = recorded_traces(results)
    docs = {key: load_document(path) for key, path in traces.items()}
    rows: dict[tuple[str, str], Row] = {}
    timelines: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for (folder, workload), doc in docs.items():
        origin = MACHINES[folder]
        other_folder = next(f for f in MACHINES if f != folder)
        other = MACHINES[other_folder]
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
            cross_ms=t[other]["step_ms"], notes=list(own.get("notes", [])))
    # The other machine as the reference host, its speed from the other workloads only.
    for (folder, workload), row in rows.items():
        other_folder = next(f for f in MACHINES if f != folder)
        ratios = [timelines[(folder, w)][MACHINES[folder]]["host_ms"] / timelines[(other_folder, w)][MACHINES[other_folder]]["host_ms"]
                  for (f, w) in rows if f == folder and w != workload and (other_folder, w) in timelines]
        if not ratios or (other_folder, workload) not in rows:
            continue
        row.ref_host_speed = statistics.median(ratios)
        row.cross_ref_host_ms = _timeline(docs[(folder, workload)], [row.other], row.ref_host_speed)[row.other]["step_ms"]
    if cpu_proxy:
        for (folder, workload), row in rows.items():
            model_name = workload.rsplit("_", 1)[0]
            held_in = [(f"{f}/{w}", d) for (f, w), d in docs.items() if w.rsplit("_", 1)[0] != model_name]
            with _HostModelFile(calibrate(held_in)):
                t = _timeline(_cpu_proxy(docs[(folder, workload)]), [row.machine])[row.machine]
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


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1f}%"


def markdown(rows: list[Row]) -> str:
    lines = ["| origin | workload | measured ms | kernel sum ms (err) | timeline ms (err) | host ms | GPU busy | bound "
             "| overhead us/op (source) | other GPU measured | cross, origin host (err) | cross, ref host x speed (err) "
             "| CPU-origin proxy ms (err) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        proxy = "" if r.cpu_proxy_ms is None else (
            f"{r.cpu_proxy_ms:.1f} ({_pct(r.cpu_proxy_error)}; host {r.cpu_proxy_host_ms:.1f}, "
            f"kernels {r.cpu_proxy_kernel_ms:.1f})")
        lines.append(
            f"| {r.machine} | {r.workload} | {r.measured_ms:.1f} | {r.kernel_sum_ms:.1f} ({_pct(r.kernel_sum_error)}) "
            f"| {r.step_ms:.1f} ({_pct(r.own_error)}) | {r.host_ms:.1f} | {100 * r.gpu_busy:.0f}% "
            f"| {'host' if r.host_bound else 'device'} | {r.overhead_per_op_us:.2f} ({r.overhead_source}) "
            f"| {r.other_measured_ms:.1f} | {r.cross_ms:.1f} ({_pct(r.cross_error)}) "
            f"| {r.cross_ref_host_ms:.1f} x{r.ref_host_speed:.2f} ({_pct(r.cross_ref_error)}) | {proxy} |")
    return "\n".join(lines)


def summary(rows: list[Row]) -> dict[str, Any]:
    def mean_abs(values: list[float]) -> float:
        return statistics.fmean(abs(v) for v in values) if values else float("nan")

    proxy = [r.cpu_proxy_error for r in rows if r.cpu_proxy_error is not None]
    return {
        "traces": len(rows),
        "own_mean_abs_pct": mean_abs([r.own_error for r in rows]),
        "own_within_10pct": sum(abs(r.own_error) <= 10 for r in rows),
        "own_over_10pct": [f"{r.machine} {r.workload} {r.own_error:+.1f}%" for r in rows if abs(r.own_error) > 10],
        "kernel_sum_mean_abs_pct": mean_abs([r.kernel_sum_error for r in rows]),
        "cross_mean_abs_pct": mean_abs([r.cross_error for r in rows]),
        "cross_ref_host_mean_abs_pct": mean_abs([r.cross_ref_error for r in rows]),
        "cpu_proxy_mean_abs_pct": mean_abs(proxy) if proxy else None,
        "cpu_proxy_within_15pct": sum(abs(v) <= 15 for v in proxy),
    }
