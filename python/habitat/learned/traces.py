"""Measured rows for the memory-bound families (elementwise, softmax, layernorm) from recorded
GPU traces: each op that launched kernels, its learned parts (the family shapes the engine
forecasts it from) and its CUPTI-measured kernel time.

The traces are the H100/H200 runs under benchmarks/results/<run>/traces/*.json.gz (4 workloads x
2 precisions per run; benchmarks/results/kernels/hopper-traces/README.md). An op's class comes
from the engine (the forecast of the trace's CPU view, as benchmarks/accuracy/trace_kernels.py
computes it); its parts from the engine itself (`_engine.learned_op_parts`: the family shapes
`learned_parts` gives, so these rows cannot drift from what the engine forecasts). The measured time is the op's kernels plus
those of the ops below it (on the shape path an op's forecast stands for its whole subtree).

Unlike NeuSight's per-call timings, these are kernel durations: no harness floor (fitting uses a
negligible floor for them, TRACE_FLOOR_US).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from habitat import _engine
from habitat.learned.features import MEMORY_FAMILIES
from habitat.learned.fitting import DEVICE_TIME_FLOOR_US
from habitat.learned.neusight import KernelArrays, KernelTable

RUNS = ("h100-sxm5-80gb", "h200-sxm-141gb", "h100-sxm5-80gb-2026-11-23")
WORKLOADS = ("dcgan", "gpt2_small", "lstm_seq2seq", "resnet50")
# Op names of trace rows carry this prefix, so their floor keys never meet NeuSight's ops.
OP_PREFIX = "trace:"
# The floor fitted under a kernel-duration row (us): negligible against any kernel.
TRACE_FLOOR_US = DEVICE_TIME_FLOOR_US
# The families whose rows the traces give are features.MEMORY_FAMILIES (the engine forecasts
# row-wise reductions with the layer-norm model).


@dataclass
class TraceOp:
    run: str
    gpu: str
    workload: str
    precision: str  # the run's precision (fp32 or bf16); the parts carry each op's own dtype
    op: str
    op_class: str
    parts: list[tuple[str, dict[str, float], float]]
    measured_us: float  # the op's kernels and those below it
    engine_us: float  # the engine's shape-based forecast with the weights it loaded


def kernel_us(op: dict[str, Any]) -> float:
    """The op's own kernels' CUPTI time (us)."""
    return float(sum(k.get("duration_us", 0.0) for k in op.get("kernels", [])))


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
    for i in range(len(ops) - 1, -1, -1):  # children follow their parent
        p = ops[i].get("parent")
        if p is not None and p in index:
            incl[index[p]] += incl[i]
    return RecordedStep(run, gpu, bench.get("model", workload), bench.get("precision", precision), ops, cpu,
                        {int(r["id"]): r for r in rows.array}, incl)


def trace_ops(path: Path, run: str) -> list[TraceOp]:
    """The ops of the trace's first step that launched kernels and have learned parts of the
    memory-bound families."""
    from habitat.data.op_rows import OP_CLASSES

    rec = recorded_step(path, run)
    parts_by_id = {op_id: [(family, shape, scale) for family, shape, _precision, scale in parts]
                   for op_id, _class, parts in _engine.learned_op_parts(json.dumps(rec.cpu), -1)}
    out = []
    for op, incl in zip(rec.ops, rec.measured_incl_us):
        if not op.get("kernels") or incl <= 0:
            continue
        parts = parts_by_id.get(op["id"])
        if not parts or any(family not in MEMORY_FAMILIES for family, _, _ in parts):
            continue
        r = rec.rows[op["id"]]
        out.append(TraceOp(run, rec.gpu, rec.workload, rec.precision, op["name"].removeprefix("aten::"),
                           OP_CLASSES[int(r["op_class"])], parts, incl, float(r["time_us"][0])))
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
    """Training rows of one family: one per (GPU, workload, op, shape) of single-part ops, with
    the median measured time over its occurrences; `workload` says which workload each row
    came from (leave-one-workload-out)."""
    rows: KernelArrays
    workload: np.ndarray


# The "workload" of the rows of a kernel collection (collect_kernels.py device times): they are
# no workload's, so a leave-one-workload-out split never holds them out.
COLLECTION = "kernels"
COLLECTION_PREFIX = "kernels:"


def collection_rows(directory: str | Path, family: str) -> TraceRows | None:
    """The family's rows of a kernel collection of one GPU (benchmarks/gpu/collect_kernels.py),
    timed as device time (`Kernel Latency`, CUPTI: no harness floor, like the trace rows), op
    names prefixed with COLLECTION_PREFIX so their floors stay apart from NeuSight's."""
    from habitat.learned.neusight import OP_FAMILY, load_precision_kernels

    tables = load_precision_kernels(directory, {op for op, f in OP_FAMILY.items() if f == family}, timing="kernel")
    if family not in tables:
        return None
    rows = tables[family]
    rows.op = np.array([COLLECTION_PREFIX + o for o in rows.op])
    return TraceRows(rows, np.full(len(rows), COLLECTION, dtype=object))


