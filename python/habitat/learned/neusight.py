"""Loads NeuSight-format kernel CSVs (kernels/<op>/<GPU>.csv and test/<op>.csv, FP32) and the
same format with `Precision` and `Phase` columns (benchmarks/gpu/collect_kernels.py:
<dir>/<op>_<precision>.csv) into per-family tables of shapes and measured latencies."""
from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from habitat.learned import kernel_paths
from habitat.learned.features import OPTIONAL_COLUMNS, SHAPE_COLUMNS

# Element-wise op -> (input tensors of size n, transcendental)
ELEMENTWISE_OPS: dict[str, tuple[int, int]] = {
    "add": (2, 0), "mul": (2, 0), "div": (2, 0), "pow": (2, 1),
    "addu": (1, 0), "mulu": (1, 0), "divu": (1, 0), "powu": (1, 1),
    "relu": (1, 0), "gelu": (1, 1), "tanh": (1, 1),
}
OP_FAMILY = {"bmm": "gemm", "linear": "gemm", "conv": "conv", "softmax": "softmax", "ln": "layernorm",
             **{op: "elementwise" for op in ELEMENTWISE_OPS}}
# Convolution passes (collect_kernels.py's Phase column): the op name of a backward row says
# which gradient it computes, so each pass gets its own harness floor; `grad` is the shape column.
CONV_GRAD = {"fwd": 0.0, "bwd_data": 1.0, "bwd_weight": 2.0}
OP_FAMILY.update({"conv_bwd_data": "conv", "conv_bwd_weight": "conv", "sdpa": "attention", "sdpa_bwd": "attention",
                  # 3-D convolutions (collect_kernels.py --families conv3d) as their square stand-ins
                  "conv3d": "conv", "conv3d_bwd_data": "conv", "conv3d_bwd_weight": "conv",
                  # grouped ones (--families gconv; its depthwise rows are not read: the engine
                  # forecasts those by the measured roofline, csrc/src/cost/depthwise.h)
                  "gconv": "conv", "gconv_bwd_data": "conv", "gconv_bwd_weight": "conv",
                  "softmax_bwd": "softmax", "ln_bwd": "layernorm", "sum": "reduction", "mean": "reduction",
                  "bn": "batchnorm", "bn_bwd": "batchnorm", "log_softmax": "softmax", "log_softmax_bwd": "softmax",
                  # torch's fused RMS norm runs the layer-norm kernels without the mean on CUDA
                  "rms": "layernorm", "rms_bwd": "layernorm"})
ELEM_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


@dataclass
class KernelTable:
    """Rows of one family: shape columns, op name, device name, latency (us), launch blocks and
    threads per block (0: unknown)."""
    family: str
    op: list[str] = field(default_factory=list)
    device: list[str] = field(default_factory=list)
    latency_us: list[float] = field(default_factory=list)
    blocks: list[float] = field(default_factory=list)
    shapes: dict[str, list[float]] = field(default_factory=dict)
    threads: list[int] = field(default_factory=list)
    precision: list[str] = field(default_factory=list)
    timing: list[str] = field(default_factory=list)
    transformed: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.latency_us)

    def add(self, op: str, device: str, latency_us: float, blocks: float, shape: dict[str, float],
            threads: int = 0, precision: str = "fp32", timing: str = "call", transformed: bool = False) -> None:
        self.threads.append(threads)
        self.precision.append(precision)
        self.timing.append(timing)
        self.transformed.append(transformed)
        self.op.append(op)
        self.device.append(device)
        self.latency_us.append(latency_us)
        self.blocks.append(blocks)
        optional = OPTIONAL_COLUMNS.get(self.family, {})
        for c in SHAPE_COLUMNS[self.family]:
            self.shapes.setdefault(c, []).append(float(shape[c] if c in shape or c not in optional else optional[c]))

    def arrays(self) -> "KernelArrays":
        return KernelArrays(self.family, np.array(self.op), np.array(self.device),
                            np.array(self.latency_us, dtype=np.float64),
                            np.array(self.blocks, dtype=np.float64),
                            {c: np.array(v, dtype=np.float64) for c, v in self.shapes.items()},
                            np.array(self.threads, dtype=np.int64), np.array(self.precision, dtype=object),
                            np.array(self.timing, dtype=object), np.array(self.transformed, dtype=bool))


