"""Feature vectors of the learned models. csrc/src/learned/learned_features.cpp computes the same
numbers from an OpRecord; tests/python/learned/test_learned_parity.py checks they agree.

Why twice (issue 33 asked for once or a reason): the trainer and `habitat.evaluate` compute
features for device tables the engine cannot load (`python -m habitat.learned.train --devices`
takes partial entries, only what these features need; DeviceDatabase refuses them), column-wise
over a whole collection. Speed is not the reason: the engine's binding
(`habitat._engine.learned_features`) takes 2.5 us a row on the 2-core CI machine (2026-11-27),
75 ms for a 30k-row collection. Changing a feature means changing both; the parity test fails
until they agree.

Every family predicts an *efficiency* against its roofline time on the target, so the
time it forecasts is never below the roofline (up to the head's 1/E_MAX slack). Shape
columns per family (all numbers, one row per op):

gemm         b, m, n, k, elem_bytes       C[b,m,n] = A[b,m,k] @ B[b,k,n] (k: reduction)
conv         batch, cin, cout, kernel, size, stride, padding, elem_bytes, grad, groups  (square
             2-D; grad 0: forward, 1: input (data) gradient, 2: weight gradient; groups: cin and
             cout split into that many independent convolutions, 1 when left out)
elementwise  n, inputs, transcendental, elem_bytes   (inputs: tensors read of size n)
softmax      rows, cols, elem_bytes, backward, log   (row-wise over the last dim; backward 1: the
             gradient op, _softmax_backward_data; log 1: log-softmax; a shape without `log` is
             a softmax's)
layernorm    rows, cols, elem_bytes, backward   (backward 1: native_layer_norm_backward: the input
             and the weight gradients)
attention    batch_heads, l, s, e, causal, backward, elem_bytes, backend   (a fused SDPA kernel:
             softmax(Q K^T) V with Q [bh, l, e], K and V [bh, s, e]; backward 1: its gradient op;
             backend 0: flash, 1: memory-efficient, 2: cuDNN (neusight.SDPA_BACKENDS))
reduction    rows, cols, elem_bytes, strided   (sum, mean: rows outputs of cols inputs each;
             strided 1: the reduced elements are not the innermost ones, a column sum)
batchnorm    count, channels, elem_bytes, backward, channels_last   (training mode; per channel,
             statistics over count = N x H x W elements; backward 1: the gradient op)
"""
from __future__ import annotations

import numpy as np

from habitat.learned.devices import DeviceSpec

FAMILIES = ("gemm", "conv", "elementwise", "softmax", "layernorm", "attention", "reduction", "batchnorm")

SHAPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("b", "m", "n", "k", "elem_bytes"),
    "conv": ("batch", "cin", "cout", "kernel", "size", "stride", "padding", "elem_bytes", "grad", "groups"),
    "elementwise": ("n", "inputs", "transcendental", "elem_bytes"),
    "softmax": ("rows", "cols", "elem_bytes", "backward", "log"),
    "layernorm": ("rows", "cols", "elem_bytes", "backward"),
    "attention": ("batch_heads", "l", "s", "e", "causal", "backward", "elem_bytes", "backend"),
    "reduction": ("rows", "cols", "elem_bytes", "strided"),
    "batchnorm": ("count", "channels", "elem_bytes", "backward", "channels_last"),
}
# Columns a shape may leave out, and their value then (a softmax that is not a log-softmax).
OPTIONAL_COLUMNS: dict[str, dict[str, float]] = {"softmax": {"log": 0.0}, "conv": {"groups": 1.0}}

# The device enters only through quantities relative to the op (roofline times, waves,
# intensity over the ridge point, bytes over L2): with five training GPUs, absolute device
# figures would let the model memorise each GPU instead of learning what carries over.
DEVICE_FEATURES: tuple[str, ...] = ()
_GEMM_CORE = ("log2_t_compute_us", "log2_t_memory_us", "log2_intensity_over_ridge",
              "log2_waves_64", "wave_fill_64", "log2_waves_128", "wave_fill_128",
              "log2_bytes_over_l2")
