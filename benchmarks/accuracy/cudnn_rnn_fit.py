"""The measured factors on cuDNN's RNN ops (csrc/src/predict/cuda_paths.cpp, `cudnn_rnn_scale`): a
CPU-traced LSTM/GRU layer is costed as the kernels cuDNN runs for it (the input projection, a
recurrent GEMM and a cell kernel per time step, the backward's GEMMs and bias reduction, the
weights' layout transforms), each forecast as the engine forecasts a GEMM, an element-wise
kernel or a copy of the same shape, one after another. What a step pays is the time the op keeps
the device busy: cuDNN runs a stacked layer's kernels on other streams while the layer below is
still running (a wavefront over layers and time), so its kernels' summed durations count
overlapping time (1.0-2.0x the busy time: benchmarks/results/stream-overlap-h100.md), each kernel
slowed by the ones beside it.

    python benchmarks/accuracy/cudnn_rnn_fit.py

Each recorded GPU step that ran cuDNN RNN ops (the LSTM benchmark, `benchmarks/gpu/models.py`) is
read per pass: its kernels' summed durations by kind (GEMMs with cuBLASLt's split-K reductions,
cuDNN's element-wise cell and bias kernels, its weight transforms) and, where the trace carries
device start times (format 2: the H100's runs of 2026-11-23 and -26), their busy time, the union
of their intervals. Each pass's factor, per matrix precision (TF32, or 16-bit), is the busy time
over the forecast of its parts, summed over those runs. The runs without start times (H100 and
H200, 2026-11-22) only bound it from above (their summed durations). One network's shapes (batch
128, 32 steps, hidden 1024, inputs 512 and 1024) on one GPU are all the data: the factors are
measured there, not modelled.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benchmarks/gpu"))

import op_classes  # noqa: E402
from kernel_case import precision_context  # noqa: E402

from habitat.capture.environment import trace_origin  # noqa: E402
from habitat.data import engine  # noqa: E402

RUNS = {
    "H100-SXM5-80GB": ["h100-sxm5-80gb", "h100-sxm5-80gb-2026-11-23", "h100-sxm5-80gb-2026-11-26"],
    "H200-SXM-141GB": ["h200-sxm-141gb"],
}
KINDS = ("gemm", "pointwise", "transform")
RNN_OPS = {"aten::_cudnn_rnn": False, "aten::_cudnn_rnn_backward": True}


def kernel_kind(name: str) -> str:
    if "region_transform" in name:
        return "transform"
    if "elemWise" in name or "elementWise" in name:
        return "pointwise"
    if any(s in name for s in ("gemm", "nvjet", "xmma", "splitKreduce")):
        return "gemm"
    return "other"


def arg(op: dict[str, Any], name: str) -> Any:
    return next(a for a in op["args"] if a["name"] == name)


def parts(op: dict[str, Any], backward: bool) -> list[tuple[str, str, tuple[int, ...], float]]:
    """(kind, aten op, shape, count) of every part the engine costs for the op's layers, as
    cuda_paths.cpp `rnn_layer` lays them out: shape (m, k, n) for a GEMM, (m, n) otherwise."""
    x = arg(op, "input")["tensor"]["shape"]
    layers, batch, hidden = arg(op, "hx")["tensor"]["shape"]
    first = bool(arg(op, "batch_first")["bool"])
    steps = x[1] if first else x[0]
    assert (x[0] if first else x[1]) == batch
    gates = 4 * hidden  # LSTM (mode 2)
    out: list[tuple[str, str, tuple[int, ...], float]] = []
    for layer in range(layers):
        inp = x[2] if layer == 0 else hidden
        if not backward:
            out += [("gemm", "mm", (steps * batch, inp, gates), 1), ("gemm", "mm", (batch, hidden, gates), steps),
                    ("pointwise", "add", (batch, gates), steps),
                    ("transform", "clone", (gates, inp), 1), ("transform", "clone", (gates, hidden), 1)]
            continue
        out += [("pointwise", "add", (batch, gates), steps), ("gemm", "mm", (batch, gates, hidden), steps)]
        out += [("gemm", "mm", (batch, gates, inp), steps) if layer > 0 else ("gemm", "mm", (steps * batch, gates, inp), 1)]
        out += [("gemm", "mm", (gates, steps * batch, inp), 1), ("gemm", "mm", (gates, steps * batch, hidden), 1),
                ("pointwise", "sum", (steps * batch, gates), 1)]
    return out


def tensor(shape: tuple[int, ...], dtype: str, storage: int) -> dict[str, Any]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return {"shape": list(shape), "dtype": dtype, "device": "cpu", "storage": storage, "strides": strides}


def aten_op(i: int, name: str, shape: tuple[int, ...], dtype: str) -> dict[str, Any]:
    op: dict[str, Any] = {"id": i, "overload": "", "phase": "forward", "start_us": 10.0 * i, "wall_us": 5.0,
                          "has_children": False, "name": f"aten::{name}"}
    if name == "mm":
        m, k, n = shape
        op["args"] = [{"name": "self", "tensor": tensor((m, k), dtype, 2 * i + 1)},
                      {"name": "mat2", "tensor": tensor((k, n), dtype, 2 * i + 2)}]
        op["outputs"] = [tensor((m, n), dtype, 10**6 + i)]
    elif name == "add":
        op["overload"] = "Tensor"
        op["args"] = [{"name": "self", "tensor": tensor(shape, dtype, 2 * i + 1)},
                      {"name": "other", "tensor": tensor(shape, dtype, 2 * i + 2)}]
        op["outputs"] = [tensor(shape, dtype, 10**6 + i)]
    elif name == "sum":
        op["overload"] = "dim_IntList"
        op["args"] = [{"name": "self", "tensor": tensor(shape, dtype, 2 * i + 1)}, {"name": "dim", "ints": [0]}]
        op["outputs"] = [tensor(shape[1:], dtype, 10**6 + i)]
    else:
        op["args"] = [{"name": "self", "tensor": tensor(shape, dtype, 2 * i + 1)}]
        op["outputs"] = [tensor(shape, dtype, 10**6 + i)]
    return op


def forecast(layout: list[tuple[str, str, tuple[int, ...], float]], gpu: str, precision: str) -> Counter[str]:
    """Each kind's forecast (us) with no factor: the engine's forecast of each part's aten op."""
    dtype = "float32" if precision == "tf32" else "float16"
    ops = [aten_op(i, name, shape, dtype) for i, (_, name, shape, _) in enumerate(layout)]
    with precision_context(precision):
        origin = trace_origin("cpu")
    _, fc = engine.forecast_trace(engine.trace_document(origin, [{"index": 0, "wall_ms": 1.0, "ops": ops}]), [gpu])
    us = fc[0][4].array["share_us"][:, 0]
    out: Counter[str] = Counter()
    for (kind, _, _, count), u in zip(layout, us):
        out[kind] += count * float(u)
    return out