@dataclass
class KernelArrays:
    family: str
    op: np.ndarray
    device: np.ndarray
    latency_us: np.ndarray
    blocks: np.ndarray
    shapes: dict[str, np.ndarray]
    threads: np.ndarray | None = None  # threads per block, 0 where unknown; None: none known
    precision: np.ndarray | None = None  # "fp32", "tf32", "bf16", "fp16" per row; None: all fp32
    # How each row was timed (TIMINGS): "device" (CUPTI kernel durations: no harness) or "call"
    # (CUDA events around one op call: habitat.learned.harness); None: all "call".
    timing: np.ndarray | None = None
    # Whether cuDNN's layout transforms ran in the row (conv rows timed per call, which still
    # hold them: the trainers take the modelled transform time away); None: none did.
    transformed: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.latency_us)
        if self.precision is None:
            self.precision = np.full(n, "fp32", dtype=object)
        if self.timing is None:
            self.timing = np.full(n, "call", dtype=object)
        if self.transformed is None:
            self.transformed = np.zeros(n, dtype=bool)

    def __len__(self) -> int:
        return len(self.latency_us)

    def take(self, index: np.ndarray) -> "KernelArrays":
        return KernelArrays(self.family, self.op[index], self.device[index], self.latency_us[index],
                            self.blocks[index], {c: v[index] for c, v in self.shapes.items()},
                            None if self.threads is None else self.threads[index], self.precision[index],
                            self.timing[index], self.transformed[index])

    def with_(self, **changes) -> "KernelArrays":
        """A copy with some fields replaced (latency_us, precision, device, shapes, ...)."""
        return dataclasses.replace(self, **changes)

    @staticmethod
    def concat(parts: list["KernelArrays"]) -> "KernelArrays":
        family = parts[0].family
        return KernelArrays(family, np.concatenate([p.op for p in parts]), np.concatenate([p.device for p in parts]),
                            np.concatenate([p.latency_us for p in parts]), np.concatenate([p.blocks for p in parts]),
                            {c: np.concatenate([p.shapes[c] for p in parts]) for c in SHAPE_COLUMNS[family]},
                            np.concatenate([p.threads if p.threads is not None else np.zeros(len(p), np.int64)
                                            for p in parts]),
                            np.concatenate([p.precision for p in parts]), np.concatenate([p.timing for p in parts]),
                            np.concatenate([p.transformed for p in parts]))

    def shape_keys(self) -> np.ndarray:
        """One string per row naming its op, shape and precision (matches rows across GPUs)."""
        cols = [self.op] + [self.shapes[c].astype(np.int64).astype(str) for c in SHAPE_COLUMNS[self.family]]
        out = cols[0].astype(object)
        for c in cols[1:]:
            out = out + "|" + c.astype(object)
        return (out + "|" + self.precision.astype(str).astype(object)).astype(str)

    def problem_keys(self) -> np.ndarray:
        """One string per row naming the problem alone: the op's dimensions without its
        precision, element width, pass or attention backend, so a split on these keys holds a
        shape out in every precision, pass and backend at once (leave-shapes-out)."""
        base = np.array([o.split("_bwd")[0] for o in self.op], dtype=object)
        optional = OPTIONAL_COLUMNS.get(self.family, {})
        for c in problem_columns(self.family):
            part = "|" + self.shapes[c].astype(np.int64).astype(str).astype(object)
            # a column that came after the split was drawn is left out at its default value,
            # so that the keys (and the split) of the problems before it stay as they were
            base = base + (np.where(self.shapes[c] == optional[c], "", part) if c in optional else part)
        return base.astype(str)


