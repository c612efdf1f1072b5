"""Measured rows for the memory-bound families (elementwise, softmax, layernorm) from recorded
GPU traces: each op that launched kernels, its learned parts (the family shapes the engine
forecasts it from) and its CUPTI-measured kernel time.

The traces are the H100/H200 runs under benchmarks/results/<run>/traces/*.json.gz (4 workloads x
2 precisions per run; benchmarks/results/kernels/hopper-traces/README.md). An op's class comes
from the engine (the forecast of the trace's CPU view, as benchmarks/accuracy/trace_kernels.py
computes it); its parts from `op_parts`, which mirrors csrc/src/learned/learned_model.cpp
(`learned_parts` for these three families; tests/python/learned/test_trace_rows.py checks that the
Python forecast from these parts equals the engine's). The measured time is the op's kernels plus
those of the ops below it (on the shape path an op's forecast stands for its whole subtree).

Unlike NeuSight's per-call timings, these are kernel durations: no harness floor (fitting uses a
negligible floor for them, TRACE_FLOOR_US).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from habitat.learned.neusight import KernelArrays, KernelTable

RUNS = ("h100-sxm5-80gb", "h200-sxm-141gb", "h100-sxm5-80gb-2026-11-23")
WORKLOADS = ("dcgan", "gpt2_small", "lstm_seq2seq", "resnet50")
# Op names of trace rows carry this prefix, so their floor keys never meet NeuSight's ops.
OP_PREFIX = "trace:"
# The floor fitted under a kernel-duration row (us): negligible against any kernel.
TRACE_FLOOR_US = 1e-3
DTYPE_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
               "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
TRANSCENDENTAL = ("exp", "log", "tanh", "sigmoid", "gelu", "silu", "pow", "erf", "sin", "cos",
                  "sqrt", "softplus", "mish", "elu", "tan")
# Ops that write every element of their output without reading one (learned_model.cpp
# kWriterStems, the same stems as the cost model's `writer` rules).
WRITER_STEMS = frozenset(
    "fill zero zeros ones full eye scalar_tensor zeros_like ones_like full_like new_zeros new_ones "
    "new_full arange linspace logspace rand rand_like uniform random randint randint_like randn "
    "randn_like normal exponential".split())


def _numel(t: dict[str, Any]) -> float:
    n = 1.0
    for d in t.get("shape", []):
        n *= float(d)
    return n


def _elem_bytes(t: dict[str, Any]) -> float:
    return float(DTYPE_BYTES.get(t.get("dtype", ""), 4))


def _arg(op: dict[str, Any], name: str) -> dict[str, Any] | None:
    for a in op.get("args", []):
        if a.get("name") == name:
            return a
    return None


def _tensor(op: dict[str, Any], *names: str) -> dict[str, Any] | None:
    for n in names:
        a = _arg(op, n)
        if a is not None and "tensor" in a and a["tensor"].get("defined", True):
            return a["tensor"]
    return None


def _int(op: dict[str, Any], name: str, fallback: int) -> int:
    a = _arg(op, name)
    if a is None:
        return fallback
    for k in ("int", "bool"):
        if k in a:
            return int(a[k])
    if a.get("ints"):
        return int(a["ints"][0])
    return fallback


def stem(name: str) -> str:
    """aten::add_ -> add (the cost model's stem: no namespace, no in-place underscore)."""
    s = name.removeprefix("aten::")
    return s[:-1] if s.endswith("_") and not s.endswith("__") else s


def is_writer(name: str) -> bool:
    return stem(name) in WRITER_STEMS


def op_parts(op: dict[str, Any], op_class: str) -> list[tuple[str, dict[str, float], float]]:
    """(family, shape, scale) of each learned part of an op of the engine's class `op_class`
    (elementwise, softmax, or norm for layer/RMS norm); [] when none (learned_model.cpp)."""
    name = op["name"].removeprefix("aten::")
    if op_class == "elementwise":
        outs = op.get("outputs") or []
        if not outs:
            return []
        out = outs[0]
        n = _numel(out)
        if not n > 0:
            return []
        if is_writer(name):
            inputs = 0.0
        else:
            inputs = 0.0
            for a in op.get("args", []):
                ts = [a["tensor"]] if "tensor" in a else a.get("tensors", [])
                inputs += sum(1 for t in ts if t.get("defined", True) and _numel(t) == n)
            inputs = max(1.0, inputs)
        trans = 1.0 if any(t in name for t in TRANSCENDENTAL) else 0.0
        return [("elementwise", {"n": n, "inputs": inputs, "transcendental": trans,
                                 "elem_bytes": _elem_bytes(out)}, 1.0)]
    if op_class == "softmax":
        backward = name.endswith("_backward_data")
        x = _tensor(op, "output", "grad_output") if backward else _tensor(op, "self", "input")
        if x is None or not x.get("shape"):
            return []
        shape = x["shape"]
        dim = _int(op, "dim", -1)
        if dim < 0:
            dim += len(shape)
        if not 0 <= dim < len(shape):
            return []
        cols, total = float(shape[dim]), _numel(x)
        if not (cols > 0 and total > 0):
            return []
        return [("softmax", {"rows": total / cols, "cols": cols, "elem_bytes": _elem_bytes(x)},
                 1.5 if backward else 1.0)]
    if op_class == "norm" and ("layer_norm" in name or "rms_norm" in name):
        x = _tensor(op, "input", "self")
        a = _arg(op, "normalized_shape")
        normalized = (a or {}).get("ints") or []
        if x is None or not normalized:
            return []
        cols = float(np.prod([float(v) for v in normalized]))
        total = _numel(x)
        if not (cols > 0 and total >= cols):
            return []
        return [("layernorm", {"rows": total / cols, "cols": cols, "elem_bytes": _elem_bytes(x)},
                 2.0 if name.endswith("_backward") else 1.0)]
    if op_class == "reduction":
        # A row-wise reduction, forecast with the layer-norm model (learned_model.cpp reduction_parts).
        x = None
        for a in op.get("args", []):
            ts = [a["tensor"]] if "tensor" in a else a.get("tensors", [])
            x = next((t for t in ts if t.get("defined", True)), None)
            if x is not None:
                break
        outs = op.get("outputs") or []
        if x is None or not outs:
            return []
        total = _numel(x)
        rows = max(1.0, _numel(outs[0]))
        if not total > 0 or total < rows:
            return []
        return [("layernorm", {"rows": rows, "cols": total / rows, "elem_bytes": _elem_bytes(x)}, 1.0)]
    return []


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


def _kernel_us(op: dict[str, Any]) -> float:
    return float(sum(k.get("duration_us", 0.0) for k in op.get("kernels", [])))


def trace_ops(path: Path, run: str) -> list[TraceOp]:
    """The ops of the trace's first step that launched kernels and have learned parts of the
    memory-bound families."""
    from habitat.analysis.host_model import load_document
    from habitat.data import engine
    from habitat.data.op_rows import OP_CLASSES
    from habitat.evaluate.timeline import as_cpu_trace

    doc = load_document(path)
    gpu = doc["origin"]["device"]
    bench = doc.get("benchmark", {})
    workload, _, precision = path.name.removesuffix(".json.gz").rpartition("_")
    workload = bench.get("model", workload)
    precision = bench.get("precision", precision)
    step = doc["steps"][0]
    cpu = as_cpu_trace({**doc, "steps": [step]})
    _, rows = engine.forecast_step_parts(cpu["origin"], cpu["steps"][0], [gpu])
    by_id = {int(r["id"]): r for r in rows.array}
    ops = step["ops"]
    index = {op["id"]: i for i, op in enumerate(ops)}
    incl = [_kernel_us(op) for op in ops]
    for i in range(len(ops) - 1, -1, -1):  # children follow their parent
        p = ops[i].get("parent")
        if p is not None and p in index:
            incl[index[p]] += incl[i]
    out = []
    for i, op in enumerate(ops):
        if not op.get("kernels") or incl[i] <= 0:
            continue
        r = by_id[op["id"]]
        op_class = OP_CLASSES[int(r["op_class"])]
        parts = op_parts(op, op_class)
        if not parts:
            continue
        out.append(TraceOp(run, gpu, workload, precision, op["name"].removeprefix("aten::"), op_class, parts,
                           incl[i], float(r["time_us"][0])))
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