# Precision enters as the unit the work runs on (tensor_path: 1 when the target lists a peak
# for the op's precision, i.e. has faster units than FP32 SIMT for it) and the operand width;
# the roofline times above already use that precision's peak. fp16 and bf16 are the same to
# the model (same width, same peak on every GPU here).
# log2_align: log2 of the operands' alignment in bytes, capped at 16 (the largest power of two
# dividing the leading dimensions' byte widths, k and n of a GEMM, channels of a conv): cuBLAS
# and cuDNN run tensor-core kernels at full rate only on 16-byte aligned rows and fall back to
# narrower loads (align1/align2 kernels, 2-10x slower on the H100 data) below that.
_PRECISION = ("tensor_path", "log2_elem_bytes", "log2_align")
MAX_ALIGN_BYTES = 16.0
# The memory-bound families (elementwise, softmax, layernorm) also get the operand width (the
# NeuSight rows are all fp32, the traced Hopper rows fp32 and bf16) and one device figure,
# the DRAM bandwidth per SM in GB/s: how much traffic each SM must keep in flight to reach the
# roofline. On the NeuSight GPUs (8-14 GB/s per SM) a memory-bound kernel reaches a smaller
# share of its roofline than on Hopper (25-36): without it the models forecast H100/H200
# element-wise ops 1.3-1.4x too slow, layer norm 2x (benchmarks/results/kernels/hopper-traces).
_MEMORY = ("log2_elem_bytes", "log2_bandwidth_per_sm")
MEMORY_FAMILIES = ("elementwise", "softmax", "layernorm", "reduction", "batchnorm")
# The 0/1 columns of the row-wise memory-bound families, last among their features.
ROW_FLAGS = {"softmax": ("backward", "log"), "layernorm": ("backward",), "reduction": ("strided",),
             "batchnorm": ("backward", "channels_last")}
FEATURE_NAMES: dict[str, tuple[str, ...]] = {
    "gemm": ("log2_b", "log2_m", "log2_n", "log2_k") + _GEMM_CORE + _PRECISION + ("simt_lanes",) + DEVICE_FEATURES,
    "conv": ("log2_batch", "log2_cin", "log2_cout", "kernel", "stride", "log2_size",
             "log2_gemm_m", "log2_gemm_k") + _GEMM_CORE + _PRECISION + ("grad_data", "grad_weight", "log2_groups")
            + DEVICE_FEATURES,
    "elementwise": ("log2_n", "inputs", "transcendental", "log2_t_memory_us",
                    "log2_bytes_over_l2", "log2_blocks_per_sm") + _MEMORY + DEVICE_FEATURES,
    "softmax": ("log2_rows", "log2_cols", "log2_t_memory_us", "log2_bytes_over_l2",
                "log2_rows_per_sm") + _MEMORY + ("backward", "log") + DEVICE_FEATURES,
    "layernorm": ("log2_rows", "log2_cols", "log2_t_memory_us", "log2_bytes_over_l2",
                  "log2_rows_per_sm") + _MEMORY + ("backward", "vectorized") + DEVICE_FEATURES,
    "attention": ("log2_bh", "log2_l", "log2_s", "log2_e", "causal", "backward", "log2_t_compute_us",
                  "log2_t_memory_us", "log2_intensity_over_ridge", "log2_waves_128", "wave_fill_128",
                  "tensor_path", "log2_elem_bytes", "backend_efficient", "backend_cudnn", "log2_tile_waste")
                 + DEVICE_FEATURES,
    "reduction": ("log2_rows", "log2_cols", "log2_t_memory_us", "log2_bytes_over_l2",
                  "log2_rows_per_sm") + _MEMORY + ("strided",) + DEVICE_FEATURES,
    "batchnorm": ("log2_count", "log2_channels", "log2_t_memory_us", "log2_bytes_over_l2",
                  "log2_channels_per_sm") + _MEMORY + ("backward", "channels_last") + DEVICE_FEATURES,
}