# Shape columns that tell variants of one problem apart, not problems (KernelArrays.problem_keys).
VARIANT_COLUMNS = ("elem_bytes", "grad", "backward", "backend", "channels_last")
# Shape columns the op's name, first in a problem key, already gives.
NAMED_COLUMNS = ("log",)


def problem_columns(family: str) -> tuple[str, ...]:
    return tuple(c for c in SHAPE_COLUMNS[family] if c not in VARIANT_COLUMNS + NAMED_COLUMNS)


def problem_key(op: str, shape: dict[str, float]) -> str:
    """KernelArrays.problem_keys of one row (its op and shape columns)."""
    family = OP_FAMILY[op]
    optional = OPTIONAL_COLUMNS.get(family, {})
    return "|".join([op.split("_bwd")[0]] + [str(int(shape.get(c, optional.get(c, 0.0))))
                                             for c in problem_columns(family)
                                             if c not in optional or shape.get(c, optional[c]) != optional[c]])


def is_depthwise(row: Mapping[str, str | float]) -> bool:
    """A collected conv row (its CSV columns, as read or as numbers) whose every group is one
    input channel (csrc/src/cost/depthwise.h is_depthwise_conv)."""
    groups = float(row.get("Groups") or 1)
    return groups > 1 and groups == float(row["Input_Channel"])


def cube_conv_stand_in(depth: float, size: float, kernel: float, stride: float, padding: float) -> dict[str, float]:
    """The square 2-D convolution the engine forecasts a 3-D one of `depth` x `size` x `size`
    inputs and a cube filter by (csrc/src/learned/conv_geometry.cpp square_conv): the square
    roots of the products of the sides, filter sides and strides, and the padding that gives it
    the 3-D one's output positions (the nearest square number)."""
    def out(n: float) -> float:
        return math.floor((n + 2 * padding - kernel) / stride) + 1

    positions = out(depth) * out(size) ** 2
    sq = {"size": math.sqrt(depth * size * size), "kernel": kernel ** 1.5, "stride": stride ** 1.5}
    out_side = max(1.0, math.floor(math.sqrt(positions) + 0.5))  # std::round: half away from zero
    if sq["kernel"] == 1 and sq["stride"] == 1 and padding == 0:
        return {**sq, "size": out_side, "padding": 0.0}
    return {**sq, "padding": ((out_side - 1) * sq["stride"] + sq["kernel"] - sq["size"]) / 2 + sq["stride"] / 4}


def row_shape(op: str, row: dict[str, str], elem_bytes: float = 4.0) -> dict[str, float]:
    family = OP_FAMILY[op]
    if family == "gemm":  # NeuSight: A[B,M,N] x B[B,N,K], N is the reduction
        return {"b": float(row["B"]), "m": float(row["M"]), "k": float(row["N"]), "n": float(row["K"]),
                "elem_bytes": elem_bytes}
    if family == "conv":
        window = {"kernel": float(row["Kernel_Szie"]), "size": float(row["Input_Size"]),
                  "stride": float(row["Stride"]), "padding": float(row["Padding"])}
        if row.get("Depth"):
            window = cube_conv_stand_in(float(row["Depth"]), **window)
        return {"batch": float(row["B"]), "cin": float(row["Input_Channel"]),
                "cout": float(row["Output_Channel"]), **window, "elem_bytes": elem_bytes,
                "grad": CONV_GRAD[row.get("Phase") or "fwd"], "groups": float(row.get("Groups") or 1)}
    if family == "reduction":  # collect_kernels.py: sum or mean of a B x H tensor over Dim
        outer = row["Dim"] == "0"
        b, h = float(row["B"]), float(row["H"])
        return {"rows": h if outer else b, "cols": b if outer else h, "elem_bytes": elem_bytes,
                "strided": 1.0 if outer and h > 1 else 0.0}
    if family == "batchnorm":
        return {"count": float(row["B"]) * float(row["Input_Size"]) ** 2, "channels": float(row["Input_Channel"]),
                "elem_bytes": elem_bytes, "backward": 1.0 if op.endswith("_bwd") else 0.0,
                "channels_last": 1.0 if row.get("Layout") == "nhwc" else 0.0}
    if family == "softmax" and "Tokens" in row:  # collect_kernels.py crossentropy: log_softmax
        return {"rows": float(row["Tokens"]), "cols": float(row["Classes"]), "elem_bytes": elem_bytes,
                "backward": 1.0 if op.endswith("_bwd") else 0.0, "log": 1.0}
    if family == "softmax":
        return {"rows": float(row["B"]), "cols": float(row["H"]), "elem_bytes": elem_bytes,
                "backward": 1.0 if op.endswith("_bwd") else 0.0, "log": 1.0 if op.startswith("log_softmax") else 0.0}
    if family == "elementwise":
        inputs, trans = ELEMENTWISE_OPS[op]
        return {"n": float(row["B"]) * float(row["H"]), "inputs": float(inputs),
                "transcendental": float(trans), "elem_bytes": elem_bytes}
    return {"rows": float(row["B"]), "cols": float(row["H"]), "elem_bytes": elem_bytes,
            "backward": 1.0 if op.endswith("_bwd") else 0.0}