def run_rows(gpu: str, run: str) -> list[dict[str, Any]]:
    """Per precision and pass of one recorded run: measured (summed per kind, busy) and forecast us."""
    rows = []
    for workload, precision in (("lstm_seq2seq_fp32", "tf32"), ("lstm_seq2seq_bf16", "half")):
        path = ROOT / "benchmarks/results" / run / "traces" / f"{workload}.json.gz"
        step = json.load(gzip.open(path))["steps"][-1]
        for name, backward in RNN_OPS.items():
            summed: Counter[str] = Counter()
            predicted: Counter[str] = Counter()
            busy: float | None = 0.0
            for op in step["ops"]:
                if op["name"] != name or not op.get("kernels"):
                    continue
                for k in op["kernels"]:
                    summed[kernel_kind(k["name"])] += k["duration_us"]
                b = op_classes.busy_us(op["kernels"])
                busy = None if b is None or busy is None else busy + b
                # The GPU runs autocast's half GEMMs (cuDNN's "hsh" kernels): fp16 stands for both.
                predicted += forecast(parts(op, backward), gpu, "tf32" if precision == "tf32" else "fp16")
            rows.append({"gpu": gpu, "run": run, "precision": precision, "pass": "bwd" if backward else "fwd",
                         "summed": summed, "busy": busy, "forecast": predicted})
    return rows


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    rows = [r for gpu, runs in RUNS.items() for run in runs for r in run_rows(gpu, run)]
    timed = [r for r in rows if r["busy"] is not None]
    print("== summed kernel durations by kind over the forecast of the same parts, all runs (ms)")
    for precision in ("tf32", "half"):
        for kind in KINDS:
            m = sum(r["summed"][kind] for r in rows if r["precision"] == precision) / 1000
            f = sum(r["forecast"][kind] for r in rows if r["precision"] == precision) / 1000
            print(f"  {precision:5s} {kind:10s} {m:8.2f} / {f:8.2f} = {m / f:5.2f}")
    print("\n== factors: busy time over forecast, summed over the runs with device start times")
    factors: dict[tuple[str, str], float] = {}
    for precision in ("tf32", "half"):
        for pass_ in ("fwd", "bwd"):
            mine = [r for r in timed if r["precision"] == precision and r["pass"] == pass_]
            busy = sum(r["busy"] for r in mine)
            fc = sum(sum(r["forecast"].values()) for r in mine)
            factors[precision, pass_] = busy / fc
            print(f"  {precision:5s} {pass_}  {busy / 1000:7.2f} ms / {fc / 1000:7.2f} ms = {busy / fc:5.2f}")
    print("\n== each run: cuDNN RNN ops, ms (errors against the busy time, or the summed durations without it)")
    print(f"{'gpu':16s} {'run':28s} {'prec':5s} pass  summed    busy  forecast   error  scaled   error")
    for r in rows:
        summed = sum(r["summed"].values()) / 1000
        ref = r["busy"] / 1000 if r["busy"] is not None else summed
        f = sum(r["forecast"].values()) / 1000
        s = factors[r["precision"], r["pass"]] * f
        busy = f"{r['busy'] / 1000:7.2f}" if r["busy"] is not None else "      -"
        print(f"{r['gpu']:16s} {r['run']:28s} {r['precision']:5s} {r['pass']}  {summed:6.2f} {busy}  {f:8.2f}"
              f" {100 * (f / ref - 1):+6.1f}% {s:7.2f} {100 * (s / ref - 1):+6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
