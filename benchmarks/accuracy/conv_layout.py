"""Convolution memory layout in the recorded Hopper traces: which convolutions cuDNN wraps in
NCHW <-> NHWC transform kernels, and what those kernels cost.

    python benchmarks/accuracy/conv_layout.py [--fit-run h100-sxm5-80gb --fit-workload dcgan
                                               --fit-precision bf16] [--collection DIR]

Reads the GPU traces (benchmarks/results/<run>/traces/<workload>_<precision>.json.gz: ops with
their CUPTI kernels and durations, and each tensor's strides). For every convolution op that
launched kernels (cudnn_convolution, cudnn_convolution_transpose, convolution_backward) it
records the layout of its input and weight (NCHW: both recorded contiguous; channels-last:
either has channels-last strides, as PyTorch's cudnn_conv_suggest_memory_format decides), its
precision (bf16; fp32 runs with cuDNN's TF32 on, PyTorch's default), its passes (forward; data
and weight gradient from output_mask) and its transform kernels: cuDNN's
`nchwToNhwcKernel`, `nhwcToNchwKernel`, their `Folded` variants and `tensorTransformGeneric`
(kernel names).

Prints (1) per (run, workload, precision, op, layout): passes, transform kernels and their
share of the op's kernel time; (2) the transform-cost model of habitat.learned.conv_layout
(per transformed tensor: a fixed cost plus read + write bytes at a share of the DRAM bandwidth),
its two constants fitted by least squares (log time) to the per-op transform sums of ONE
trace set (default: the H100 run of 2026-11-22, dcgan, bf16), and its error on every other
(run, workload, precision) as a check. Evaluation and calibration only; the constants the
engine uses are the ones in habitat.learned.conv_layout / csrc (learned_model.cpp), written by
hand from this script's output.

--collection DIR checks both against a kernel collection instead (collect_kernels.py since
session 11: conv_<precision>.csv rows with `Layout` and the CUPTI `Transform Latency` of each
pass), shapes the traces never had: (3) per precision, how many NCHW rows cuDNN transformed
against how many the engine's rule says it would (TF32: `tf32_on_tensor_cores`, both channel
counts multiples of 8; 16-bit: always), and (4) the transform cost the engine adds (the shipped
constants, not refitted) against the measured transforms of the rows that ran them.
"""
from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
RUNS = ("h100-sxm5-80gb", "h200-sxm-141gb", "h100-sxm5-80gb-2026-11-23")
WORKLOADS = ("resnet50", "dcgan")
CONV_OPS = ("aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::convolution_backward")
ELEM_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
from cudnn_transforms import transform_kind  # noqa: E402  (torch-free, beside the kernel collector)


def layout(t: dict[str, Any] | None) -> str:
    """'nchw' (recorded contiguous), 'cl' (channels-last strides) or 'other'."""
    if t is None or "shape" not in t:
        return "other"
    if t.get("contiguous", True):
        return "nchw"
    s, shape = t.get("strides") or [], t["shape"]
    if len(shape) == 4 and len(s) == 4 and s[1] == 1:
        return "cl"
    return "other"


def _tensor(op: dict[str, Any], name: str) -> dict[str, Any] | None:
    for a in op.get("args", []):
        if a.get("name") == name and a.get("tensor") and "shape" in a["tensor"]:
            return a["tensor"]
    return None