# Fused attention: the backward recomputes S = Q K^T and runs dV, dP, dQ, dK (2.5x the forward's
# matrix work); a causal mask skips the score tiles it hides (causal_share). Query rows per
# thread block.
ATTENTION_BACKWARD_FLOPS = 2.5
ATTENTION_BLOCK_ROWS = 128.0
# The fused kernels walk the score matrix in tiles (query blocks of up to ATTENTION_BLOCK_ROWS,
# key blocks of 64 or more): a length that is not a multiple pays for the whole last tile.
# log2_tile_waste is log2 of l rounded up to 128 times s rounded up to 64, over l x s (ViT's 197
# tokens: 256 x 256, 1.69x). Measured on the H100's held-out problems, 128 x 64 beat 64 x 64
# (weights/README.md).
ATTENTION_KEY_TILE = 64.0


def causal_share(l: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The share of an l x s score matrix SDPA's causal mask keeps (top-left: query i sees keys
    0..i): l / 2s when l <= s, 1 - s / 2l when l > s, one half for an empty one, as
    csrc/src/cost/attention_problem.cpp causal_share."""
    l, s = np.asarray(l, dtype=np.float64), np.asarray(s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(l <= s, l / (2.0 * s), 1.0 - s / (2.0 * l))
    return np.where((l > 0) & (s > 0), share, 0.5)


def tile_waste(l: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The l x s score matrix rounded up to whole tiles over l x s; 1 when empty."""
    l, s = np.asarray(l, dtype=np.float64), np.asarray(s, dtype=np.float64)
    padded = (np.ceil(l / ATTENTION_BLOCK_ROWS) * ATTENTION_BLOCK_ROWS
              * np.ceil(s / ATTENTION_KEY_TILE) * ATTENTION_KEY_TILE)
    return np.where((l > 0) & (s > 0), padded / np.maximum(l * s, 1.0), 1.0)


# FLOPs per element of the row-wise families (max, sub, exp, sum, div; mean, var, scale).
SOFTMAX_FLOPS_PER_ELEMENT = 5.0
SOFTMAX_BACKWARD_MUL_PASSES = 3.0
LAYERNORM_FLOPS_PER_ELEMENT = 8.0
# PyTorch's CUDA layer norm runs its one-pass vectorized kernel (4-wide loads, one block per row)
# only when the normalised size is a multiple of 4 (aten/src/ATen/native/cuda/layer_norm_kernel.cu,
# LayerNormKernelImplInternal), else two scalar kernels: up to 5x slower on the H100 rows.
LAYERNORM_VECTOR = 4
REDUCTION_FLOPS_PER_ELEMENT = 1.0
BATCHNORM_FLOPS_PER_ELEMENT = 8.0
TRANSCENDENTAL_FLOPS = 16.0  # an exp/tanh/pow costs about this many FP32 operations
ELEMENTWISE_BLOCK_ELEMENTS = 512.0  # 128 threads x 4 elements (PyTorch's vectorised loop)


def _log2(x: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(x, 1e-30))


def _waves(blocks: np.ndarray, sms: int) -> tuple[np.ndarray, np.ndarray]:
    waves = np.ceil(blocks / sms)
    return blocks / sms, blocks / (waves * sms)


MATRIX_PRECISIONS = ("tf32", "fp16", "bf16", "fp8")


def _row_precisions(precision: str | np.ndarray, n: int) -> np.ndarray:
    p = np.asarray(precision, dtype=object)
    return np.full(n, str(p), dtype=object) if p.ndim == 0 else p


def _peaks(dev: DeviceSpec, precision: np.ndarray) -> np.ndarray:
    return np.array([dev.peak_flops(str(p)) for p in precision], dtype=np.float64)


def tensor_path(dev: DeviceSpec, precision: np.ndarray) -> np.ndarray:
    """1 where the op's precision runs on units of its own (the device lists its peak)."""
    return np.array([1.0 if p in MATRIX_PRECISIONS and dev.peak_tflops.get(str(p)) else 0.0
                     for p in precision], dtype=np.float64)


def simt_lanes(dev: DeviceSpec, on_tensor_path: np.ndarray) -> np.ndarray:
    """log2 of the FP32 lanes per SM per clock on the FP32 SIMT path (0 on tensor cores): 64 on
    Volta, Turing and A100, 128 on Ada, Hopper and GA10x, whose second half shares its issue
    slots. Large FP32 GEMMs reach 93 % of the A100's peak in NeuSight's model nodes but 74 % of
    the H100's in its device-time rows; without it the H100's share was forecast for the A100
    (its GEMMs 1.23x high, evaluate distributed)."""
    per_clock = 2.0 * dev.sms * dev.clock_mhz * 1e6
    peak = dev.peak_flops("fp32")
    lanes = float(np.log2(peak / per_clock)) if per_clock > 0 and peak > 0 else 0.0
    return np.where(on_tensor_path > 0, 0.0, lanes)


