"""The rows of a kernel collection (benchmarks/gpu/collect_kernels.py) as the steps a CPU trace
records for them: each row's case, traced once with habitat's capture on the CPU at small sizes,
then given the row's sizes.

A row's case (the collector's own cases_*.py functions, so the traced calls are the measured
ones) is traced at a *template* shape whose sizes are distinct primes of at least 11 (batch,
channels, width, ...). Every integer of the recorded shapes, strides and int arguments that one
of those primes divides is a product of template sizes (dimensions, strides, element counts,
`groups`), so it is rewritten as the same product of the row's sizes; integers no template
prime divides (kernel sizes, strides of 1 or 2, dims, padding) are the row's own. A
convolution's output width is not a product of its input width, so the template's input width
is drawn such that its output width is a template prime too, and both are mapped. Tracing at
the row's own sizes would take hours on two cores (a batch-norm row reads up to 400 MB); one
trace per op, phase, precision and layout takes seconds.

AdamW rows are left out: their parameter list (its length and sizes) is not in the CSV.
"""
from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))  # the collector's case modules

PRIMES = (11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)
# Shape columns that are sizes (the others, e.g. Kernel_Szie, Stride, Padding, Dim, Layout, are
# traced as they are).
SIZE_COLUMNS = ("B", "H", "Input_Channel", "Output_Channel", "Input_Size", "Depth", "Groups", "Vocab", "Dim",
                "Tokens", "Classes")
# A convolution's spatial sizes: each output size is its own template prime (_conv_widths).
CONV_SIZE_COLUMNS = ("Input_Size", "Depth")
# The CSV stems whose rows have a case here, by the collector's family of their cases.
STEM_FAMILY = {"activation": "activation", "add": "elementwise", "addu": "elementwise", "mul": "elementwise",
               "mulu": "elementwise", "div": "elementwise", "relu": "elementwise", "gelu": "elementwise",
               "tanh": "elementwise", "sum": "reduction", "mean": "reduction", "bn": "batchnorm",
               "gconv": "gconv", "conv1x1": "pointwise", "embedding": "embedding",
               "crossentropy": "crossentropy", "conv3d": "conv3d"}


@dataclass(frozen=True)
class Row:
    stem: str            # the CSV file's name before _<precision>
    op: str              # OPName
    phase: str
    precision: str
    shape: dict[str, Any]  # the shape columns (sizes as ints)
    measured_us: float   # Kernel Latency

    def template_key(self) -> tuple:
        """Rows with one key share a template trace (sizes aside)."""
        fixed = tuple(sorted((k, v) for k, v in self.shape.items() if k not in SIZE_COLUMNS or self._is_axis(k)))
        return (self.stem, self.op, self.phase, self.precision, fixed, self._size_pattern())

    def _size_pattern(self) -> tuple:
        """Which sizes are equal or 1 (a depthwise conv's channels are its groups; Dim of the
        reductions is an axis, not a size)."""
        sizes = [(k, self.shape[k]) for k in SIZE_COLUMNS if k in self.shape and not self._is_axis(k)]
        return tuple((k, next(j for j, (_, w) in enumerate(sizes) if w == v) if v != 1 else -1) for k, v in sizes)

    def _is_axis(self, column: str) -> bool:
        return column == "Dim" and self.stem in ("sum", "mean")


def conv_output(size: int, shape: dict[str, Any]) -> int:
    k, s, p = int(shape["Kernel_Szie"]), int(shape["Stride"]), int(shape["Padding"])
    return (size + 2 * p - k) // s + 1


def template_sizes(row: Row) -> tuple[dict[str, Any], dict[int, int]]:
    """The template's shape columns and the map from each template prime to the row's size."""
    primes = iter(PRIMES)
    shape = dict(row.shape)
    mapping: dict[int, int] = {}
    by_value: dict[int, int] = {}
    for column in SIZE_COLUMNS:
        if column not in shape or row._is_axis(column):
            continue
        real = int(shape[column])
        if column in ("Input_Channel", "Output_Channel") and _grouped(row):
            continue  # a grouped conv's channels: groups x width, set below
        if column in CONV_SIZE_COLUMNS and "Kernel_Szie" in shape:
            continue  # a conv's widths: set below
        if real == 1:
            continue
        if real not in by_value:
            by_value[real] = next(primes)
            mapping[by_value[real]] = real
        shape[column] = by_value[real]
    if _grouped(row):
        width = int(row.shape["Input_Channel"]) // int(row.shape["Groups"])
        p = next(primes)
        mapping[p] = width
        shape["Input_Channel"] = shape["Groups"] * p
        out_width = int(row.shape["Output_Channel"]) // int(row.shape["Groups"])
        shape["Output_Channel"] = shape["Groups"] * (p if out_width == width else _mapped(out_width, primes, mapping))
    if "Kernel_Szie" in shape:
        for column in CONV_SIZE_COLUMNS:
            if column in shape:
                _conv_widths(row, shape, mapping, primes, column)
    return shape, mapping


