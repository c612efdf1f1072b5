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


def calibrate_files(paths: Sequence[str | Path]) -> dict[str, Any]:
    return calibrate((f"{Path(p).parent.parent.name}/{Path(p).name.split('.')[0]}", load_document(p))
                     for p in paths)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m habitat.analysis.host_model OUT.json TRACE [TRACE ...]", file=sys.stderr)
        return 2
    model = calibrate_files(args[1:])
    Path(args[0]).write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args[0]}: {len(model['op_us'])} op names, default {model['default_op_us']} us, "
          f"gap {model['top_level_gap_us']} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
