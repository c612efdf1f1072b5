"""The eager-PyTorch host model: what the host of a GPU machine spends per op, for steps traced
on a CPU (whose own op times are compute, not launch cadence).

Calibrated from steps traced on GPUs (trace documents with a GPU origin), from their host
times alone (no measured step time is used):

- each op's *exclusive* host time: its wall time minus its children's, minus Habitat's
  recording of those children (the per-op recording cost the engine estimates from the step's
  wrapper ops, ``_engine.estimate_overhead_per_op``);
- the Python time between consecutive top-level ops (the gap, minus the next op's recording).

An op name's cost is the median over the calibration traces of its mean exclusive time in each
trace; ``default_op_us`` is the median of all ops' exclusive times; ``top_level_gap_us`` the
median over traces of the mean gap. Write the model with
``python -m habitat.analysis.host_model OUT.json TRACE...`` (the packaged
``habitat/data/host_model.json`` is calibrated on the 16 recorded traces of
benchmarks/results/*/traces; the accuracy benchmark holds a workload's traces out when it
evaluates that workload).
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from habitat import _engine


def load_document(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as f:
        return json.load(f)


def overhead_per_op_us(step: dict[str, Any]) -> float:
    """Habitat's per-op recording cost in a step (the engine's estimate from wrapper ops;
    the default measured cost when the step has too few)."""
    document = {"format": "habitat-trace", "version": 1, "origin": {"device": "gpu"}, "steps": [step]}
    return _engine.estimate_overhead_per_op(json.dumps(document))


def _exclusive_and_gaps(step: dict[str, Any]) -> tuple[dict[str, list[float]], list[float], list[float]]:
    ops = step["ops"]
    c = overhead_per_op_us(step)
    child_wall: dict[int, float] = defaultdict(float)
    child_count: dict[int, int] = defaultdict(int)
    for op in ops:
        if op.get("parent") is not None:
            child_wall[op["parent"]] += op.get("wall_us", 0.0)
            child_count[op["parent"]] += 1
    by_name: dict[str, list[float]] = defaultdict(list)
    every: list[float] = []
    for op in ops:
        own = op.get("wall_us", 0.0) - child_wall[op["id"]] - c * child_count[op["id"]]
        own = max(0.0, own)
        by_name[op["name"]].append(own)
        every.append(own)
    top = sorted((op for op in ops if op.get("depth", 0) == 0), key=lambda op: op.get("start_us", 0.0))
    gaps = []
    for before, after in zip(top, top[1:]):
        end = before.get("start_us", 0.0) + before.get("wall_us", 0.0)
        gaps.append(max(0.0, after.get("start_us", 0.0) - end - c))
    return by_name, every, gaps


def calibrate(documents: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """A host model from (name, trace document) pairs of GPU-origin traces."""
    per_name: dict[str, list[float]] = defaultdict(list)
    every: list[float] = []
    gap_means: list[float] = []
    names = []
    for name, doc in documents:
        if doc.get("origin", {}).get("device", "cpu") == "cpu":
            raise ValueError(f"{name}: a host model is calibrated from GPU-origin traces; this one is a CPU trace")
        names.append(name)
        for step in doc["steps"]:
            by_name, all_ops, gaps = _exclusive_and_gaps(step)
            for op_name, values in by_name.items():
                per_name[op_name].append(statistics.fmean(values))
            every.extend(all_ops)
            if gaps:
                gap_means.append(statistics.fmean(gaps))
    if not every:
        raise ValueError("no ops to calibrate the host model on: pass GPU-origin trace files")
    return {
        "op_us": {k: round(statistics.median(v), 3) for k, v in sorted(per_name.items())},
        "default_op_us": round(statistics.median(every), 3),
        "top_level_gap_us": round(statistics.median(gap_means), 3) if gap_means else 0.0,
        "calibration": f"eager PyTorch host cost per op from {len(names)} GPU trace(s): " + ", ".join(names),
    }


# --- Inclusive host model (per top-level op), calibrated to untraced steps -----------------
#
# A traced step's host runs 1.2-2x slower than the same step untraced, uniformly across its ops
# (benchmarks/results/timeline-host-slowdown.md), so per-op times read from a traced step are
# too slow by that factor. A format-2 trace carries the wall time of an untraced steady-state
# step (the trace's ``wall_ms``): the engine scales the step's host cadence to it
# (``host_scale``, csrc/src/predict/timeline_calibrate.cpp). The inclusive model reads each
# top-level op's host time from that calibrated cadence. ``benchmark.measured`` (the plain
# step timed by the benchmark) is never read.

#: Gaps between top-level ops of over this long (us, on the traced clock) are idle stalls, left
#: out of a phase's gap: no op is open in them and the recorded runs' stalls were Habitat's
#: forecast worker holding the GIL (benchmarks/timeline/README.md, "Idle stalls", the same
#: 1 ms threshold).
STALL_US = 1000.0


def _tensors_in(op: dict[str, Any]) -> int:
    for arg in op.get("args", []):
        if "tensors" in arg:
            return max(1, len(arg["tensors"]))
    return 1


def trace_host_costs(doc: dict[str, Any]) -> dict[str, Any]:
    """One GPU trace's calibrated host costs: per top-level op name its inclusive times (us),
    per phase the gaps between top-level ops (stalls left out), per foreach op (time, tensors)."""
    if int(doc.get("version", 1)) < 2:
        raise ValueError("the inclusive host model is calibrated on format-2 traces (their wall_ms is an "
                         "untraced step's); format-1 traces carry no untraced time")
    # Each op's host window as the engine's timeline sees it: Habitat's recording and the
    # origin's sync waits removed, scaled to the untraced step (habitat/timeline.h).
    windows = _engine.origin_op_windows(json.dumps(doc), -1)
    scale = float(windows["host_scale"])
    window = {op_id: (start, end) for op_id, start, end in windows["ops"]}
    step = doc["steps"][-1]
    top = sorted((op for op in step["ops"] if op.get("parent") is None), key=lambda op: op["start_us"])
    # Top-level ops whose subtree launched a kernel: the default for a name never seen.
    by_id = {op["id"]: op for op in step["ops"]}
    kernels_under: dict[int, int] = defaultdict(int)  # top-level op id -> kernels in its subtree
    for op in step["ops"]:
        n = len(op.get("kernels", []))
        if n:
            while op.get("parent") is not None and op["parent"] in by_id:
                op = by_id[op["parent"]]
            kernels_under[op["id"]] += n
    launching_ids = set(kernels_under)
    by_kernels: dict[tuple[str, int], list[float]] = defaultdict(list)
    launching: list[float] = []
    views: list[float] = []
    inclusive: dict[str, list[float]] = defaultdict(list)
    foreach: dict[str, list[tuple[float, int]]] = defaultdict(list)
    gaps: dict[str, list[float]] = defaultdict(list)
    stalls = 0.0
    end_traced = end = None
    for op in top:
        start, finish = window[op["id"]]
        inclusive[op["name"]].append(max(0.0, finish - start))
        (launching if op["id"] in launching_ids else views).append(max(0.0, finish - start))
        if kernels_under.get(op["id"]) and not op["name"].startswith("aten::_foreach_"):
            by_kernels[(op["name"], kernels_under[op["id"]])].append(max(0.0, finish - start))
        if op["name"].startswith("aten::_foreach_"):
            foreach[op["name"]].append((max(0.0, finish - start), _tensors_in(op)))
        if end is not None:
            if op["start_us"] - end_traced > STALL_US:
                stalls += max(0.0, start - end)
            else:
                gaps[op.get("phase") or "other"].append(max(0.0, start - end))
        if end is None or finish > end:
            end, end_traced = finish, op["start_us"] + op["wall_us"]
    return {"host_scale": scale, "inclusive": inclusive, "gaps": gaps, "foreach": foreach, "launching": launching, "views": views,
            "by_kernels": {f"{name}|{k}": v for (name, k), v in by_kernels.items()},
            "stalls_us": stalls, "steady_wall_ms": float(step.get("wall_ms", 0.0))}


def _per_kernel_line(points: list[tuple[int, float]]) -> dict[str, float]:
    if len({k for k, _ in points}) < 2:
        return {"base_us": 0.0, "per_kernel_us": 0.0}
    slope, intercept = statistics.linear_regression([float(k) for k, _ in points], [c for _, c in points])
    return {"base_us": round(max(0.0, intercept), 3), "per_kernel_us": round(max(0.0, slope), 3)}


def calibrate_inclusive(documents: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The inclusive host model from (name, format-2 GPU trace document) pairs: an op name's
    cost is the median over traces of its mean calibrated inclusive time in each; a phase's gap
    the median over traces of the mean gap; a foreach op's cost per tensor the median over
    traces of its time over its tensors. ``op_us``/``default_op_us``/``top_level_gap_us`` keep
    the first models' fields filled (the engine uses the inclusive fields when present)."""
    costs = []
    for name, doc in documents:
        if doc.get("origin", {}).get("device", "cpu") == "cpu":
            raise ValueError(f"{name}: a host model is calibrated from GPU-origin traces; this one is a CPU trace")
        costs.append((name, trace_host_costs(doc)))
    return model_from_costs(costs)