def _grouped(row: Row) -> bool:
    """A grouped conv that is not depthwise: its channels are groups x width."""
    return "Groups" in row.shape and int(row.shape["Groups"]) not in (1, int(row.shape["Input_Channel"]))


def _mapped(real: int, primes: Iterator[int], mapping: dict[int, int]) -> int:
    p = next(primes)
    mapping[p] = real
    return p


def _conv_widths(row: Row, shape: dict[str, Any], mapping: dict[int, int], primes: Iterator[int],
                 column: str = "Input_Size") -> None:
    """A template input size (`column`: width, or a 3-D convolution's depth) whose output size is
    a template prime too (or the same one)."""
    real_in = int(row.shape[column])
    real_out = conv_output(real_in, row.shape)
    used = set(mapping)
    for p in primes:
        out = conv_output(p, row.shape)
        if out == p or (out in PRIMES and out not in used):
            shape[column] = p
            mapping[p] = real_in
            if out != p:
                mapping[out] = real_out
            return
    raise ValueError(f"no template width for {row}")


def _substitute(value: int, mapping: dict[int, int]) -> int:
    if value == 0:
        return 0
    out, rest = 1, abs(value)
    for p, real in mapping.items():
        while rest % p == 0:
            rest //= p
            out *= real
    return (out * rest) * (1 if value > 0 else -1)


def _rewrite_tensor(t: dict[str, Any], mapping: dict[int, int]) -> None:
    for key in ("shape", "strides"):
        if key in t:
            t[key] = [_substitute(int(v), mapping) for v in t[key]]
    for key in ("storage_offset", "numel"):
        if key in t:
            t[key] = _substitute(int(t[key]), mapping)


def resized(ops: list[dict[str, Any]], mapping: dict[int, int]) -> list[dict[str, Any]]:
    """The template's ops with every size rewritten (module docstring)."""
    out = copy.deepcopy(ops)
    for op in out:
        for a in op.get("args", []):
            if "tensor" in a:
                _rewrite_tensor(a["tensor"], mapping)
            for t in a.get("tensors", []) or []:
                _rewrite_tensor(t, mapping)
            if "int" in a:
                a["int"] = _substitute(int(a["int"]), mapping)
            if "ints" in a:
                a["ints"] = [_substitute(int(v), mapping) for v in a["ints"]]
        for t in op.get("outputs", []) or []:
            _rewrite_tensor(t, mapping)
    return out


def _case(row: Row, shape: dict[str, Any]) -> Callable[[], object]:
    """The collector's case of the row at `shape`, built on the CPU."""
    from kernel_families import FAMILIES

    family = FAMILIES[STEM_FAMILY[row.stem]]
    columns = {k: v for k, v in shape.items() if k not in ("Layout",) and not (k == "Dim" and row.stem in ("sum", "mean"))}
    for case in family.cases([columns], "cpu"):
        if (case.op, case.phase, case.precision) != (row.op, row.phase, row.precision):
            continue
        if any(str(case.shape.get(k)) != str(v) for k, v in shape.items() if k in ("Layout", "Dim")):
            continue
        if (case.stem or case.op) != row.stem and row.stem != "activation":
            continue
        return case.run
    raise KeyError(f"no collector case for {row.stem} {row.op} {row.phase} {row.precision} {row.shape}")


def trace_template(row: Row) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The row's case traced on the CPU at its template sizes: (ops, prime -> this row's size)."""
    from kernel_case import precision_context

    from habitat.capture.record import record_step

    shape, mapping = template_sizes(row)
    run = _case(row, shape)
    with precision_context(row.precision), record_step(0) as rec:
        run()
    return rec.step["ops"], mapping


class Templates:
    """One traced template per Row.template_key, each row's step made from it."""

    def __init__(self) -> None:
        self._traced: dict[tuple, tuple[list[dict[str, Any]], dict[int, int]]] = {}

    def step_ops(self, row: Row) -> list[dict[str, Any]]:
        key = row.template_key()
        if key not in self._traced:
            self._traced[key] = trace_template(row)
        ops, template_mapping = self._traced[key]
        _, mapping = template_sizes(row)
        if set(mapping) != set(template_mapping):
            raise AssertionError(f"template sizes differ for {row}")
        return resized(ops, mapping)

    def __len__(self) -> int:
        return len(self._traced)