def _pow2_part(x: np.ndarray) -> np.ndarray:
    """Largest power of two dividing each (integer-valued) x, at most MAX_ALIGN_BYTES."""
    v = np.maximum(np.round(x), 1.0).astype(np.int64)
    return np.minimum((v & -v).astype(np.float64), MAX_ALIGN_BYTES)


def log2_align(a: np.ndarray, b: np.ndarray, elem_bytes: np.ndarray) -> np.ndarray:
    return np.log2(np.minimum(_pow2_part(a * elem_bytes), _pow2_part(b * elem_bytes)))


def _gemm_core(b, m, n, k, flops, nbytes, dev: DeviceSpec, precision: np.ndarray):
    peak = _peaks(dev, precision)
    bw = dev.bandwidth_gbs * 1e9
    t_c = flops / peak * 1e6
    t_m = nbytes / bw * 1e6
    ridge = peak / bw
    cols = [_log2(t_c), _log2(t_m), _log2(flops / nbytes / ridge)]
    for tile in (64.0, 128.0):
        blocks = b * np.ceil(m / tile) * np.ceil(n / tile)
        waves, fill = _waves(blocks, dev.sms)
        cols += [_log2(waves), fill]
    cols.append(_log2(nbytes / (dev.l2_mb * 1048576.0)))
    return cols, np.maximum(t_c, t_m)


def _conv_out(s: dict[str, np.ndarray]) -> np.ndarray:
    return np.floor((s["size"] + 2.0 * s["padding"] - s["kernel"]) / s["stride"]) + 1.0


def conv_input_extent(size: np.ndarray, kernel: np.ndarray, stride: np.ndarray, out: np.ndarray,
                      grad: np.ndarray) -> np.ndarray:
    """Rows (and columns) of the input a pass touches: a filter narrower than its stride reads
    `kernel` of every `stride` rows (a 1x1 stride-2 convolution a quarter of its input); the
    data gradient writes the whole input gradient, zeros included. Mirrors
    csrc/include/habitat/learned_features.h conv_input_extent."""
    read = np.minimum(size, (out - 1.0) * np.minimum(kernel, stride) + kernel)
    return np.where(grad == 1, size, read)


def conv_tensor_elements(batch: np.ndarray, cin: np.ndarray, cout: np.ndarray, kernel: np.ndarray,
                         input_side: np.ndarray, out: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Elements of a conv's input (`input_side` rows and columns of it), weight (cout x cin /
    groups x kernel^2) and output. Mirrors csrc/include/habitat/learned_features.h."""
    return (batch * cin * input_side * input_side + cout * cin / groups * kernel * kernel
            + batch * cout * out * out)


def _check_groups(s: dict[str, np.ndarray]) -> None:
    g = s["groups"]
    if np.any((g < 1) | (np.mod(s["cin"], g) != 0) | (np.mod(s["cout"], g) != 0)):
        raise ValueError("conv column 'groups' must be at least 1 and divide both cin and cout")


def _memory_cols(elem_bytes: np.ndarray, dev: DeviceSpec) -> list[np.ndarray]:
    return [_log2(elem_bytes), np.full(len(elem_bytes), np.log2(dev.bandwidth_gbs / dev.sms))]


def _columns(family: str, shapes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The family's shape columns as float arrays; an optional column a shape lacks is its default."""
    optional = OPTIONAL_COLUMNS.get(family, {})
    missing = [c for c in SHAPE_COLUMNS[family] if c not in shapes and c not in optional]
    if missing:
        raise KeyError(f"{family} shape lacks column {missing[0]!r}")
    n = np.shape(np.asarray(next(iter(shapes.values()))))
    return {c: np.asarray(shapes[c], dtype=np.float64) if c in shapes else np.full(n, optional[c])
            for c in SHAPE_COLUMNS[family]}