def conv_ops(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per convolution op with kernels in the first step of one trace document."""
    out = []
    for op in doc["steps"][0]["ops"]:
        if op["name"] not in CONV_OPS or not op.get("kernels"):
            continue
        x = _tensor(op, "self") or _tensor(op, "input")
        w = _tensor(op, "weight")
        if x is None or w is None:
            continue
        lx, lw = layout(x), layout(w)
        lay = "channels_last" if "cl" in (lx, lw) else ("nchw" if lx == lw == "nchw" else "other")
        if op["name"] == "aten::convolution_backward":
            mask = next((a.get("bools") or a.get("ints") for a in op["args"] if a.get("name") == "output_mask"),
                        [True, True, False])
            passes = [p for p, on in zip(("data_grad", "weight_grad"), mask[:2]) if on]
            y = _tensor(op, "grad_output")
        else:
            passes = ["forward"]
            y = op["outputs"][0] if op.get("outputs") else None
        numel = [math.prod(t["shape"]) for t in (x, w, y) if t is not None]
        kernels = [(transform_kind(k["name"]), k["duration_us"]) for k in op["kernels"]]
        out.append({"op": op["name"].removeprefix("aten::"), "layout": lay, "passes": passes,
                    "elem_bytes": ELEM_BYTES.get(x.get("dtype", "float32"), 4), "tensor_elems": numel,
                    "kernel_us": sum(d for _, d in kernels),
                    "transform_us": sum(d for k, d in kernels if k is not None),
                    "transforms": sum(1 for k, _ in kernels if k is not None)})
    return out


def all_ops(runs: tuple[str, ...] = RUNS) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    from habitat.analysis.host_model import load_document
    from habitat.learned.devices import default_table
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for run in runs:
        for wl in WORKLOADS:
            for prec in ("bf16", "fp32"):
                path = RESULTS / run / "traces" / f"{wl}_{prec}.json.gz"
                if path.is_file():
                    doc = load_document(path)
                    gpu = doc["origin"]["device"]
                    bandwidth = default_table().find(gpu).bandwidth_gbs
                    out[(run, wl, prec)] = [dict(r, gpu=gpu, bandwidth_gbs=bandwidth) for r in conv_ops(doc)]
    return out


def _model_terms(r: dict[str, Any]) -> tuple[float, float]:
    """(transform kernels, bytes moved) the model assumes for an NCHW op: per pass, its two
    inputs and its output, each read and written once (the three tensors x, w, y), every
    element counted at habitat.learned.conv_layout.ELEMENT_BYTES whatever its dtype."""
    from habitat.learned.conv_layout import ELEMENT_BYTES
    n = len(r["passes"])
    return 3.0 * n, n * 2.0 * ELEMENT_BYTES * sum(r["tensor_elems"])


def fit(ops: list[dict[str, Any]]) -> tuple[float, float]:
    """(fixed us per transform kernel, share of DRAM bandwidth) minimising squared log error of
    the per-op transform sums (grid over the share, the fixed cost in closed form per share is
    not log-linear, so both on a grid)."""
    best = (math.inf, 0.0, 0.0)
    for c in [x * 0.1 for x in range(0, 61)]:
        for e in [x * 0.01 for x in range(20, 101)]:
            err = 0.0
            for r in ops:
                k, b = _model_terms(r)
                t = k * c + b / (e * r["bandwidth_gbs"] * 1e3)
                err += (math.log(max(t, 1e-3)) - math.log(r["transform_us"])) ** 2
            if err < best[0]:
                best = (err, c, e)
    return best[1], best[2]


def model_us(r: dict[str, Any], fixed_us: float, share: float) -> float:
    k, b = _model_terms(r)
    return k * fixed_us + b / (share * r["bandwidth_gbs"] * 1e3)


def collection_rows(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """NCHW conv rows of a kernel collection with device-time columns, by precision: each row's
    shape (habitat.learned.neusight.row_shape), GPU, measured transform time (us) and whether
    the engine's rule puts it on tensor cores between transforms."""
    from habitat.learned import conv_layout as layout_model
    from habitat.learned.neusight import row_shape
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(directory.glob("conv_*.csv")):
        precision = path.stem.removeprefix("conv_")
        with path.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("Layout", "nchw") == "nchw"]
        if not rows or "Transform Latency" not in rows[0]:
            continue
        parsed = []
        for r in rows:
            shape = row_shape("conv", r)
            rule = precision != "tf32" or bool(layout_model.tf32_on_tensor_cores(shape))
            parsed.append({"shape": shape, "device": r["Device"],
                           "transform_us": float(r["Transform Latency"]) * 1e3,
                           "rule_transforms": precision in layout_model.TRANSFORM_PRECISIONS and rule})
        out[precision] = parsed
    return out