# What a row's time is (collect_kernels.py): "call", CUDA events around one op call (NeuSight's
# method, a harness floor included: `Latency`), or "kernel", the summed CUPTI durations of its
# kernels (device time alone: `Kernel Latency`) less cuDNN's layout transforms among them
# (`Transform Latency`): the convolution alone, in either layout.
TIMING_COLUMNS = {"call": "Latency", "kernel": "Kernel Latency"}
# KernelArrays.timing of a row read with each timing.
ROW_TIMING = {"call": "call", "kernel": "device"}


def _check_timing(timing: str) -> None:
    if timing not in TIMING_COLUMNS:
        raise ValueError(f"timing must be one of {', '.join(TIMING_COLUMNS)}, got {timing!r}")


def _row_ms(path: Path, row: dict[str, str], timing: str) -> float:
    """A collected row's time in ms as `timing` reads it (TIMING_COLUMNS)."""
    column = TIMING_COLUMNS[timing]
    if column not in row:
        raise ValueError(f"{path}: no {column!r} column (collected before it existed): use timing='call'")
    ms = float(row[column])
    return ms - float(row.get("Transform Latency") or 0.0) if timing == "kernel" else ms


def _read(path: Path, tables: dict[str, KernelTable], ops: set[str] | None, timing: str = "call") -> None:
    """Every row of one CSV, each with the precision of the units its kernels ran on
    (kernel_paths.path_precision) and, for a conv row timed per call, whether cuDNN's layout
    transforms ran in it (device times have them taken out already)."""
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            op = row["OPName"]
            phase = row.get("Phase") or "fwd"
            if op in ("conv", "conv3d") and phase != "fwd" and phase not in CONV_GRAD:
                raise ValueError(f"{path}: unknown conv Phase {phase!r} (known: {', '.join(CONV_GRAD)})")
            if phase != "fwd":  # a backward pass is an op of its own (not in OP_FAMILY: not read)
                op = f"{op}_{phase}"
            if op not in OP_FAMILY or (ops is not None and op not in ops) or is_depthwise(row):
                continue
            precision = row.get("Precision") or "fp32"
            if precision not in ELEM_BYTES:
                raise ValueError(f"{path}: unknown Precision {precision!r} (known: {', '.join(ELEM_BYTES)})")
            latency_ms = _row_ms(path, row, timing)
            if not latency_ms > 0:
                continue
            blocks = float(row["Grid x"]) * float(row["Grid y"]) * float(row["Grid z"])
            threads = int(float(row.get("Block x") or 0) * float(row.get("Block y") or 1)
                          * float(row.get("Block z") or 1))  # 0: not recorded
            family = OP_FAMILY[op]
            kernels = row.get("Kernels") or ""
            transformed = timing == "call" and family == "conv" and kernel_paths.ran_transforms(kernels)
            tables.setdefault(family, KernelTable(family)).add(
                op, row["Device"], latency_ms * 1000.0, blocks, row_shape(op, row, ELEM_BYTES[precision]),
                threads, kernel_paths.path_precision(precision, kernels), ROW_TIMING[timing], transformed)


