"""Measures GPU kernels per op family and precision and writes NeuSight-like CSVs (one file per
op and precision) for training the learned models beyond FP32 and beyond NeuSight's GPUs.

    python benchmarks/gpu/collect_kernels.py --out benchmarks/results/kernels/<gpu> [--budget-s 540]
    python benchmarks/gpu/collect_kernels.py --out DIR --families conv,layernorm --budget-s 120
    python benchmarks/gpu/collect_kernels.py --device cpu --dry-run --out /tmp/kernels   # smoke test

Families (--families, comma-separated, default all):
- gemm: bmm and linear in fp32, tf32, bf16, fp16;
- conv: fwd, bwd_data, bwd_weight in fp32 (TF32 off: SIMT kernels), tf32 (cuDNN's default for
  fp32 tensors) and bf16, the tensor-core precisions both NCHW and channels-last (`Layout`);
- attention: F.scaled_dot_product_attention forced to each SDPA backend (flash, efficient,
  cudnn, math where this torch has it); fwd and fwd+bwd; causal and not; bf16, fp16, fp32;
- elementwise (add, mul, div, addu, mulu, relu, gelu, tanh: NeuSight's ops), layernorm (ln fwd,
  bwd), softmax (fwd, bwd), reduction (sum over the last or the first dimension: `Dim`) on
  B x H tensors, and batchnorm (training mode, fwd and fwd+bwd, NCHW and channels-last, B x C x
  Input_Size^2), in fp32 and bf16 (batch norm: bf16 input, fp32 parameters, as under autocast).
--budget-s is split between the selected families (time a family leaves unused goes to the
next), so every selected family is reached.

Per batch of shapes: each case is warmed up first (cuDNN's autotuner, with cudnn.benchmark on,
tries its candidate kernels here); then one torch.profiler pass runs each case --profiled-runs
times: the kernels of those runs alone give the kernel columns (the longest kernel per op is
reported, as NeuSight does, and the distinct kernels of a run in `Kernels`) and
`Kernel Latency`, the median over the runs of the summed durations of the case's kernels (ms,
CUPTI's device time: no launch gaps, no host time, so no harness floor), and `Transform
Latency`, the same for cuDNN's NCHW<->NHWC layout transform kernels alone; then CUDA events time
the case (`Latency`, ms): median of --repeats runs, NeuSight's method (host launch included).
Columns follow NeuSight's plus `Precision`, `Phase`, the two kernel columns and the shape.
Shapes: GEMM A[B,M,N] x B[B,N,K] (N is the reduction, as in NeuSight); conv B, Input_Channel,
Output_Channel, Kernel_Szie, Input_Size, Stride, Padding, Layout; attention (OPName sdpa) B, H,
L, S, E, Causal, Backend; memory-bound ops B, H (and Dim); batch norm (OPName bn) B,
Input_Channel, Input_Size, Layout.
"""
from __future__ import annotations

import argparse
import bisect
import contextlib
import csv
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cudnn_transforms import transform_kind  # noqa: E402  (beside this script)

MEMORY_FAMILIES = ("elementwise", "layernorm", "softmax", "reduction", "batchnorm")
FAMILIES = ("gemm", "conv", "attention") + MEMORY_FAMILIES
# Share of --budget-s per family (renormalised over the selected ones).
FAMILY_WEIGHTS = {"gemm": 0.25, "conv": 0.25, "attention": 0.15, "elementwise": 0.10, "layernorm": 0.06,
                  "softmax": 0.06, "reduction": 0.05, "batchnorm": 0.08}
GEMM_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
# (precision, layout) of each conv case: fp32 with TF32 off runs cuDNN's NCHW SIMT kernels; the
# tensor-core precisions run NHWC kernels, wrapped in layout transforms when given NCHW tensors.
CONV_VARIANTS = (("fp32", "nchw"), ("tf32", "nchw"), ("tf32", "nhwc"), ("bf16", "nchw"), ("bf16", "nhwc"))
MEMORY_PRECISIONS = ("fp32", "bf16")
# NeuSight's element-wise ops (habitat.learned.neusight.ELEMENTWISE_OPS): "u" = with a scalar.
ELEMENTWISE = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
               "addu": lambda x, y: x + 0.5, "mulu": lambda x, y: x * 0.5, "relu": lambda x, y: torch.relu(x),
               "gelu": lambda x, y: torch.nn.functional.gelu(x), "tanh": lambda x, y: torch.tanh(x)}
