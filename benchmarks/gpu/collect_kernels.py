"""Measures GEMM, convolution and attention kernels on the local GPU and writes NeuSight-like
CSVs (one file per op family and precision) for training the learned models beyond FP32.

    python benchmarks/gpu/collect_kernels.py --out benchmarks/results/<gpu> [--budget-s 840]
    python benchmarks/gpu/collect_kernels.py --device cpu --dry-run --out /tmp/kernels   # smoke test

Timing: CUDA events around each run, warm-up runs first, the median of --repeats runs.
Kernel names and launch configurations come from one torch.profiler pass per shape batch
(the longest kernel per op is reported, as NeuSight does, and all kernels in `Kernels`).
Columns follow NeuSight's (Latency in ms) plus `Precision` and, for backward ops, `Phase`.
Shapes: GEMM A[B,M,N] x B[B,N,K] (N is the reduction, as in NeuSight); conv B, Input_Channel,
Output_Channel, Kernel_Szie, Input_Size, Stride, Padding; attention B, H, L, S, E, Causal, Backend.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

GEMM_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
CONV_ATTN_PRECISIONS = ("fp32", "bf16")
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
BASE_COLUMNS = ["OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name",
                "Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y",
                "Block z", "CUDA Version", "Kernels", "Precision", "Phase"]


@dataclass
class Case:
    op: str                 # bmm, linear, conv, attention
    phase: str              # fwd, bwd_data, bwd_weight, bwd
    precision: str
    shape: dict[str, int | str]
    run: Callable[[], object]


def _dim(rng: torch.Generator, lo: int, hi: int, align: bool) -> int:
    x = math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * torch.rand(1, generator=rng).item())
    v = max(lo, int(round(x)))
    return max(8, (v // 8) * 8) if align and v >= 8 else v


def gemm_cases(n: int, device: str, rng: torch.Generator) -> list[Case]:
    cases = []
    for i in range(n):
        op = "bmm" if i % 2 else "linear"
        align = i % 4 != 3  # mostly tensor-core friendly sizes, some odd ones
        b = _dim(rng, 1, 256, False) if op == "bmm" else 1
        m, k_red, n_out = (_dim(rng, 16, 8192, align) for _ in range(3))
        while b * (m * k_red + k_red * n_out + m * n_out) > 2**28:  # keep operands < 1 GiB in fp32
            m = max(8, m // 2)
            n_out = max(8, n_out // 2)
        for prec in GEMM_PRECISIONS:
            dt = DTYPES[prec]
            if op == "bmm":
                a = torch.randn(b, m, k_red, device=device, dtype=dt)
                w = torch.randn(b, k_red, n_out, device=device, dtype=dt)
                run = (lambda a=a, w=w: torch.bmm(a, w))
            else:
                a = torch.randn(m, k_red, device=device, dtype=dt)
                w = torch.randn(n_out, k_red, device=device, dtype=dt)
                run = (lambda a=a, w=w: torch.nn.functional.linear(a, w))
            cases.append(Case(op, "fwd", prec, {"B": b, "M": m, "N": k_red, "K": n_out}, run))
    return cases


def conv_cases(n: int, device: str, rng: torch.Generator) -> list[Case]:
    cases = []
    for _ in range(n):
        ksize = [1, 3, 5, 7][int(torch.randint(0, 4, (1,), generator=rng))]
        stride = 1 if torch.rand(1, generator=rng).item() < 0.7 else 2
        size = _dim(rng, 7, 224, False)
        cin, cout = _dim(rng, 3, 1024, True), _dim(rng, 8, 1024, True)
        batch = _dim(rng, 1, 64, False)
        while batch * max(cin, cout) * size * size > 2**27:
            batch = max(1, batch // 2)
            size = max(ksize, size // 2) if batch == 1 else size
        pad = ksize // 2
        for prec in CONV_ATTN_PRECISIONS:
            dt = DTYPES[prec]
            x = torch.randn(batch, cin, size, size, device=device, dtype=dt)
            w = torch.randn(cout, cin, ksize, ksize, device=device, dtype=dt)
            y = torch.nn.functional.conv2d(x, w, stride=stride, padding=pad)
            gy = torch.randn_like(y)
            shape = {"B": batch, "Input_Channel": cin, "Output_Channel": cout, "Kernel_Szie": ksize,
                     "Input_Size": size, "Stride": stride, "Padding": pad}

            def bwd(mask, x=x, w=w, gy=gy, stride=stride, pad=pad):
                return torch.ops.aten.convolution_backward(gy, x, w, None, [stride] * 2, [pad] * 2, [1, 1],
                                                           False, [0, 0], 1, mask)
            cases.append(Case("conv", "fwd", prec, shape,
                              lambda x=x, w=w, s=stride, p=pad: torch.nn.functional.conv2d(x, w, stride=s, padding=p)))
            cases.append(Case("conv", "bwd_data", prec, shape, lambda bwd=bwd: bwd([True, False, False])))
            cases.append(Case("conv", "bwd_weight", prec, shape, lambda bwd=bwd: bwd([False, True, False])))
    return cases


def attention_cases(n: int, device: str, rng: torch.Generator) -> list[Case]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "math": SDPBackend.MATH}
    cases = []
    for _ in range(n):
        batch, heads = _dim(rng, 1, 32, False), _dim(rng, 1, 32, False)
        length = _dim(rng, 64, 4096, True)
        e = [32, 64, 96, 128][int(torch.randint(0, 4, (1,), generator=rng))]
        causal = bool(torch.rand(1, generator=rng).item() < 0.5)
        while batch * heads * length * max(length, e) > 2**28:
            batch = max(1, batch // 2)
            length = max(64, length // 2) if batch == 1 else length
        for prec in CONV_ATTN_PRECISIONS:
            dt = DTYPES[prec]
            for name, backend in backends.items():
                if name == "flash" and prec == "fp32":
                    continue  # flash attention has no fp32 kernels
                q, k, v = (torch.randn(batch, heads, length, e, device=device, dtype=dt, requires_grad=True)
                           for _ in range(3))

                def fwd(q=q, k=k, v=v, backend=backend, causal=causal):
                    with sdpa_kernel([backend]):
                        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                try:
                    out = fwd()
                except RuntimeError:
                    continue  # backend unavailable for this shape/dtype/device
                grad = torch.randn_like(out)
                shape = {"B": batch, "H": heads, "L": length, "S": length, "E": e,
                         "Causal": int(causal), "Backend": name}
                cases.append(Case("attention", "fwd", prec, shape, fwd))
                cases.append(Case("attention", "bwd", prec, shape,
                                  lambda out=out, grad=grad, q=q, k=k, v=v: torch.autograd.grad(
                                      out, (q, k, v), grad, retain_graph=True)))
    return cases


def _precision_context(prec: str):
    return _Tf32(prec == "tf32")


class _Tf32(contextlib.AbstractContextManager):
    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        self.saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = self.on
        torch.backends.cudnn.allow_tf32 = self.on
        return self

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self.saved
        return False


def time_case(case: Case, device: str, warmup: int, repeats: int) -> float:
    """Median time in milliseconds."""
    with _precision_context(case.precision):
        for _ in range(warmup):
            case.run()
        times = []
        if device == "cuda":
            torch.cuda.synchronize()
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                case.run()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            for _ in range(repeats):
                t0 = time.perf_counter()
                case.run()
                times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def kernel_launches(cases: list[Case], device: str) -> list[list[dict]]:
    """Kernels each case launches (name, grid, block, duration), from one profiler pass."""
    from torch.profiler import ProfilerActivity, profile, record_function
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for i, case in enumerate(cases):
            with _precision_context(case.precision), record_function(f"habitat_case_{i}"):
                case.run()
            if device == "cuda":
                torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path)).get("traceEvents", [])
    # A kernel belongs to the case whose GPU-side annotation span contains its start.
    spans = {int(e["name"].rsplit("_", 1)[1]): (e["ts"], e["ts"] + e.get("dur", 0)) for e in events
             if e.get("name", "").startswith("habitat_case_")
             and e.get("cat") == ("gpu_user_annotation" if device == "cuda" else "user_annotation")}
    kind = "kernel" if device == "cuda" else "cpu_op"
    out = []
    for i in range(len(cases)):
        found = []
        if i in spans:
            lo, hi = spans[i]
            found = [e for e in events if e.get("cat") == kind and lo <= e["ts"] <= hi
                     and not e.get("name", "").startswith("habitat_case_")]
        out.append([{"name": e["name"], "grid": e.get("args", {}).get("grid", [1, 1, 1]),
                     "block": e.get("args", {}).get("block", [1, 1, 1]), "dur": e.get("dur", 0)} for e in found])
    return out


def write_rows(out_dir: Path, rows_by_file: dict[str, list[dict]]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in rows_by_file.items():
        shape_cols = [c for c in rows[0] if c not in BASE_COLUMNS]
        with open(out_dir / f"{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=BASE_COLUMNS + shape_cols)
            w.writeheader()
            w.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--dry-run", action="store_true", help="a handful of small shapes (smoke test)")
    p.add_argument("--gemm", type=int, default=1200, help="GEMM shapes (each in 4 precisions)")
    p.add_argument("--conv", type=int, default=300, help="conv shapes (fwd + 2 bwd, 2 precisions)")
    p.add_argument("--attention", type=int, default=200, help="attention shapes (fwd + bwd, backends)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--budget-s", type=float, default=840.0, help="stop measuring new shapes after this")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run on a GPU machine, or use --device cpu --dry-run for a smoke test")
    if args.dry_run:
        args.gemm, args.conv, args.attention, args.warmup, args.repeats = 4, 2, 2, 1, 3
    torch.backends.cudnn.benchmark = True
    rng = torch.Generator().manual_seed(args.seed)
    dev_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    meta = {"Device": dev_name, "Torch Version": torch.__version__,
            "CUDNN Version": torch.backends.cudnn.version() if args.device == "cuda" else "",
            "CUDA Version": torch.version.cuda or ""}
    sms = torch.cuda.get_device_properties(0).multi_processor_count if args.device == "cuda" else 1
    start = time.time()
    rows: dict[str, list[dict]] = {}
    builders = [(gemm_cases, args.gemm), (conv_cases, args.conv), (attention_cases, args.attention)]
    if args.dry_run:
        # tiny shapes only: the point is to exercise every code path quickly
        builders = [(lambda n, d, r: [c for c in gemm_cases(n, d, r) if c.shape["M"] * c.shape["K"] < 2**22][:8], 4),
                    (lambda n, d, r: conv_cases(n, d, r)[:6], 1), (lambda n, d, r: attention_cases(n, d, r)[:4], 1)]
    for build, count in builders:
        batch_size = 16
        remaining = count
        while remaining > 0 and time.time() - start < args.budget_s:
            cases = build(min(batch_size, remaining), args.device, rng)
            remaining -= batch_size
            launches = kernel_launches(cases, args.device)
            for case, kernels in zip(cases, launches):
                latency = time_case(case, args.device, args.warmup, args.repeats)
                longest = max(kernels, key=lambda k: k["dur"]) if kernels else None
                grid = longest["grid"] if longest else [0, 0, 0]
                block = longest["block"] if longest else [0, 0, 0]
                blocks = grid[0] * grid[1] * grid[2]
                row = {"OPName": case.op, "Latency": latency, **meta,
                       "Kernel Name": longest["name"] if longest else "",
                       "Warps per SM": blocks * math.ceil(block[0] * block[1] * block[2] / 32) / sms,
                       "Blocks per SM": blocks / sms,
                       "Grid x": grid[0], "Grid y": grid[1], "Grid z": grid[2],
                       "Block x": block[0], "Block y": block[1], "Block z": block[2],
                       "Kernels": ";" + ";".join(k["name"] for k in kernels),
                       "Precision": case.precision, "Phase": case.phase, **case.shape}
                rows.setdefault(f"{case.op}_{case.precision}", []).append(row)
            if args.device == "cuda":
                torch.cuda.empty_cache()
    write_rows(Path(args.out), rows)
    total = sum(len(r) for r in rows.values())
    print(f"{total} measurements in {time.time() - start:.0f}s -> {args.out} ({', '.join(sorted(rows))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