def load_kernels(data_dir: str | Path, layout: str = "kernels",
                 ops: set[str] | None = None) -> dict[str, KernelArrays]:
    """layout "kernels": data_dir/kernels/<op>/<GPU>.csv; "test": data_dir/test/<op>.csv."""
    root = Path(data_dir) / layout
    if not root.is_dir():
        raise FileNotFoundError(f"{root} not found: expected NeuSight's {layout}/ directory")
    tables: dict[str, KernelTable] = {}
    paths = sorted(root.glob("*/*.csv")) if layout == "kernels" else sorted(root.glob("*.csv"))
    for path in paths:
        _read(path, tables, ops)
    return {f: t.arrays() for f, t in sorted(tables.items())}


def load_precision_kernels(directory: str | Path, ops: set[str] | None = None,
                           timing: str = "call") -> dict[str, KernelArrays]:
    """collect_kernels.py's output for one GPU: <directory>/<op>_<precision>.csv with `Precision`
    and `Phase` columns (the attention files, sdpa.csv and sdpa_<precision>.csv, are
    load_attention's); each row's time from its TIMING_COLUMNS[timing] column."""
    _check_timing(timing)
    root = Path(directory)
    paths = sorted(p for p in root.glob("*.csv") if not p.stem.startswith("sdpa"))
    if not paths:
        raise FileNotFoundError(f"{root}: no <op>_<precision>.csv files (benchmarks/gpu/collect_kernels.py output)")
    tables: dict[str, KernelTable] = {}
    for path in paths:
        _read(path, tables, ops, timing)
    return {f: t.arrays() for f, t in sorted(tables.items())}


