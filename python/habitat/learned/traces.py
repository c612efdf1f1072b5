"""Measured rows for the learned families from recorded GPU traces: each op that launched
kernels, its learned parts (the family shapes and precisions the engine forecasts it from) and
its CUPTI-measured kernel time.

The traces are the H100/H200 runs under benchmarks/results/<run>/traces/*.json.gz (4 workloads x
2 precisions per run; benchmarks/results/kernels/hopper-traces/README.md). An op's class comes
from the engine (the forecast of the trace's CPU view, as benchmarks/accuracy/trace_kernels.py
computes it); its parts from the engine itself (`_engine.learned_op_parts`: the family shapes
`learned_parts` gives, so these rows cannot drift from what the engine forecasts). The measured time is the op's kernels plus
those of the ops below it (on the shape path an op's forecast stands for its whole subtree).

Unlike NeuSight's per-call timings, these are kernel durations: device time, no harness floor.
A row trains on the op's time less cuDNN's NCHW <-> NHWC layout transforms among its kernels, as
a collection's conv rows train on `Kernel Latency` less `Transform Latency`: the engine adds the
transforms to the learned pass itself (habitat.learned.conv_layout).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from habitat import _engine
from habitat.learned.kernel_paths import TRANSFORM_MARKS
from habitat.learned.neusight import KernelArrays, KernelTable

RUNS = ("h100-sxm5-80gb", "h200-sxm-141gb", "h100-sxm5-80gb-2026-11-23")
WORKLOADS = ("dcgan", "gpt2_small", "lstm_seq2seq", "resnet50")
# Op names of trace rows carry this prefix, so their floor keys never meet NeuSight's ops.
OP_PREFIX = "trace:"


@dataclass
class TraceOp:
    run: str
    gpu: str
    workload: str
    precision: str  # the run's precision (fp32 or bf16); the parts carry each op's own dtype
    op: str
    op_class: str
    parts: list[tuple[str, dict[str, float], str, float]]  # (family, shape, precision, scale)
    measured_us: float  # the op's kernels and those below it
    engine_us: float  # the engine's shape-based forecast with the weights it loaded
    transform_us: float = 0.0  # cuDNN's layout transforms among those kernels

    @property
    def learned_us(self) -> float:
        """What the learned parts forecast: the measured time less the layout transforms."""
        return self.measured_us - self.transform_us


def kernel_us(op: dict[str, Any], transforms: bool | None = None) -> float:
    """The op's own kernels' CUPTI time (us); `transforms`: only cuDNN's layout transforms
    (True) or only the other kernels (False)."""
    return float(sum(k.get("duration_us", 0.0) for k in op.get("kernels", [])
                     if transforms is None or is_transform(k.get("name", "")) == transforms))


def is_transform(kernel: str) -> bool:
    return any(m in kernel for m in TRANSFORM_MARKS)


@dataclass
class RecordedStep:
    """A recorded GPU trace's first step forecast shape-based for its own GPU: kernels stripped
    and origin "cpu" (habitat.evaluate.timeline.as_cpu_trace), the path a CPU trace takes."""
    run: str
    gpu: str
    workload: str
    precision: str
    ops: list[dict[str, Any]]  # the step's ops as traced (kernels included)
    cpu: dict[str, Any]  # the CPU-view document the forecast read
    rows: dict[int, Any]  # the engine's per-op rows (OpRows) by op id
    measured_incl_us: list[float]  # per op (ops order): its kernels and those of the ops below it
    transform_incl_us: list[float]  # the same, of cuDNN's layout transforms only


def recorded_step(path: Path, run: str) -> RecordedStep:
    from habitat.analysis.host_model import load_document
    from habitat.data import engine
    from habitat.evaluate.timeline import as_cpu_trace

    doc = load_document(path)
    gpu = doc["origin"]["device"]
    bench = doc.get("benchmark", {})
    workload, _, precision = path.name.removesuffix(".json.gz").rpartition("_")
    step = doc["steps"][0]
    cpu = as_cpu_trace({**doc, "steps": [step]})
    _, rows = engine.forecast_step_parts(cpu["origin"], cpu["steps"][0], [gpu])
    ops = step["ops"]
    index = {op["id"]: i for i, op in enumerate(ops)}
    incl = [kernel_us(op) for op in ops]
    transforms = [kernel_us(op, transforms=True) for op in ops]
    for i in range(len(ops) - 1, -1, -1):  # children follow their parent
        p = ops[i].get("parent")
        if p is not None and p in index:
            incl[index[p]] += incl[i]
            transforms[index[p]] += transforms[i]
    return RecordedStep(run, gpu, bench.get("model", workload), bench.get("precision", precision), ops, cpu,
                        {int(r["id"]): r for r in rows.array}, incl, transforms)


def trace_ops(path: Path, run: str) -> list[TraceOp]:
    """The ops of the trace's first step that launched kernels and have learned parts."""
    from habitat.data.op_rows import OP_CLASSES

    rec = recorded_step(path, run)
    parts_by_id = {op_id: [(family, shape, precision, scale) for family, shape, precision, scale in parts]
                   for op_id, _class, parts in _engine.learned_op_parts(json.dumps(rec.cpu), -1)}
    out = []
    for op, incl, transforms in zip(rec.ops, rec.measured_incl_us, rec.transform_incl_us):
        if not op.get("kernels") or incl - transforms <= 0:
            continue
        parts = parts_by_id.get(op["id"])
        if not parts:
            continue
        r = rec.rows[op["id"]]
        out.append(TraceOp(run, rec.gpu, rec.workload, rec.precision, op["name"].removeprefix("aten::"),
                           OP_CLASSES[int(r["op_class"])], parts, incl, float(r["time_us"][0]), transforms))
    return out