def model_from_costs(named_costs: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """calibrate_inclusive from traces' trace_host_costs (benchmarks reuse them across held-out
    subsets)."""
    per_name: dict[str, list[float]] = defaultdict(list)
    per_phase: dict[str, list[float]] = defaultdict(list)
    per_foreach: dict[str, list[float]] = defaultdict(list)
    every: list[float] = []
    launching: list[float] = []
    views: list[float] = []
    per_kernel_points: list[tuple[int, float]] = []  # (kernels, mean cost) per trace, name and count
    names, scales = [], []
    for name, costs in named_costs:
        names.append(name)
        for key, values in costs["by_kernels"].items():
            per_kernel_points.append((int(key.rsplit("|", 1)[1]), statistics.fmean(values)))
        launching.extend(costs["launching"])
        views.extend(costs["views"])
        scales.append(costs["host_scale"])
        for op_name, values in costs["inclusive"].items():
            per_name[op_name].append(statistics.fmean(values))
            every.extend(values)
        for phase, values in costs["gaps"].items():
            per_phase[phase].append(statistics.fmean(values))
        for op_name, calls in costs["foreach"].items():
            per_foreach[op_name].append(sum(t for t, _ in calls) / sum(n for _, n in calls))
    if not every:
        raise ValueError("no ops to calibrate the host model on: pass format-2 GPU-origin trace files")
    gaps = {k: round(statistics.median(v), 3) for k, v in sorted(per_phase.items())}
    top_level = {k: round(statistics.median(v), 3) for k, v in sorted(per_name.items())}
    return {
        "op_us": {},
        "default_op_us": round(statistics.median(every), 3),
        "top_level_gap_us": round(statistics.median([x for v in per_phase.values() for x in v]), 3),
        "top_level_op_us": top_level,
        # A name the calibration never saw: the median top-level op that launched a kernel, or
        # that launched none (the engine tells them apart by the op's shapes).
        "default_top_level_us": round(statistics.median(launching or every), 3),
        "default_top_level_view_us": round(statistics.median(views or every), 3),
        # ... and with the kernels CUDA would launch for it: the least-squares line of the
        # top-level ops' cost on their kernel count (one point per trace, name and count).
        "unseen_op_us": _per_kernel_line(per_kernel_points),
        "phase_gap_us": gaps,
        "foreach_per_tensor_us": {k: round(statistics.median(v), 3) for k, v in sorted(per_foreach.items())},
        "calibration": (f"host time per top-level op from {len(names)} format-2 GPU trace(s) of "
                        f"{', '.join(sorted({n.rsplit('_', 1)[0] for n in names}))}, scaled to their untraced "
                        f"steady-state steps (x{min(scales):.2f}-{max(scales):.2f})"),
        "traces": {name: {"host_scale": round(scale, 4)} for name, scale in zip(names, scales)},
    }


def calibrate_files(paths: Sequence[str | Path], inclusive: bool = False) -> dict[str, Any]:
    pairs = ((f"{Path(p).parent.parent.name}/{Path(p).name.split('.')[0]}", load_document(p)) for p in paths)
    return calibrate_inclusive(pairs) if inclusive else calibrate(pairs)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    inclusive = "--inclusive" in args
    args = [a for a in args if a != "--inclusive"]
    if len(args) < 2:
        print("usage: python -m habitat.analysis.host_model [--inclusive] OUT.json TRACE [TRACE ...]\n"
              "  --inclusive: per top-level op, from format-2 traces calibrated to their untraced step",
              file=sys.stderr)
        return 2
    model = calibrate_files(args[1:], inclusive)
    model["command"] = "python -m habitat.analysis.host_model " + " ".join(
        (["--inclusive"] if inclusive else []) + [args[0]] + [str(p) for p in args[1:]])
    Path(args[0]).write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args[0]}: {len(model.get('top_level_op_us') or model['op_us'])} op names, default {model['default_op_us']} us, "
          f"gap {model['top_level_gap_us']} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
