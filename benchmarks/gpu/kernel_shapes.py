"""Shapes per op family of the kernel collector (collect_kernels.py): each generator takes a count,
a random.Random and `small` (a dry run's tiny shapes) and returns dicts of the CSV's shape
columns, the same for the same seed. Tensors stay under per-family element caps (the cap names
the largest a device pass must hold). The new families draw about a third of their shapes from
the layers of real networks (network_shapes.py) with a random batch, the rest log-uniformly from
ranges that contain those layers. Torch-free.
"""
from __future__ import annotations

import math
import random
from typing import Any

from network_shapes import BATCHNORM, DEPTHWISE, GROUPED, POINTWISE, layers

# Share of a new family's shapes taken from real networks' layers (none in a dry run).
REAL_SHARE = 1 / 3
# The new families' random ranges (log-uniform, inclusive), each containing its real networks'
# values (network_shapes.py; the tests check it). B of the CNN families is the batch.
RANGES = {
    "gconv": {"B": (1, 256), "Input_Channel": (8, 4096), "Input_Size": (4, 200), "Groups": (2, 64)},
    "pointwise": {"B": (1, 256), "Input_Channel": (4, 4096), "Output_Channel": (4, 4096), "Input_Size": (1, 112)},
    "batchnorm": {"B": (1, 256), "Input_Channel": (8, 2560), "Input_Size": (2, 160)},
}
GROUP_WIDTHS = (2, 4, 8, 16, 24, 32, 48, 64, 128)  # channels per group of a grouped (not depthwise) conv
# Element caps: the largest tensor of a shape (batch x channels x size^2). Real networks' layers
# fit them at a training batch (the tests check it).
CAPS = {"gconv": 2**28, "pointwise": 2**28, "batchnorm": 2**28}
Shape = dict[str, Any]


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


def _real(rng: random.Random, small: bool, table: dict[str, list[tuple]]) -> tuple | None:
    """A real network's layer for about REAL_SHARE of the shapes; None for a random one."""
    if small or rng.random() >= REAL_SHARE:
        return None
    return rng.choice(layers(table))


def _draw(rng: random.Random, family: str, column: str, small_hi: int, small: bool, align: bool = False) -> int:
    """A log-uniform draw from RANGES[family][column] (up to small_hi in a dry run)."""
    lo, hi = RANGES[family][column]
    return _dim(rng, lo, min(hi, small_hi) if small else hi, align)


def _fit(batch: int, size: int, per_pixel: int, cap: int, least: int = 1) -> tuple[int, int]:
    """(batch, size) with batch x per_pixel x size^2 under the cap: the batch halved first, then
    the size (down to `least`)."""
    while batch > 1 and batch * per_pixel * size * size > cap:
        batch //= 2
    while size > least and batch * per_pixel * size * size > cap:
        size = max(least, size // 2)
    return batch, size


def gconv_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """Grouped convolutions, in == out channels: half depthwise (Groups == channels; kernel 3, 5
    or 7, as MobileNet, EfficientNet and ConvNeXt run them), half grouped (channels per group in
    GROUP_WIDTHS, as ResNeXt and RegNet)."""
    out = []
    for i in range(n):
        depthwise = rng.random() < 0.5
        real = _real(rng, small, DEPTHWISE if depthwise else GROUPED)
        if real and depthwise:
            channels, size, ksize, stride = real
            groups = channels
        elif real:
            (channels, groups, size, stride), ksize = real, 3
        else:
            ksize, stride = rng.choice([3, 5, 7]), 1 if rng.random() < 0.7 else 2
            size = _draw(rng, "gconv", "Input_Size", 16, small)
            if depthwise:
                channels = groups = _draw(rng, "gconv", "Input_Channel", 32, small, i % 4 != 3)
            else:
                width = rng.choice(GROUP_WIDTHS[:2] if small else GROUP_WIDTHS)
                groups = _draw(rng, "gconv", "Groups", 4, small)
                while groups > 2 and width * groups > RANGES["gconv"]["Input_Channel"][1]:
                    groups //= 2
                channels = width * groups
        batch, size = _fit(_draw(rng, "gconv", "B", 4, small), size, channels, CAPS["gconv"], ksize)
        out.append({"B": batch, "Input_Channel": channels, "Output_Channel": channels, "Kernel_Szie": ksize,
                    "Input_Size": size, "Stride": stride, "Padding": ksize // 2, "Groups": groups})
    return out


def pointwise_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """1x1 convolutions (conv rows, Kernel_Szie 1): bottleneck and inverted-residual expansions and
    projections, ResNet's strided shortcuts, squeeze-excitation on 1x1 maps (size 1, about one
    in seven random shapes)."""
    out = []
    for i in range(n):
        real = _real(rng, small, POINTWISE)
        if real:
            cin, cout, size, stride = real
        else:
            cin = _draw(rng, "pointwise", "Input_Channel", 32, small, i % 4 != 3)
            cout = _draw(rng, "pointwise", "Output_Channel", 32, small, i % 4 != 3)
            size = 1 if rng.random() < 0.15 else _draw(rng, "pointwise", "Input_Size", 8, small)
            stride = 2 if size > 1 and rng.random() < 0.15 else 1
        batch, size = _fit(_draw(rng, "pointwise", "B", 4, small), size, max(cin, cout), CAPS["pointwise"])
        out.append({"B": batch, "Input_Channel": cin, "Output_Channel": cout, "Kernel_Szie": 1,
                    "Input_Size": size, "Stride": stride, "Padding": 0})
    return out


def batchnorm_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """B x Input_Channel x Input_Size^2 inputs of a 2-D batch norm."""
    out = []
    for _ in range(n):
        real = _real(rng, small, BATCHNORM)
        if real:
            channels, size = real
        else:
            channels = _draw(rng, "batchnorm", "Input_Channel", 32, small, True)
            size = _draw(rng, "batchnorm", "Input_Size", 16, small)
        batch, size = _fit(_draw(rng, "batchnorm", "B", 4, small), size, channels, CAPS["batchnorm"])
        out.append({"B": batch, "Input_Channel": channels, "Input_Size": size})
    return out