def load_trace_ops(results: str | Path, runs: tuple[str, ...] = RUNS) -> list[TraceOp]:
    """Every run's traces (results/<run>/traces/*.json.gz), in a fixed order."""
    out: list[TraceOp] = []
    for run in runs:
        paths = sorted((Path(results) / run / "traces").glob("*.json.gz"))
        if not paths:
            raise FileNotFoundError(f"{Path(results) / run / 'traces'}: no *.json.gz traces")
        for path in paths:
            out.extend(trace_ops(path, run))
    return out


@dataclass
class TraceRows:
    """Training rows of one family: the parts of the ops forecast from parts of that family only,
    one measurement per (GPU, workload, op, parts) with the median time over its occurrences;
    `workload` says which workload each row came from (leave-one-workload-out), `measurement`
    which measured time it is part of and `scale` its multiplier in that sum."""
    rows: KernelArrays
    workload: np.ndarray
    measurement: np.ndarray
    scale: np.ndarray


def training_rows(ops: list[TraceOp], family: str) -> TraceRows | None:
    """The ops forecast from parts of `family` only (a convolution_backward's data- and
    weight-gradient passes, or one part), one measurement per (GPU, workload, op and its parts'
    shapes and precisions) with the median of its occurrences' kernel times (device time, less
    the layout transforms: TraceOp.learned_us)."""
    groups: dict[tuple, list[float]] = {}
    for o in ops:
        if not o.parts or any(p[0] != family for p in o.parts):
            continue
        parts = tuple((precision, scale, tuple(sorted(shape.items()))) for _, shape, precision, scale in o.parts)
        groups.setdefault((o.gpu, o.workload, o.op, parts), []).append(o.learned_us)
    if not groups:
        return None
    table = KernelTable(family)
    workloads, measurement, scales = [], [], []
    for i, ((gpu, workload, op, parts), times) in enumerate(sorted(groups.items())):
        for precision, scale, shape in parts:
            table.add(OP_PREFIX + op, gpu, float(np.median(times)), 0.0, dict(shape), 0, precision, "device")
            workloads.append(workload)
            measurement.append(f"trace:{i}")
            scales.append(scale)
    return TraceRows(table.arrays(), np.array(workloads), np.array(measurement, dtype=object), np.array(scales))


def forecast_us(ops: list[TraceOp], models: dict[str, Any], devices: Any) -> np.ndarray:
    """Each op's forecast as the engine makes it from its parts: the sum over parts of scale x
    max(launch floor, roofline, kernel) (without the op-cost roofline clamp of predict_us,
    which only a few bias bytes can raise). `models`: family -> EfficiencyMLP (or anything with
    `predict(shapes, device)`); NaN where a part's family has no model."""
    out = np.zeros(len(ops))
    by: dict[tuple[str, str, str], list[tuple[int, dict[str, float], float]]] = {}
    for i, o in enumerate(ops):
        for fam, shape, precision, scale in o.parts:
            by.setdefault((fam, o.gpu, precision), []).append((i, shape, scale))
    for (fam, gpu, precision), items in by.items():
        idx = np.array([i for i, _, _ in items])
        scale = np.array([s for _, _, s in items])
        if fam not in models:
            out[idx] = np.nan
            continue
        shapes = {c: np.array([sh[c] for _, sh, _ in items]) for c in items[0][1]}
        np.add.at(out, idx, scale * models[fam].predict(shapes, devices.find(gpu), precision))
    return out

