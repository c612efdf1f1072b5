"""Per-op accuracy of the engine's shape-based forecasts against recorded Hopper kernels.

    python benchmarks/accuracy/trace_kernels.py [--out DIR]

Reads the GPU traces recorded on H100 and H200 (benchmarks/results/<run>/traces/*.json.gz:
ops with their CUPTI kernels and measured durations). For each op that launched kernels:

- op: the op name without its "aten::" prefix; shapes: its tensor arguments, cut short.
- measured_us: the sum of its own kernels' durations (kernels are attributed to the innermost
  op that launched them); measured_incl_us adds the kernels of the ops below it.
- forecast_us: the engine's per-op forecast (OpRows time_us: the op's whole time, the same
  column the per-op reports read) for the trace's own GPU.

A GPU-origin forecast of an op with measured kernels scales those kernels (wave scaling / the
learned ratio: csrc/src/predict/predictor.cpp OpPredictor::runtime_based), which on the
origin GPU gives back the measurement. To test the forecast a user gets from a CPU trace,
each document is forecast with its kernels stripped and its origin device set to "cpu":
the shape-based path (learned shape models, else the roofline) that CPU-traced forecasts
take, on the op list and arguments CUDA ran. forecast_us is compared with measured_incl_us
(on the shape path an op's time stands for the work below it too); the two are the same
for ops whose descendants launched no kernels.

Writes rows.csv (one row per op) to --out and prints a table per (op class, GPU, precision):
op_class is the engine's op class, with its norm class split into batch_norm / layer_norm /
other_norm by op name. H100 rows pool the two H100 runs.
Evaluation only: nothing is tuned.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
RUNS = ("h100-sxm5-80gb", "h200-sxm-141gb", "h100-sxm5-80gb-2026-11-23")
DEFAULT_OUT = RESULTS / "kernels" / "hopper-traces"
# The engine's op classes, norm split by the op's name (its class holds batch, layer and
# group norm alike); copy is memory-bound too, listed after the families asked about.
MEMORY_BOUND = ("elementwise", "softmax", "layer_norm", "batch_norm", "other_norm", "reduction",
                "copy")
FIELDS = ("run", "gpu", "workload", "precision", "op_id", "op", "op_class", "method",
          "kernels", "measured_us", "measured_incl_us", "forecast_us", "shapes")
MIN_US = 5.0


def family(op_class: str, name: str) -> str:
    """The op class, with norm split into batch_norm / layer_norm / other_norm by op name."""
    if op_class != "norm":
        return op_class
    for f in ("batch_norm", "layer_norm"):
        if f in name:
            return f
    return "other_norm"


DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int64": "i64",
          "int32": "i32", "bool": "b1", "float64": "f64", "uint8": "u8"}


def shapes(op: dict[str, Any]) -> str:
    """The op's tensor arguments in order, compact: e.g. '64x64x56x56:f32 64:f32' (24 chars at
    most, to keep rows.csv under 1 MB)."""
    out = []
    for a in op.get("args", []):
        t = a.get("tensor")
        if t is not None and "shape" in t:
            dtype = t.get("dtype", "?")
            out.append(f"{'x'.join(map(str, t['shape'])) or 'scalar'}:{DTYPES.get(dtype, dtype)}")
        elif "tensors" in a:
            out.append(f"[{len(a['tensors'])}]")
    return " ".join(out)[:24]


def trace_rows(path: Path, run: str) -> list[dict[str, Any]]:
    """One row per op of the trace's first step that launched kernels on the GPU."""
    from habitat.data.op_rows import METHODS, OP_CLASSES
    from habitat.learned.traces import kernel_us, recorded_step

    rec = recorded_step(path, run)
    out = []
    for op, incl in zip(rec.ops, rec.measured_incl_us):
        if not op.get("kernels"):
            continue
        r = rec.rows[op["id"]]
        out.append({
            "run": run, "gpu": rec.gpu, "workload": rec.workload, "precision": rec.precision,
            "op_id": op["id"], "op": op["name"].removeprefix("aten::"),
            "op_class": family(OP_CLASSES[int(r["op_class"])], op["name"]),
            "method": METHODS[int(r["method"][0])], "kernels": len(op["kernels"]),
            "measured_us": round(kernel_us(op), 2), "measured_incl_us": round(incl, 2),
            "forecast_us": round(float(r["time_us"][0]), 2),
            "shapes": shapes(op),
        })
    return out


def all_rows(runs: tuple[str, ...] = RUNS) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        for path in sorted((RESULTS / run / "traces").glob("*.json.gz")):
            rows.extend(trace_rows(path, run))
    return rows


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (class, GPU, precision): rows, mean |error| %, median forecast/measured; all rows
    and those with measured >= MIN_US."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["op_class"], r["gpu"], r["precision"])].append(r)

    def stats(rs: list[dict[str, Any]]) -> tuple[int, float, float]:
        rs = [r for r in rs if r["measured_incl_us"] > 0]
        if not rs:
            return 0, float("nan"), float("nan")
        errs = [abs(r["forecast_us"] - r["measured_incl_us"]) / r["measured_incl_us"] * 100
                for r in rs]
        ratios = [r["forecast_us"] / r["measured_incl_us"] for r in rs]
        return len(rs), statistics.fmean(errs), statistics.median(ratios)

    order = {c: i for i, c in enumerate(MEMORY_BOUND)}
    out = []
    for (cls, gpu, prec), rs in sorted(groups.items(),
                                       key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        n, err, ratio = stats(rs)
        n5, err5, ratio5 = stats([r for r in rs if r["measured_incl_us"] >= MIN_US])
        out.append({"family": cls, "gpu": gpu, "precision": prec, "memory_bound": cls in order,
                    "rows": n, "mape": err, "median_ratio": ratio,
                    "rows_5us": n5, "mape_5us": err5, "median_ratio_5us": ratio5})
    return out


def table(summary: list[dict[str, Any]]) -> str:
    lines = ["| class | GPU | precision | rows | mean abs err % | median f/m | rows >=5us | "
             "mean abs err % >=5us | median f/m >=5us |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for s in summary:
        cls = s["family"] + ("" if s["memory_bound"] else " (matrix/other)")
        lines.append(f"| {cls} | {s['gpu']} | {s['precision']} | {s['rows']} | {s['mape']:.1f} | "
                     f"{s['median_ratio']:.2f} | {s['rows_5us']} | {s['mape_5us']:.1f} | "
                     f"{s['median_ratio_5us']:.2f} |")
    return "\n".join(lines)


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    rows = all_rows()
    write_csv(rows, args.out / "rows.csv")
    print(f"{len(rows)} ops with kernels from {len(RUNS)} runs; forecast: shape-based "
          f"(kernels stripped, origin device 'cpu'); error vs measured_incl_us")
    print(table(summarize(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
