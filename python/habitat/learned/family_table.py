"""Samples of the measured-roofline table (roofline_table.py) from a device-time kernel collection
of the families no learned model covers (benchmarks/results/kernels/*-families/: depthwise
convolutions).

Each row is traced as a CPU step of a user's would record it (benchmarks/accuracy/family_steps.py:
the collector's own case, traced at template sizes, given the row's) and forecast by the engine
for the collection's GPU, with the installed learned models but no measured-roofline table. The op that takes the row's roofline-forecast share is its sample: its
roofline on that GPU (the engine's FLOPs and bytes for it) against the row's device time, less
what the engine forecasts for the row's other ops. The op is keyed as the engine looks it up
(csrc/src/learned/roofline_table.cpp): a depthwise convolution under one name per direction.

A fifth of each collection's problems (held_out: a stable hash of the CSV stem and the sizes, any
precision, layout and phase) is never a sample, so
`benchmarks/accuracy/family_kernels.py --holdout` scores the table on problems it never saw.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from habitat.learned.roofline_sample import COLLECTION, Sample, channels_last, elem_bytes, roofline_us, sm_roofline_us

HOLDOUT_BUCKETS = 5
# OPNames of the collection whose rows become samples, and the class of the op each measures (the
# others' forecasts rest on learned models, or on these ops; grouped convolutions that are not
# depthwise on the conv model). A row's other ops are never its sample.
FIT_OPS = {"gconv": "conv"}
# OPNames whose rows fit the constants of a launch-structure model instead, on the same split
# (roofline_sample.LAUNCH_STRUCTURE_OPS; benchmarks/accuracy/embedding_kernels_fit.py and
# loss_kernels_fit.py).
STRUCTURE_FIT_OPS = frozenset({"embedding", "nll_loss"})
# Below this share of the row's device time the sample op is not what the row measured.
MIN_OWN_SHARE = 0.2


def held_out(stem: str, shape: dict[str, Any]) -> bool:
    """Whether the problem is among the fifth of the collection kept out of the table."""
    sizes = ",".join(f"{k}={shape[k]}" for k in sorted(shape) if k != "Layout")
    return zlib.crc32(f"{stem}|{sizes}".encode()) % HOLDOUT_BUCKETS == 0


def _benchmark_module(name: str) -> ModuleType:
    """benchmarks/accuracy/<name>.py of the checkout: the tracing of a collection's rows lives
    with the benchmark that scores them (family_steps.py, family_kernels.py)."""
    from habitat.data.checkout import checkout_path

    if name not in sys.modules:
        path = checkout_path(Path("benchmarks") / "accuracy" / f"{name}.py")
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def table_name(op: dict[str, Any], row: Any) -> str:
    """The name the engine looks the op up by (roofline_table.cpp table_name)."""
    name = op["name"].removeprefix("aten::")
    if row.op == "gconv":
        return "depthwise_conv2d_backward" if name.endswith("_backward") else "depthwise_conv2d"
    return name


def variant(row: Any) -> str:
    """A depthwise row's filter size and stride as the engine keys them (csrc/src/cost/depthwise.h
    depthwise_variant); "" for the other rows."""
    if row.op != "gconv":
        return ""
    return f"k{int(row.shape['Kernel_Szie'])}s{int(row.shape['Stride'])}"


def _depthwise(row: Any) -> bool:
    return row.op != "gconv" or row.shape["Groups"] == row.shape["Input_Channel"]


@contextlib.contextmanager
def _without_table() -> Iterator[None]:
    """The installed weights less roofline.json, for the forecasts the samples are read from:
    they must not depend on the table they fit (a fitted entry changes which op of a row takes
    its share, and the next fit's samples with it)."""
    from habitat.data.engine import weights_dir

    source = weights_dir()
    saved = os.environ.get("HABITAT_WEIGHTS")
    with tempfile.TemporaryDirectory(prefix="habitat-weights-") as tmp:
        if source:
            for entry in Path(source).iterdir():
                if entry.name != "roofline.json":
                    (Path(tmp) / entry.name).symlink_to(entry.resolve())
        os.environ["HABITAT_WEIGHTS"] = tmp if source else ""
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("HABITAT_WEIGHTS", None)
            else:
                os.environ["HABITAT_WEIGHTS"] = saved


def samples(directory: Path, gpu: str, held: bool = False) -> list[Sample]:
    """The collection's samples (module docstring), its held-out problems left out (`held`:
    those alone, to score a table)."""
    from habitat.data.op_rows import METHODS, OP_CLASSES, PRECISIONS
    from habitat.learned.devices import default_table

    kernels = _benchmark_module("family_kernels")
    rows = [r for r in kernels.read_rows(directory) if r.op in FIT_OPS and _depthwise(r) and held_out(r.stem, r.shape) == held]
    dev = default_table().find(gpu)
    roofline = METHODS.index("roofline")
    out: list[Sample] = []
    with _without_table():
        steps = kernels.forecast_steps(rows, gpu, kernels.Templates())
    for row, (ops, op_rows) in zip(rows, steps):
        a = op_rows.array
        by_id = {op["id"]: op for op in ops}
        share = a["share_us"][:, 0]
        total = float(share.sum())
        candidates = [i for i in range(len(a)) if a["share_method"][i, 0] == roofline and share[i] > 0
                      and OP_CLASSES[int(a["op_class"][i])] == FIT_OPS[row.op]]
        if not candidates:
            continue
        i = max(candidates, key=lambda j: share[j])
        measured = row.measured_us - (total - share[i])
        if measured < MIN_OWN_SHARE * row.measured_us:
            continue
        precision, flops, nbytes = PRECISIONS[int(a["precision"][i])], float(a["flops"][i]), float(a["bytes"][i])
        roof = roofline_us(dev, precision, flops, nbytes)
        if roof <= 0:
            continue
        op = by_id[int(a["id"][i])]
        out.append(Sample(COLLECTION, gpu, table_name(op, row), OP_CLASSES[int(a["op_class"][i])], elem_bytes(op),
                          channels_last(op), roof, 1, measured, sm_roofline_us(dev, precision, flops, nbytes),
                          variant(row)))
    return out


def collection_gpu(directory: Path) -> str:
    """The device database name of the GPU a collection was measured on (its CSVs' `Device`)."""
    import csv

    from habitat.learned.devices import default_table

    for path in sorted(Path(directory).glob("*.csv")):
        with path.open(newline="") as f:
            row = next(csv.DictReader(f), None)
        if row and row.get("Device"):
            return default_table().find(row["Device"]).name
    raise ValueError(f"{directory}: no CSV with a Device column; pass the collection's GPU (--collection-gpu)")


def describe(data: list[Sample]) -> str:
    """Samples per table name, for the training log."""
    names, counts = np.unique([x.op for x in data], return_counts=True)
    return ", ".join(f"{n} {c}" for n, c in zip(names, counts))
