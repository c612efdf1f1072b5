"""Shapes per op family of the kernel collector (collect_kernels.py): each generator takes a count,
a random.Random and `small` (a dry run's tiny shapes) and returns dicts of the CSV's shape
columns, the same for the same seed. Torch-free.
"""
from __future__ import annotations

import math
import random


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
