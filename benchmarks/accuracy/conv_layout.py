"""Convolution memory layout in the recorded Hopper traces: which convolutions cuDNN wraps in
NCHW <-> NHWC transform kernels, and what those kernels cost.

    python benchmarks/accuracy/conv_layout.py [--collection DIR]

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
share of the op's kernel time; (2) the shipped transform-cost model of habitat.learned.
conv_layout (per pass: a fixed cost plus read + write bytes at a share of the DRAM bandwidth
per element width) against every trace set's transforms: an independent check, since the
constants come from the collection below.

--collection DIR (a collect_kernels.py output with `Layout` and the CUPTI `Transform Latency`
of each pass: benchmarks/results/kernels/H100-SXM5-80GB-2026-11-26) fits the transform cost by
least squares in log time on its NCHW passes that ran transforms (the constants the package
ships were copied from this output), prints the shipped cost's error per precision, and checks
the path rule: for each NCHW pass, the faster of its two measured alternatives (the FP32 SIMT
pass: the shape's fp32 NCHW row; the tensor-core pass: its channels-last row plus the shipped
transform cost) against the path cuDNN took and against the pass's measured time.
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
    """(passes, bytes moved) the model assumes for an NCHW op: per pass, its two inputs and its
    output, each read and written once (the three tensors x, w, y)."""
    n = len(r["passes"])
    return float(n), n * 2.0 * r["elem_bytes"] * sum(r["tensor_elems"])


def model_us(r: dict[str, Any]) -> float:
    """The shipped transform cost (habitat.learned.conv_layout) of an NCHW op's passes."""
    from habitat.learned.conv_layout import FIXED_US_PER_PASS, bandwidth_share
    passes, nbytes = _model_terms(r)
    return passes * FIXED_US_PER_PASS + nbytes / (float(bandwidth_share(r["elem_bytes"])) * r["bandwidth_gbs"] * 1e3)


def collection_rows(directory: Path) -> list[dict[str, Any]]:
    """Conv rows of a kernel collection with device-time columns: each row's precision, layout,
    pass, shape (habitat.learned.neusight.row_shape), GPU, and measured pass and transform
    times (us)."""
    from habitat.learned.neusight import row_shape
    out: list[dict[str, Any]] = []
    for path in sorted(directory.glob("conv_*.csv")):
        precision = path.stem.removeprefix("conv_")
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or "Transform Latency" not in rows[0]:
            continue
        for r in rows:
            shape = row_shape("conv", r, 2.0 if precision in ("bf16", "fp16") else 4.0)
            key = tuple(r[c] for c in ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size",
                                       "Stride", "Padding", "Phase"))
            out.append({"precision": precision, "layout": r.get("Layout", "nchw"), "key": key, "shape": shape,
                        "device": r["Device"], "kernel_us": float(r["Kernel Latency"]) * 1e3,
                        "transform_us": float(r["Transform Latency"]) * 1e3})
    return out


def fit_transforms(rows: list[dict[str, Any]], bandwidth_gbs: dict[str, float]) -> tuple[float, dict[float, float]]:
    """(fixed us per pass, {element bytes: share of DRAM bandwidth}) minimising the squared log
    error of the transform time of the NCHW passes that ran transforms (a grid)."""
    from habitat.learned.conv_layout import tensor_elements
    best: dict[float, tuple[float, float, float]] = {}
    widths = sorted({r["shape"]["elem_bytes"] for r in rows})
    for c in [x * 0.25 for x in range(0, 41)]:
        for w in widths:
            sub = [r for r in rows if r["shape"]["elem_bytes"] == w]
            for e in [x * 0.01 for x in range(20, 101)]:
                err = sum((math.log(c + 2 * w * float(tensor_elements(r["shape"]))
                                    / (e * bandwidth_gbs[r["device"]] * 1e3)) - math.log(r["transform_us"])) ** 2
                          for r in sub)
                total = best.get(w, (math.inf, 0.0, 0.0))
                if err < total[0]:
                    best[w] = (err, c, e)
    # one fixed cost for every width: the one with the least error summed over the widths
    fixed = min({b[1] for b in best.values()},
                key=lambda c: sum(min(sum((math.log(c + 2 * w * float(tensor_elements(r["shape"]))
                                                    / (e * bandwidth_gbs[r["device"]] * 1e3))
                                           - math.log(r["transform_us"])) ** 2
                                          for r in rows if r["shape"]["elem_bytes"] == w)
                                      for e in [x * 0.01 for x in range(20, 101)]) for w in widths))
    shares = {}
    for w in widths:
        sub = [r for r in rows if r["shape"]["elem_bytes"] == w]
        shares[w] = min([x * 0.01 for x in range(20, 101)],
                        key=lambda e: sum((math.log(fixed + 2 * w * float(tensor_elements(r["shape"]))
                                                    / (e * bandwidth_gbs[r["device"]] * 1e3))
                                           - math.log(r["transform_us"])) ** 2 for r in sub))
    return fixed, shares