SHAPES_PER_PASS_DIVISOR = {"attention": 4, "conv": 2}
SDPA_PRECISIONS = ("bf16", "fp16", "fp32")
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
BASE_COLUMNS = ["OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name",
                "Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y",
                "Block z", "CUDA Version", "Kernels", "Precision", "Phase", "Kernel Latency", "Transform Latency"]


@dataclass
class Case:
    op: str                 # bmm, linear, conv, sdpa
    phase: str              # fwd, bwd_data, bwd_weight, fwd+bwd
    precision: str
    shape: dict[str, int | str]
    run: Callable[[], object]

    @property
    def file(self) -> str:
        return f"{self.op}_{self.precision}"


# ----- options --------------------------------------------------------------------------------
def parse_families(text: str) -> tuple[str, ...]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown families {', '.join(unknown) or '(none given)'}; choose from {','.join(FAMILIES)}")
    return tuple(dict.fromkeys(names))  # in the order given, once each


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--families", type=parse_families, default=FAMILIES,
                   help=f"comma-separated subset of {','.join(FAMILIES)} (default: all)")
    p.add_argument("--dry-run", action="store_true", help="a handful of small shapes (smoke test)")
    p.add_argument("--gemm", type=int, default=1200, help="GEMM shapes (each in 4 precisions)")
    p.add_argument("--conv", type=int, default=300,
                   help="conv shapes (fwd + 2 bwd, each in the precisions and layouts of CONV_VARIANTS)")
    p.add_argument("--attention", type=int, default=200,
                   help="attention shapes (each: backends x precisions x causal x fwd, fwd+bwd)")
    p.add_argument("--memory", type=int, default=300,
                   help="shapes per memory-bound family (each in its ops, phases and precisions)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10, help="CUDA-event timings per case (Latency)")
    p.add_argument("--profiled-runs", type=int, default=5,
                   help="runs per case in the profiler pass (Kernel Latency: their median)")
    p.add_argument("--budget-s", type=float, default=840.0,
                   help="total time; split between the families, no new shape batch past it")
    p.add_argument("--batch", type=int, default=16, help="shapes per profiler pass")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.dry_run:
        args.gemm, args.conv, args.attention, args.memory = 4, 2, 2, 2
        args.warmup, args.repeats, args.profiled_runs, args.batch = 1, 3, 2, 4
    return args


def family_budget(remaining_s: float, family: str, left: Iterable[str]) -> float:
    """This family's share of the time still left, `left` being it and the families after it."""
    total = sum(FAMILY_WEIGHTS[f] for f in left)
    return max(0.0, remaining_s) * FAMILY_WEIGHTS[family] / total if total > 0 else 0.0


# ----- shapes (pure Python: no torch, no device) ----------------------------------------------
def _dim(rng: random.Random, lo: int, hi: int, align: bool) -> int:
    x = math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * rng.random())
    v = max(lo, int(round(x)))
    return max(8, (v // 8) * 8) if align and v >= 8 else v


def gemm_shapes(n: int, rng: random.Random, small: bool = False) -> list[tuple[str, dict[str, int]]]:
    """(op, {B, M, N, K}); N is the reduction dimension."""
    out = []
    hi = 256 if small else 8192
    for i in range(n):
        op = "bmm" if i % 2 else "linear"
        align = i % 4 != 3  # mostly tensor-core friendly sizes, some odd ones
        b = _dim(rng, 1, 16 if small else 256, False) if op == "bmm" else 1
        m, k_red, n_out = (_dim(rng, 16, hi, align) for _ in range(3))
        while b * (m * k_red + k_red * n_out + m * n_out) > 2**28:  # keep operands < 1 GiB in fp32
            m = max(8, m // 2)
            n_out = max(8, n_out // 2)
        out.append((op, {"B": b, "M": m, "N": k_red, "K": n_out}))
    return out


def conv_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    out = []
    for _ in range(n):
        ksize = rng.choice([1, 3, 5, 7])
        stride = 1 if rng.random() < 0.7 else 2
        size = _dim(rng, 7, 32 if small else 224, False)
        cin, cout = _dim(rng, 3, 64 if small else 1024, True), _dim(rng, 8, 64 if small else 1024, True)
        batch = _dim(rng, 1, 4 if small else 64, False)
        while batch * max(cin, cout) * size * size > 2**27:
            batch = max(1, batch // 2)
            size = max(ksize, size // 2) if batch == 1 else size
        out.append({"B": batch, "Input_Channel": cin, "Output_Channel": cout, "Kernel_Szie": ksize,
                    "Input_Size": size, "Stride": stride, "Padding": ksize // 2})
    return out


def attention_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    """{B, H, L, S, E}: batch, heads, query and key lengths, head dim. Each shape is measured
    causal and not, so causality is not part of it."""
    out = []
    for _ in range(n):
        batch, heads = _dim(rng, 1, 2 if small else 64, False), _dim(rng, 1 if small else 8, 2 if small else 32, False)
        hi = 256 if small else 8192
        length = _dim(rng, 16 if small else 128, hi, True)
        # Mostly self-attention (S == L), some cross-attention lengths.
        source = length if rng.random() < 0.7 else _dim(rng, 16 if small else 128, hi, True)
        e = rng.choice([32, 64] if small else [64, 128])
        # The math backend materialises B*H*L*S scores (a few copies in fwd+bwd): cap them.
        while batch * heads * length * source > 2**28:
            if batch > 1:
                batch = max(1, batch // 2)
            elif heads > 1:
                heads = max(1, heads // 2)
            else:
                length, source = max(16, length // 2), max(16, source // 2)
        out.append({"B": batch, "H": heads, "L": length, "S": source, "E": e})
    return out


def memory_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    """{B, H}: rows and columns of a memory-bound op's tensor (NeuSight's columns)."""
    out = []
    for i in range(n):
        align = i % 4 != 3
        rows, cols = _dim(rng, 1, 64 if small else 65536, False), _dim(rng, 1, 256 if small else 16384, align)
        while rows * cols > 2**25:  # 128 MiB per fp32 tensor
            rows = max(1, rows // 2)
        out.append({"B": rows, "H": cols})
    return out


def batchnorm_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    out = []
    for _ in range(n):
        batch, channels = _dim(rng, 1, 4 if small else 256, False), _dim(rng, 8, 32 if small else 1024, True)
        size = _dim(rng, 2, 16 if small else 112, False)
        while batch * channels * size * size > 2**25:
            batch = max(1, batch // 2)
            size = max(2, size // 2) if batch == 1 else size
        out.append({"B": batch, "Input_Channel": channels, "Input_Size": size})
    return out


# ----- cases (tensors on the device) ----------------------------------------------------------
def gemm_cases(shapes: list[tuple[str, dict[str, int]]], device: str) -> list[Case]:
    cases = []
    for op, s in shapes:
        b, m, k_red, n_out = s["B"], s["M"], s["N"], s["K"]
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
            cases.append(Case(op, "fwd", prec, dict(s), run))
    return cases


MEMORY_FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}


def conv_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for base in shapes:
        batch, cin, cout = base["B"], base["Input_Channel"], base["Output_Channel"]
        ksize, size, stride, pad = base["Kernel_Szie"], base["Input_Size"], base["Stride"], base["Padding"]
        for prec, layout in CONV_VARIANTS:
            dt, fmt = DTYPES[prec], MEMORY_FORMATS[layout]
            shape = {**base, "Layout": layout}
            x = torch.randn(batch, cin, size, size, device=device, dtype=dt).contiguous(memory_format=fmt)
            w = torch.randn(cout, cin, ksize, ksize, device=device, dtype=dt).contiguous(memory_format=fmt)
            y = torch.nn.functional.conv2d(x, w, stride=stride, padding=pad)
            gy = torch.randn_like(y).contiguous(memory_format=fmt)
            del y

            def bwd(mask, x=x, w=w, gy=gy, stride=stride, pad=pad):
                return torch.ops.aten.convolution_backward(gy, x, w, None, [stride] * 2, [pad] * 2, [1, 1],
                                                           False, [0, 0], 1, mask)
            cases.append(Case("conv", "fwd", prec, dict(shape),
                              lambda x=x, w=w, s=stride, p=pad: torch.nn.functional.conv2d(x, w, stride=s, padding=p)))
            cases.append(Case("conv", "bwd_data", prec, dict(shape), lambda bwd=bwd: bwd([True, False, False])))
            cases.append(Case("conv", "bwd_weight", prec, dict(shape), lambda bwd=bwd: bwd([False, True, False])))
    return cases


def sdpa_backends() -> dict[str, Callable[[], contextlib.AbstractContextManager]]:
    """Backend name -> a context manager forcing it, for the backends this torch has."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3: the older flag-based API (no cuDNN backend)
        flags = {"flash": "enable_flash", "efficient": "enable_mem_efficient", "math": "enable_math"}

        def legacy(name: str) -> Callable[[], contextlib.AbstractContextManager]:
            kw = {f: f == flags[name] for f in flags.values()}
            return lambda: torch.backends.cuda.sdp_kernel(**kw)
        return {name: legacy(name) for name in SDPA_BACKENDS if name in flags}
    members = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
               "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
    return {name: (lambda b=getattr(SDPBackend, members[name]): sdpa_kernel([b]))
            for name in SDPA_BACKENDS if hasattr(SDPBackend, members[name])}


def attention_cases(shapes: list[dict[str, int]], device: str,
                    backends: dict[str, Callable[[], contextlib.AbstractContextManager]] | None = None) -> list[Case]:
    """Every backend x precision x causal x {fwd, fwd+bwd} of each shape. A combination the
    backend does not run (dtype, head dim, device) fails its warm-up and is dropped then."""
    backends = sdpa_backends() if backends is None else backends
    sdpa = torch.nn.functional.scaled_dot_product_attention
    cases = []
    for s in shapes:
        for prec in SDPA_PRECISIONS:
            dt = DTYPES[prec]
            q = torch.randn(s["B"], s["H"], s["L"], s["E"], device=device, dtype=dt, requires_grad=True)
            k, v = (torch.randn(s["B"], s["H"], s["S"], s["E"], device=device, dtype=dt, requires_grad=True)
                    for _ in range(2))
            grad = torch.randn(s["B"], s["H"], s["L"], s["E"], device=device, dtype=dt)
            for name, force in backends.items():
                for causal in (False, True):
                    shape = {**s, "Causal": int(causal), "Backend": name}

                    def fwd(q=q, k=k, v=v, force=force, causal=causal):
                        with force():
                            return sdpa(q, k, v, is_causal=causal)

                    def fwd_bwd(fwd=fwd, q=q, k=k, v=v, grad=grad):
                        return torch.autograd.grad(fwd(), (q, k, v), grad)
                    cases.append(Case("sdpa", "fwd", prec, dict(shape), fwd))
                    cases.append(Case("sdpa", "fwd+bwd", prec, dict(shape), fwd_bwd))
    return cases


def _row_tensors(shapes: list[dict[str, int]], device: str) -> Iterable[tuple[dict[str, int], str, torch.Tensor]]:
    """(shape, precision, a random B x H tensor) for every shape in every MEMORY_PRECISIONS."""
    for s in shapes:
        for prec in MEMORY_PRECISIONS:
            yield s, prec, torch.randn(s["B"], s["H"], device=device, dtype=DTYPES[prec])


def elementwise_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        y = torch.rand_like(x) + 0.5
        cases += [Case(op, "fwd", prec, dict(s), lambda f=f, x=x, y=y: f(x, y)) for op, f in ELEMENTWISE.items()]
    return cases


def layernorm_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        w, b = torch.randn(s["H"], device=device, dtype=x.dtype), torch.randn(s["H"], device=device, dtype=x.dtype)
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [s["H"]], w, b, 1e-5)
        gy = torch.randn_like(x)
        cases.append(Case("ln", "fwd", prec, dict(s),
                          lambda x=x, w=w, b=b: torch.nn.functional.layer_norm(x, x.shape[-1:], w, b)))
        cases.append(Case("ln", "bwd", prec, dict(s), lambda gy=gy, x=x, m=mean, r=rstd, w=w, b=b:
                          torch.ops.aten.native_layer_norm_backward(gy, x, list(x.shape[-1:]), m, r, w, b,
                                                                    [True, True, True])))
    return cases


def softmax_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        y, gy = torch.softmax(x, -1), torch.randn_like(x)
        cases.append(Case("softmax", "fwd", prec, dict(s), lambda x=x: torch.softmax(x, -1)))
        cases.append(Case("softmax", "bwd", prec, dict(s), lambda gy=gy, y=y:
                          torch.ops.aten._softmax_backward_data(gy, y, -1, y.dtype)))
    return cases


def reduction_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """sum over the last dimension (a row reduction, as in a norm's statistics) and over the
    first (a column reduction, as in a bias gradient)."""
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        cases += [Case("sum", "fwd", prec, {**s, "Dim": d}, lambda x=x, d=d: x.sum(dim=d)) for d in (1, 0)]
    return cases


def _no_grad(run: Callable[[], object]) -> object:
    with torch.no_grad():
        return run()


def batchnorm_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """Training-mode batch norm, fp32 parameters and statistics (as under autocast)."""
    cases = []
    bn = torch.nn.functional.batch_norm
    for base in shapes:
        c = base["Input_Channel"]
        for prec in MEMORY_PRECISIONS:
            for layout, fmt in MEMORY_FORMATS.items():
                x = torch.randn(base["B"], c, base["Input_Size"], base["Input_Size"], device=device,
                                dtype=DTYPES[prec]).contiguous(memory_format=fmt).requires_grad_()
                w, b = (torch.randn(c, device=device, requires_grad=True) for _ in range(2))
                mean, var = torch.zeros(c, device=device), torch.ones(c, device=device)
                gy = torch.randn_like(x)

                def fwd(x=x, w=w, b=b, mean=mean, var=var):
                    return bn(x, mean, var, w, b, training=True)

                shape = {**base, "Layout": layout}
                cases.append(Case("bn", "fwd", prec, shape, lambda fwd=fwd: _no_grad(fwd)))
                cases.append(Case("bn", "fwd+bwd", prec, dict(shape),
                                  lambda fwd=fwd, x=x, w=w, b=b, gy=gy: torch.autograd.grad(fwd(), (x, w, b), gy)))
    return cases


BUILDERS: dict[str, tuple[Callable[..., list], Callable[..., list[Case]]]] = {
    "gemm": (gemm_shapes, gemm_cases), "conv": (conv_shapes, conv_cases),
    "attention": (attention_shapes, attention_cases), "elementwise": (memory_shapes, elementwise_cases),
    "layernorm": (memory_shapes, layernorm_cases), "softmax": (memory_shapes, softmax_cases),
    "reduction": (memory_shapes, reduction_cases), "batchnorm": (batchnorm_shapes, batchnorm_cases)}


# ----- measuring ------------------------------------------------------------------------------
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


def _precision_context(prec: str) -> contextlib.AbstractContextManager:
    return _Tf32(prec == "tf32")


@contextlib.contextmanager
def _quiet():
    """Forcing one SDPA backend warns for every shape it rejects: those cases are dropped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def warm_up(cases: list[Case], device: str, runs: int, deadline: float = math.inf) -> list[Case]:
    """Runs each case `runs` times (at least once) outside any measurement: cuDNN's autotuner
    tries its candidates here, so they never reach the kernel list. Cases that fail (a backend
    that does not run this shape or dtype, out of memory) are dropped, and so are the cases
    left when the deadline (time.time()) passes."""
    kept = []
    for case in cases:
        if time.time() > deadline:
            break
        try:
            with _quiet(), _precision_context(case.precision):
                for _ in range(max(1, runs)):
                    case.run()
            kept.append(case)
        except (RuntimeError, NotImplementedError, ValueError):
            pass
        if device == "cuda":
            torch.cuda.synchronize()
    return kept


def time_case(case: Case, device: str, warmup: int, repeats: int) -> float:
    """Median time in milliseconds."""
    with _quiet(), _precision_context(case.precision):
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


def _outermost(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events not inside another of the same thread (CPU ops nest; their durations would
    count twice)."""
    out: list[dict[str, Any]] = []
    end: dict[Any, float] = {}
    for e in sorted(events, key=lambda e: (e["ts"], -e.get("dur", 0))):
        tid = e.get("tid")
        if e["ts"] >= end.get(tid, -math.inf):
            out.append(e)
            end[tid] = e["ts"] + e.get("dur", 0)
    return out


# Chrome-trace categories of the CUDA API calls that launch kernels (any thread): a kernel's
# `correlation` names the call that launched it.
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
CASE_SPAN = "habitat_case_"


def case_spans(events: list[dict[str, Any]]) -> dict[int, tuple[float, float]]:
    """CPU time span (start, end, us) of each run `habitat_case_<i>` (record_function's
    `user_annotation` events, on the thread that ran the case)."""
    return {int(e["name"][len(CASE_SPAN):]): (e["ts"], e["ts"] + e.get("dur", 0)) for e in events
            if e.get("cat") == "user_annotation" and e.get("name", "").startswith(CASE_SPAN)}


def _kernel_run(kernel: dict[str, Any], launches: dict[Any, float], spans: list[tuple[float, float, int]],
                starts: list[float]) -> int | None:
    """The run a kernel belongs to. Its launch (the CUDA call with its correlation id, on any
    thread: autograd launches the backward from its own thread, outside the record_function of
    the caller's thread, which only gpu_user_annotation spans would see) lies inside the run's
    CPU span. Without a launch record, its GPU start (Kineto aligns the GPU clock to the CPU's)
    lies between the run's start and the next run's: every run ends with a synchronize."""
    launch = launches.get(kernel.get("args", {}).get("correlation"))
    at = kernel["ts"] if launch is None else launch
    k = bisect.bisect_right(starts, at) - 1
    if k < 0:
        return None
    lo, hi, run = spans[k]
    return run if launch is None or at <= hi else None


def assign_kernels(events: list[dict[str, Any]], n: int, device: str) -> list[list[dict[str, Any]]]:
    """Kernels of each of `n` runs `habitat_case_<i>` from a chrome trace's events (on CUDA, see
    _kernel_run). On the CPU (smoke tests) the outermost CPU ops inside a run's span stand in
    for kernels."""
    spans = case_spans(events)
    found: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    if device == "cuda":
        launches = {e["args"]["correlation"]: e["ts"] for e in events
                    if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})}
        ordered = sorted((lo, hi, i) for i, (lo, hi) in spans.items())
        starts = [lo for lo, _, _ in ordered]
        for e in events:
            if e.get("cat") == "kernel":
                run = _kernel_run(e, launches, ordered, starts)
                if run is not None and run < n:
                    found[run].append(e)
    else:
        for i, (lo, hi) in spans.items():
            if i < n:
                found[i] = _outermost([e for e in events if e.get("cat") == "cpu_op" and lo <= e["ts"] <= hi])
    return [[{"name": e["name"], "grid": e.get("args", {}).get("grid", [1, 1, 1]),
              "block": e.get("args", {}).get("block", [1, 1, 1]), "dur": e.get("dur", 0)}
             for e in sorted(run, key=lambda e: e["ts"])] for run in found]


def kernel_launches(cases: list[Case], device: str, runs: int = 1) -> list[list[list[dict[str, Any]]]]:
    """Kernels of `runs` runs of each case (warmed up before: see warm_up), from one profiler
    pass: [case][run] -> the run's kernels in launch order."""
    from torch.profiler import ProfilerActivity, profile, record_function
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    runs = max(1, runs)
    with profile(activities=activities) as prof:
        for i, case in enumerate(cases):
            for r in range(runs):
                with _quiet(), _precision_context(case.precision), record_function(f"habitat_case_{i * runs + r}"):
                    case.run()
                if device == "cuda":
                    torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    spans = assign_kernels(events, len(cases) * runs, device)
    stray = sum(1 for e in events if e.get("cat") == "kernel") - sum(len(s) for s in spans)
    if stray:
        print(f"warning: {stray} kernels launched outside every case's span (left out)", file=sys.stderr)
    return [spans[i * runs:(i + 1) * runs] for i in range(len(cases))]


def is_transform(kernel_name: str) -> bool:
    """cuDNN's layout transforms around NHWC kernels given NCHW tensors: `Transform Latency` sums them."""
    return transform_kind(kernel_name) is not None


def kernel_latency_ms(runs: list[list[dict[str, Any]]], select: Callable[[str], bool] = lambda name: True) -> float:
    """Median over the runs of the summed durations (profiler us) of the selected kernels, in ms."""
    sums = [sum(k["dur"] for k in run if select(k["name"])) for run in runs]
    return statistics.median(sums) / 1000.0 if sums else 0.0


def unique_names(kernels: list[dict[str, Any]]) -> list[str]:
    """Distinct kernel names in launch order."""
    return list(dict.fromkeys(k["name"] for k in kernels))


def make_row(case: Case, latency_ms: float, runs: list[list[dict[str, Any]]], meta: dict[str, Any],
             sms: int) -> dict[str, Any]:
    """The CSV row of one case: `runs` are the kernels of its profiled runs (the first one names
    the kernels)."""
    kernels = runs[0] if runs else []
    longest = max(kernels, key=lambda k: k["dur"]) if kernels else None
    grid = list(longest["grid"]) if longest else [0, 0, 0]
    block = list(longest["block"]) if longest else [0, 0, 0]
    blocks = grid[0] * grid[1] * grid[2]
    return {"OPName": case.op, "Latency": latency_ms, **meta,
            "Kernel Name": longest["name"] if longest else "",
            "Warps per SM": blocks * math.ceil(block[0] * block[1] * block[2] / 32) / sms,
            "Blocks per SM": blocks / sms,
            "Grid x": grid[0], "Grid y": grid[1], "Grid z": grid[2],
            "Block x": block[0], "Block y": block[1], "Block z": block[2],
            "Kernels": ";" + ";".join(unique_names(kernels)),
            "Precision": case.precision, "Phase": case.phase,
            "Kernel Latency": kernel_latency_ms(runs), "Transform Latency": kernel_latency_ms(runs, is_transform),
            **case.shape}


def write_rows(out_dir: Path, rows_by_file: dict[str, list[dict[str, Any]]]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, rows in sorted(rows_by_file.items()):
        if not rows:
            continue
        shape_cols = list(dict.fromkeys(c for r in rows for c in r if c not in BASE_COLUMNS))
        path = out_dir / f"{name}.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=BASE_COLUMNS + shape_cols)
            w.writeheader()
            w.writerows(rows)
        written.append(path)
    return written


def measure(cases: list[Case], device: str, warmup: int, repeats: int, meta: dict[str, Any],
            sms: int, deadline: float = math.inf, profiled_runs: int = 1) -> list[dict[str, Any]]:
    """Rows for a batch of cases: warm-up (autotuning) first, then the kernels of
    `profiled_runs` runs per case, then the timing. Cases not warmed up by the deadline are
    left out."""
    cases = warm_up(cases, device, warmup, deadline)
    launches = kernel_launches(cases, device, profiled_runs) if cases else []
    rows = []
    for case, runs in zip(cases, launches):
        try:
            latency = time_case(case, device, 1, repeats)
        except RuntimeError:
            continue
        rows.append(make_row(case, latency, runs, meta, sms))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run on a GPU machine, or use --device cpu --dry-run for a smoke test")
    torch.backends.cudnn.benchmark = True
    rng = random.Random(args.seed)
    dev_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    meta = {"Device": dev_name, "Torch Version": torch.__version__,
            "CUDNN Version": torch.backends.cudnn.version() if args.device == "cuda" else "",
            "CUDA Version": torch.version.cuda or ""}
    sms = torch.cuda.get_device_properties(0).multi_processor_count if args.device == "cuda" else 1
    counts = {"gemm": args.gemm, "conv": args.conv, "attention": args.attention,
              **{f: args.memory for f in MEMORY_FAMILIES}}
    start = time.time()
    rows: dict[str, list[dict[str, Any]]] = {}
    families = list(args.families)
    for i, family in enumerate(families):
        t_family = time.time()
        budget = family_budget(args.budget_s - (t_family - start), family, families[i:])
        make_shapes, make_cases = BUILDERS[family]
        remaining, measured = counts[family], 0
        deadline = t_family + budget
        # An attention shape is up to 48 cases (backends x precisions x causal x phases), a conv
        # shape 15 holding their own tensors (up to 2^27 elements each): fewer shapes per pass.
        batch = max(1, args.batch // SHAPES_PER_PASS_DIVISOR.get(family, 1))
        while remaining > 0 and time.time() < deadline:
            shapes = make_shapes(min(batch, remaining), rng, small=args.dry_run)
            remaining -= len(shapes)
            for row in measure(make_cases(shapes, args.device), args.device, args.warmup,
                               args.repeats, meta, sms, deadline, args.profiled_runs):
                rows.setdefault(f"{row['OPName']}_{row['Precision']}", []).append(row)
                measured += 1
            if args.device == "cuda":
                torch.cuda.empty_cache()
        print(f"{family}: {measured} measurements in {time.time() - t_family:.0f} s "
              f"(budget {budget:.0f} s, {max(0, remaining)} shapes left)", flush=True)
        write_rows(Path(args.out), rows)  # after every family: a run cut short keeps what it measured
    total = sum(len(r) for r in rows.values())
    print(f"{total} measurements in {time.time() - start:.0f}s -> {args.out} ({', '.join(sorted(rows))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