def check_collection(directory: Path) -> int:
    from habitat.learned import conv_layout as layout_model
    from habitat.learned.devices import default_table
    by_precision = collection_rows(directory)
    if not by_precision:
        print(f"no conv_<precision>.csv with a `Transform Latency` column in {directory} "
              "(collect one with `bash benchmarks/gpu/run.sh kernels conv` on a GPU)")
        return 1
    print(f"NCHW conv rows of {directory}: transformed (Transform Latency > 0) against the engine's rule")
    print("| precision | rows | rule yes, measured yes | rule yes, measured no | rule no, measured yes | "
          "rule no, measured no | model / measured transform sum | mean abs err % per row |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    devices = default_table()
    for precision, rows in by_precision.items():
        counts = {(a, b): 0 for a in (True, False) for b in (True, False)}
        for r in rows:
            counts[(r["rule_transforms"], r["transform_us"] > 0)] += 1
        both = [r for r in rows if r["rule_transforms"] and r["transform_us"] > 0]
        model = [float(layout_model.transform_us(r["shape"], devices.find(r["device"]))) for r in both]
        ratio = sum(model) / sum(r["transform_us"] for r in both) if both else float("nan")
        err = statistics.fmean(abs(m / r["transform_us"] - 1) * 100 for m, r in zip(model, both)) \
            if both else float("nan")
        print(f"| {precision} | {len(rows)} | {counts[(True, True)]} | {counts[(True, False)]} | "
              f"{counts[(False, True)]} | {counts[(False, False)]} | {ratio:.2f} | {err:.1f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit-run", default="h100-sxm5-80gb")
    ap.add_argument("--fit-workload", default="dcgan")
    ap.add_argument("--fit-precision", default="bf16")
    ap.add_argument("--collection", type=Path, help="check the rule and the cost against a kernel collection")
    args = ap.parse_args(argv)
    if args.collection is not None:
        return check_collection(args.collection)
    ops = all_ops()
    print("| run | workload | precision | op | layout | ops | passes | transform kernels | "
          "transform us | kernel us | transform share |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for (run, wl, prec), rs in ops.items():
        groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in rs:
            groups[(r["op"], r["layout"])].append(r)
        for (op, lay), g in sorted(groups.items()):
            tr, kt = sum(r["transform_us"] for r in g), sum(r["kernel_us"] for r in g)
            print(f"| {run} | {wl} | {prec} | {op} | {lay} | {len(g)} | {sum(len(r['passes']) for r in g)} | "
                  f"{sum(r['transforms'] for r in g)} | {tr:.1f} | {kt:.1f} | {tr / kt * 100:.1f}% |")
    fit_ops = [r for r in ops[(args.fit_run, args.fit_workload, args.fit_precision)]
               if r["layout"] == "nchw" and r["transform_us"] > 0]
    fixed, share = fit(fit_ops)
    print(f"\nfitted on {args.fit_run} {args.fit_workload} {args.fit_precision} ({len(fit_ops)} NCHW ops with "
          f"transforms): {fixed:.1f} us per transform kernel + read/write bytes at {share:.2f} of DRAM bandwidth")
    print("\n| run | workload | precision | NCHW ops | with transforms | measured transform us | "
          "model us (ops with transforms) | model us (all NCHW ops) | mean abs err % per op |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for (run, wl, prec), rs in ops.items():
        nchw = [r for r in rs if r["layout"] == "nchw"]
        if not nchw:
            continue
        with_t = [r for r in nchw if r["transform_us"] > 0]
        meas = sum(r["transform_us"] for r in nchw)
        mod_t = sum(model_us(r, fixed, share) for r in with_t)
        mod_all = sum(model_us(r, fixed, share) for r in nchw)
        err = statistics.fmean(abs(model_us(r, fixed, share) / r["transform_us"] - 1) * 100 for r in with_t) \
            if with_t else float("nan")
        print(f"| {run} | {wl} | {prec} | {len(nchw)} | {len(with_t)} | {meas:.1f} | {mod_t:.1f} | "
              f"{mod_all:.1f} | {err:.1f} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "python"))
    sys.exit(main())