def work(family: str, shapes: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and bytes moved of each row (device-independent)."""
    s = _columns(family, shapes)
    eb = s["elem_bytes"]
    if family == "gemm":
        b, m, n, k = s["b"], s["m"], s["n"], s["k"]
        return 2.0 * b * m * n * k, eb * b * (m * k + k * n + m * n)
    if family == "conv":
        batch, cin, cout, r, size = s["batch"], s["cin"], s["cout"], s["kernel"], s["size"]
        _check_groups(s)
        out = _conv_out(s)
        flops = 2.0 * (batch * out * out) * cout * (cin / s["groups"] * r * r)
        extent = conv_input_extent(size, r, s["stride"], out, s["grad"])
        return flops, eb * conv_tensor_elements(batch, cin, cout, r, extent, out, s["groups"])
    if family == "elementwise":
        n, inputs, trans = s["n"], s["inputs"], s["transcendental"]
        return n * (1.0 + TRANSCENDENTAL_FLOPS * trans), eb * n * (inputs + 1.0)
    if family == "attention":
        bh, l, sk, e = s["batch_heads"], s["l"], s["s"], s["e"]
        scale = (np.where(s["causal"] > 0, causal_share(l, sk), 1.0)
                 * np.where(s["backward"] > 0, ATTENTION_BACKWARD_FLOPS, 1.0))
        flops = 4.0 * bh * l * sk * e * scale
        # forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and writes dQ, dK, dV
        tensors = np.where(s["backward"] > 0, 4.0, 2.0) * (l + sk) * e
        return flops, eb * bh * tensors
    if family in ("softmax", "layernorm"):
        rows, ncols, backward = s["rows"], s["cols"], s["backward"]
        per = SOFTMAX_FLOPS_PER_ELEMENT if family == "softmax" else LAYERNORM_FLOPS_PER_ELEMENT
        # forward: reads x, writes y; backward: reads y (or x) and dy, writes dx
        passes = 2.0 + backward
        if family == "softmax":
            # CUDA's softmax backward first writes dy * y (a mul kernel, three passes;
            # SoftMax.cu softmax_backward_cuda_out), then reads it and y and writes dx; the
            # log-softmax backward is the one kernel
            passes = passes + SOFTMAX_BACKWARD_MUL_PASSES * backward * (1.0 - s["log"])
        nbytes = eb * rows * ncols * passes
        if family == "layernorm":
            nbytes = nbytes + eb * 2.0 * ncols
        return per * rows * ncols * (1.0 + backward), nbytes
    if family == "reduction":  # reads the input once, writes one element per row
        rows, ncols = s["rows"], s["cols"]
        return REDUCTION_FLOPS_PER_ELEMENT * rows * ncols, eb * rows * (ncols + 1.0)
    if family == "batchnorm":
        # forward: reads x, writes y; backward: reads x and dy, writes dx (per-channel statistics
        # and fp32 parameters: negligible)
        elements, backward = s["count"] * s["channels"], s["backward"]
        return BATCHNORM_FLOPS_PER_ELEMENT * elements * (1.0 + backward), eb * elements * (2.0 + backward)
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def compute(family: str, shapes: dict[str, np.ndarray], dev: DeviceSpec,
            precision: str | np.ndarray = "fp32") -> tuple[np.ndarray, np.ndarray]:
    """Returns (features [N, F] float64, roofline time in microseconds [N]). `precision` is one
    name for every row or one per row (GEMM and conv; the other families run on SIMT units)."""
    flops, nbytes = work(family, shapes)  # raises for an unknown family
    s = _columns(family, shapes)
    bw = dev.bandwidth_gbs * 1e9
    prec = _row_precisions(precision, len(flops))
    if family == "gemm":
        b, m, n, k = s["b"], s["m"], s["n"], s["k"]
        core, t_roof = _gemm_core(b, m, n, k, flops, nbytes, dev, prec)
        tensor = tensor_path(dev, prec)
        cols = [_log2(b), _log2(m), _log2(n), _log2(k)] + core + [tensor, _log2(s["elem_bytes"]),
                                                               log2_align(k, n, s["elem_bytes"]),
                                                               simt_lanes(dev, tensor)]
    elif family == "conv":
        # A grouped convolution is `groups` independent ones of cin / groups -> cout / groups
        # channels: its channel, implicit-GEMM and alignment features are one group's, its
        # tiles (waves) all groups', and log2_groups tells the grouped kernels apart.
        groups = s["groups"]
        batch, cin, cout, r = s["batch"], s["cin"] / groups, s["cout"] / groups, s["kernel"]
        size, stride = s["size"], s["stride"]
        out = _conv_out(s)
        gm, gn, gk = batch * out * out, cout, cin * r * r
        core, t_roof = _gemm_core(groups, gm, gn, gk, flops, nbytes, dev, prec)
        grad = s["grad"]
        if np.any((grad != 0) & (grad != 1) & (grad != 2)):
            raise ValueError("conv column 'grad' must be 0 (forward), 1 (data gradient) or 2 (weight gradient)")
        cols = ([_log2(batch), _log2(cin), _log2(cout), r, stride, _log2(size), _log2(gm), _log2(gk)] + core
                + [tensor_path(dev, prec), _log2(s["elem_bytes"]), log2_align(cin, cout, s["elem_bytes"]),
                   (grad == 1).astype(np.float64),
                   (grad == 2).astype(np.float64), _log2(groups)])
    elif family == "attention":
        bh, l, sk, e = s["batch_heads"], s["l"], s["s"], s["e"]
        for c in ("causal", "backward"):
            if np.any((s[c] != 0) & (s[c] != 1)):
                raise ValueError(f"attention column {c!r} must be 0 or 1")
        if np.any(~np.isin(s["backend"], (0.0, 1.0, 2.0))):
            raise ValueError("attention column 'backend' must be 0 (flash), 1 (memory-efficient) or 2 (cuDNN)")
        peak = _peaks(dev, prec)
        t_c = flops / peak * 1e6
        t_m = nbytes / bw * 1e6
        t_roof = np.maximum(t_c, t_m)
        waves, fill = _waves(bh * np.ceil(l / ATTENTION_BLOCK_ROWS), dev.sms)
        cols = [_log2(bh), _log2(l), _log2(sk), _log2(e), s["causal"], s["backward"], _log2(t_c), _log2(t_m),
                _log2(flops / nbytes / (peak / bw)), _log2(waves), fill, tensor_path(dev, prec),
                _log2(s["elem_bytes"]), (s["backend"] == 1).astype(np.float64), (s["backend"] == 2).astype(np.float64),
                _log2(tile_waste(l, sk))]
    elif family == "elementwise":
        n, inputs, trans = s["n"], s["inputs"], s["transcendental"]
        t_m = nbytes / bw * 1e6
        t_roof = np.maximum(t_m, flops / dev.peak_flops("fp32") * 1e6)
        blocks = np.ceil(n / ELEMENTWISE_BLOCK_ELEMENTS)
        cols = [_log2(n), inputs, trans, _log2(t_m), _log2(nbytes / (dev.l2_mb * 1048576.0)),
                _log2(blocks / dev.sms)] + _memory_cols(s["elem_bytes"], dev)
    else:  # the row-wise memory-bound families: softmax, layernorm, reduction, batchnorm
        flags = ROW_FLAGS[family]
        for c in flags:
            if np.any((s[c] != 0) & (s[c] != 1)):
                raise ValueError(f"{family} column {c!r} must be 0 or 1")
        # batchnorm's channels are its parallel work (the others': their rows)
        rows, ncols = (s["count"], s["channels"]) if family == "batchnorm" else (s["rows"], s["cols"])
        per_sm = ncols if family == "batchnorm" else rows
        t_m = nbytes / bw * 1e6
        t_roof = np.maximum(t_m, flops / dev.peak_flops("fp32") * 1e6)
        cols = [_log2(rows), _log2(ncols), _log2(t_m), _log2(nbytes / (dev.l2_mb * 1048576.0)),
                _log2(per_sm / dev.sms)] + _memory_cols(s["elem_bytes"], dev) + [s[c] for c in flags]
        if family == "layernorm":
            cols.append((np.mod(ncols, LAYERNORM_VECTOR) == 0).astype(np.float64))
    x = np.stack([np.asarray(c, dtype=np.float64) for c in cols], axis=1)
    assert x.shape[1] == len(FEATURE_NAMES[family])
    return x, t_roof