def load_batchnorm(directory: str | Path, timing: str = "kernel") -> KernelArrays | None:
    """The batch-norm rows of a collection (bn_<precision>.csv: training mode, Phase "fwd" and
    "fwd+bwd"): op "bn" for the forward, "bn_bwd" for the backward alone, fwd+bwd less fwd of the
    same problem (kept where it is at least a fifth of fwd+bwd, as load_sdpa); None without any."""
    _check_timing(timing)
    by_key: dict[tuple, dict[str, tuple[Path, dict[str, str]]]] = {}
    for path in sorted(Path(directory).glob("bn_*.csv")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                key = tuple(row[c] for c in ("Device", "B", "Input_Channel", "Input_Size", "Layout", "Precision"))
                by_key.setdefault(key, {})[row["Phase"]] = (path, row)
    table = KernelTable("batchnorm")
    for _, phases in sorted(by_key.items()):
        if "fwd" not in phases:
            continue
        path, fwd = phases["fwd"]
        precision = fwd["Precision"]
        t_fwd = _row_ms(path, fwd, timing) * 1000.0
        if not t_fwd > 0:
            continue
        table.add("bn", fwd["Device"], t_fwd, 0.0, row_shape("bn", fwd, ELEM_BYTES[precision]), 0, precision,
                  ROW_TIMING[timing])
        if "fwd+bwd" not in phases:
            continue
        path, both = phases["fwd+bwd"]
        t_both = _row_ms(path, both, timing) * 1000.0
        if t_both - t_fwd >= 0.2 * t_both:
            table.add("bn_bwd", fwd["Device"], t_both - t_fwd, 0.0, row_shape("bn_bwd", both, ELEM_BYTES[precision]),
                      0, precision, ROW_TIMING[timing])
    return table.arrays() if len(table) else None


# The fused SDPA backends (collect_kernels.py's `Backend`), each a value of the attention shape
# column "backend"; the math backend is not one kernel but GEMMs and a softmax, which the
# engine forecasts with those families' models.
SDPA_BACKENDS = {"flash": 0.0, "efficient": 1.0, "cudnn": 2.0}


def load_attention(directory: str | Path, timing: str = "call") -> KernelArrays | None:
    """The attention rows of a collection: its sdpa.csv (the H100 set of 2026-11-22) and
    sdpa_<precision>.csv files (collect_kernels.py), through load_sdpa; None without any."""
    paths = sorted(Path(directory).glob("sdpa.csv")) + sorted(Path(directory).glob("sdpa_*.csv"))
    parts = [load_sdpa(p, timing=timing) for p in paths]
    parts = [a for a in parts if len(a)]
    return KernelArrays.concat(parts) if parts else None


def _kernel_count(row: dict[str, str]) -> int:
    """How many kernels a collected row's run launched (its `Kernels` column, ';'-separated)."""
    return sum(1 for k in (row.get("Kernels") or "").split(";") if k)


def load_sdpa(path: str | Path, timing: str = "call") -> KernelArrays:
    """sdpa.csv (one row per shape, backend, precision and phase "fwd" or "fwd+bwd", times in
    ms) as attention rows of the fused backends (SDPA_BACKENDS): op "sdpa" for the forward,
    "sdpa_bwd" for the backward op alone.

    The forward is timed as `timing` says. The backward is fwd+bwd less the forward. With
    timing "kernel", where the fwd+bwd row lists more kernels than the fwd row (collections
    since 2026-11-27), it is the difference of their device times, a device-time row; the
    collections of 2026-11-26 and before lost the backward's kernels from `Kernel Latency`
    (autograd ran them on another thread: the fwd+bwd row lists the forward's alone), and there
    it is fwd+bwd's call time less the forward's device time, i.e. the backward's kernels plus
    the harness's one floor (a "call" row). With "call", fwd+bwd less fwd, whose floors mostly
    cancel. Rows where the difference is under a fifth of the fwd+bwd time, lost in the
    jitter, are dropped."""
    _check_timing(timing)
    by_key: dict[tuple, dict[str, dict[str, str]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            # sdpa_mask and sdpa_dropout rows (collect_kernels.py --families encoder) add a padding
            # mask or attention dropout, which no feature describes yet
            if row["Backend"] not in SDPA_BACKENDS or row.get("OPName", "sdpa") != "sdpa":
                continue
            key = tuple(row[c] for c in ("Device", "B", "H", "L", "S", "E", "Causal", "Precision", "Backend"))
            by_key.setdefault(key, {})[row["Phase"]] = row
    table = KernelTable("attention")
    for key, phases in sorted(by_key.items()):
        fwd, both = phases.get("fwd"), phases.get("fwd+bwd")
        if fwd is None:
            continue
        device, b, h, l, s_, e, causal, p, backend = key
        shape = {"batch_heads": float(b) * float(h), "l": float(l), "s": float(s_), "e": float(e),
                 "causal": float(causal), "backward": 0.0, "elem_bytes": ELEM_BYTES[p],
                 "backend": SDPA_BACKENDS[backend]}
        t_fwd = _row_ms(Path(path), fwd, timing) * 1000.0
        table.add("sdpa", device, t_fwd, 0.0, shape, 0, p, ROW_TIMING[timing])
        if both is None:
            continue
        bwd_timing = "kernel" if timing == "kernel" and _kernel_count(both) > _kernel_count(fwd) else "call"
        t_both = _row_ms(Path(path), both, bwd_timing) * 1000.0
        bwd = t_both - (t_fwd if timing == "kernel" else _row_ms(Path(path), fwd, "call") * 1000.0)
        if bwd >= 0.2 * t_both:
            table.add("sdpa_bwd", device, bwd, 0.0, dict(shape, backward=1.0), 0, p, ROW_TIMING[bwd_timing])
    return table.arrays()