def training_rows(ops: list[TraceOp], family: str, classes: tuple[str, ...] | None = None) -> TraceRows | None:
    """`classes`: the engine op classes whose ops train the family (None: every class whose
    parts are of the family)."""
    groups: dict[tuple, list[float]] = {}
    for o in ops:
        if len(o.parts) != 1 or o.parts[0][0] != family or (classes is not None and o.op_class not in classes):
            continue
        _, shape, scale = o.parts[0]
        key = (o.gpu, o.workload, o.op, scale, tuple(sorted(shape.items())))
        groups.setdefault(key, []).append(o.measured_us)
    if not groups:
        return None
    table = KernelTable(family)
    workloads = []
    for (gpu, workload, op, scale, shape), times in sorted(groups.items()):
        # A part's scale (a backward's extra traffic) divides the time: the row is one part's worth.
        table.add(OP_PREFIX + op, gpu, float(np.median(times)) / scale, 0.0, dict(shape))
        workloads.append(workload)
    return TraceRows(table.arrays(), np.array(workloads))


def forecast_us(ops: list[TraceOp], models: dict[str, Any], devices: Any) -> np.ndarray:
    """Each op's forecast as the engine makes it from its parts: the sum over parts of scale x
    max(launch floor, roofline, kernel) (without the op-cost roofline clamp of predict_us,
    which only a few bias bytes can raise). `models`: family -> EfficiencyMLP (or anything with
    `predict(shapes, device)`); NaN where a part's family has no model."""
    out = np.zeros(len(ops))
    by: dict[tuple[str, str], list[tuple[int, dict[str, float], float]]] = {}
    for i, o in enumerate(ops):
        for fam, shape, scale in o.parts:
            by.setdefault((fam, o.gpu), []).append((i, shape, scale))
    for (fam, gpu), items in by.items():
        idx = np.array([i for i, _, _ in items])
        scale = np.array([s for _, _, s in items])
        if fam not in models:
            out[idx] = np.nan
            continue
        shapes = {c: np.array([sh[c] for _, sh, _ in items]) for c in items[0][1]}
        np.add.at(out, idx, scale * models[fam].predict(shapes, devices.find(gpu)))
    return out


def label(o: TraceOp) -> str:
    """The row's report group: its family, with the reductions (layernorm parts) apart."""
    return "reduction" if o.op_class == "reduction" else o.parts[0][0]


def error_table(ops: list[TraceOp], pred: np.ndarray, min_us: float = 5.0) -> dict[str, dict[str, float]]:
    """Per report group (`label`): rows, mean |error| %, median forecast/measured, on all
    ops and on ops measured at >= min_us."""
    meas = np.array([o.measured_us for o in ops])
    fam = np.array([label(o) for o in ops])
    out: dict[str, dict[str, float]] = {}
    for f in sorted(set(fam.tolist())):
        row: dict[str, float] = {}
        for tag, sel in (("all", fam == f), (f">={min_us:g}us", (fam == f) & (meas >= min_us))):
            e = np.abs(pred[sel] - meas[sel]) / meas[sel] * 100.0
            row[f"n {tag}"] = int(sel.sum())
            row[f"mean % {tag}"] = float(np.mean(e)) if sel.any() else float("nan")
            row[f"median f/m {tag}"] = float(np.median(pred[sel] / meas[sel])) if sel.any() else float("nan")
        out[f] = row
    return out