def check_collection(directory: Path) -> int:
    from habitat.learned import conv_layout as layout_model
    from habitat.learned.devices import default_table
    rows = collection_rows(directory)
    if not rows:
        print(f"no conv_<precision>.csv with a `Transform Latency` column in {directory} "
              "(collect one with `bash benchmarks/gpu/run.sh kernels conv` on a GPU)")
        return 1
    devices = default_table()
    bandwidth = {r["device"]: devices.find(r["device"]).bandwidth_gbs for r in rows}
    nchw = [r for r in rows if r["layout"] == "nchw"]
    transformed = [r for r in nchw if r["transform_us"] > 0]
    fixed, shares = fit_transforms(transformed, bandwidth)
    print(f"Transform cost fitted on the {len(transformed)} NCHW passes of {directory.name} that ran transforms: "
          f"{fixed:.2f} us per pass + read/write bytes at "
          + ", ".join(f"{s:.2f} (elements of {w:g} B)" for w, s in sorted(shares.items()))
          + " of DRAM bandwidth; shipped (habitat.learned.conv_layout): "
          f"{layout_model.FIXED_US_PER_PASS} us, "
          + ", ".join(f"{s:.2f} ({w:g} B)" for w, s in sorted(layout_model.BANDWIDTH_SHARE.items())))
    print("\n| precision | NCHW passes | transformed | shipped model / measured transform sum | mean abs err % per pass |")
    print("|---|---:|---:|---:|---:|")
    for precision in sorted({r["precision"] for r in nchw}):
        mine = [r for r in transformed if r["precision"] == precision]
        model = [float(layout_model.transform_us(r["shape"], devices.find(r["device"]))) for r in mine]
        ratio = sum(model) / sum(r["transform_us"] for r in mine) if mine else float("nan")
        err = statistics.fmean(abs(m / r["transform_us"] - 1) * 100 for m, r in zip(model, mine)) \
            if mine else float("nan")
        print(f"| {precision} | {sum(r['precision'] == precision for r in nchw)} | {len(mine)} | {ratio:.2f} | "
              f"{err:.1f} |")
    # The path cuDNN takes for an NCHW pass, against the faster of its measured alternatives.
    by = {(r["precision"], r["layout"], r["key"]): r for r in rows}
    print("\nNCHW passes: the path cuDNN took (transformed or not) against the faster of the alternatives, "
          "each measured (FP32 SIMT: the fp32 NCHW row of the shape; tensor cores: its channels-last row plus "
          "the shipped transform cost)")
    print("| precision | passes | faster alternative = path taken | mean abs err % of the faster alternative "
          "| always transforms: mean abs err % |")
    print("|---|---:|---:|---:|---:|")
    for precision in ("tf32", "bf16", "fp16"):
        agree, errs, always = 0, [], []
        for r in nchw:
            if r["precision"] != precision:
                continue
            simt, tensor = by.get(("fp32", "nchw", r["key"])), by.get((precision, "nhwc", r["key"]))
            if simt is None or tensor is None:
                continue
            t_tensor = tensor["kernel_us"] + float(layout_model.transform_us(r["shape"], devices.find(r["device"])))
            t_fast = min(simt["kernel_us"], t_tensor) if precision == "tf32" else t_tensor
            agree += (r["transform_us"] > 0) == (t_tensor <= simt["kernel_us"] or precision != "tf32")
            errs.append(abs(t_fast / r["kernel_us"] - 1) * 100)
            always.append(abs(t_tensor / r["kernel_us"] - 1) * 100)
        if errs:
            print(f"| {precision} | {len(errs)} | {agree} | {statistics.fmean(errs):.1f} | "
                  f"{statistics.fmean(always):.1f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    print("\nThe shipped transform cost (fitted on the 2026-11-26 kernel collection: --collection) on each "
          "trace set's NCHW convolution ops")
    print("\n| run | workload | precision | NCHW ops | with transforms | measured transform us | "
          "model us (ops with transforms) | model us (all NCHW ops) | mean abs err % per op |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for (run, wl, prec), rs in ops.items():
        nchw = [r for r in rs if r["layout"] == "nchw"]
        if not nchw:
            continue
        with_t = [r for r in nchw if r["transform_us"] > 0]
        meas = sum(r["transform_us"] for r in nchw)
        mod_t = sum(model_us(r) for r in with_t)
        mod_all = sum(model_us(r) for r in nchw)
        err = statistics.fmean(abs(model_us(r) / r["transform_us"] - 1) * 100 for r in with_t) \
            if with_t else float("nan")
        print(f"| {run} | {wl} | {prec} | {len(nchw)} | {len(with_t)} | {meas:.1f} | {mod_t:.1f} | "
              f"{mod_all:.1f} | {err:.1f} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "python"))
    sys.exit(main())
