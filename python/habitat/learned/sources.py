"""The measured rows each learned model trains on, one Source per data set.

- NeuSight's kernels/ (sitar-lab/NeuSight, MIT): FP32 rows of five GPUs, each op call timed
  between CUDA events: per-call rows, one harness floor per (GPU, op).
- A kernel collection of one GPU (benchmarks/gpu/collect_kernels.py, benchmarks/results/kernels/):
  device time (`Kernel Latency`, CUPTI) where the collection has it, per-call time otherwise
  (one floor per op and precision). Each row carries the precision of the units its kernels ran
  on (habitat.learned.kernel_paths); per-call conv rows in which cuDNN's layout transforms ran
  have the modelled transform time (habitat.learned.conv_layout) taken away, device-time ones
  the measured one.
- Recorded training steps (benchmarks/results/<run>/traces/): each op's CUPTI kernel time, for
  the ops forecast from one part of the family (habitat.learned.traces).

A row's `floor_key` names its harness floor ("" for device time); `workload` names the traced
workload a row came from ("" elsewhere), for leave-one-workload-out scores.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from habitat.learned import conv_layout
from habitat.learned.devices import DeviceTable
from habitat.learned.neusight import (
    OP_FAMILY,
    TIMING_COLUMNS,
    KernelArrays,
    load_attention,
    load_batchnorm,
    load_kernels,
    load_precision_kernels,
)

NEUSIGHT = "neusight"
TRACES = "traces"


@dataclass
class Source:
    name: str
    rows: KernelArrays
    floor_key: np.ndarray  # per row: "" (device time) or its harness floor's group
    workload: np.ndarray  # per row: the traced workload, "" for rows of no workload
    measurement: np.ndarray  # per row: the measured time it is part of (rows with one id are summed)
    scale: np.ndarray  # per row: its multiplier in that sum


def _floor_keys(name: str, rows: KernelArrays, by: tuple[str, ...]) -> np.ndarray:
    fields = {"device": rows.device, "op": rows.op, "precision": rows.precision}
    keys = np.array(["|".join([name] + [str(fields[f][i]) for f in by]) for i in range(len(rows))], dtype=object)
    return np.where(rows.timing == "call", keys, "").astype(object)


def _source(name: str, rows: KernelArrays, by: tuple[str, ...]) -> Source:
    n = len(rows)
    return Source(name, rows, _floor_keys(name, rows, by), np.full(n, "", dtype=object),
                  np.array([f"{name}:{i}" for i in range(n)], dtype=object), np.ones(n))


def neusight(data_dir: str | Path, family: str) -> Source | None:
    """NeuSight's kernels/ rows of the family (None: it has none)."""
    tables = load_kernels(data_dir, "kernels", {op for op, f in OP_FAMILY.items() if f == family})
    if family not in tables:
        return None
    return _source(NEUSIGHT, tables[family], ("device", "op"))


def has_device_time(directory: str | Path) -> bool:
    """Whether a collection's CSVs carry the device-time column."""
    first = next(iter(sorted(Path(directory).glob("*.csv"))), None)
    if first is None:
        raise FileNotFoundError(f"{directory}: no CSV files (benchmarks/gpu/collect_kernels.py output)")
    with open(first) as f:
        return TIMING_COLUMNS["kernel"] in f.readline()


def collection(directory: str | Path, family: str, devices: DeviceTable) -> Source | None:
    """A kernel collection's rows of the family, device time where the collection has it."""
    timing = "kernel" if has_device_time(directory) else "call"
    if family == "attention":
        rows = load_attention(directory, timing)
    elif family == "batchnorm":
        rows = load_batchnorm(directory, timing)
    else:
        paths = [p for p in Path(directory).glob("*.csv") if not p.stem.startswith("sdpa")]
        tables = load_precision_kernels(directory, {op for op, f in OP_FAMILY.items() if f == family},
                                        timing) if paths else {}
        rows = tables.get(family)
    if rows is None or len(rows) == 0:
        return None
    if rows.transformed.any():
        rows, _ = conv_layout.without_transforms(rows, devices)
    return _source(f"collection:{Path(directory).name}", rows, ("op", "precision"))


def traces(results: str | Path, family: str, runs: tuple[str, ...] | None = None) -> Source | None:
    """The recorded steps' ops forecast from parts of the family only, CUPTI-timed (`runs`:
    the result folders to read, default habitat.learned.traces.RUNS)."""
    from habitat.learned import traces as tr

    rows = tr.training_rows(tr.load_trace_ops(results, runs or tr.RUNS), family)
    if rows is None:
        return None
    return Source(TRACES, rows.rows, np.full(len(rows.rows), "", dtype=object), rows.workload.astype(object),
                  rows.measurement, rows.scale)


@dataclass
class Rows:
    """The rows of several sources, with each row's source name and the Source fields."""
    rows: KernelArrays
    source: np.ndarray
    floor_key: np.ndarray
    workload: np.ndarray
    measurement: np.ndarray
    scale: np.ndarray

    def take(self, mask: np.ndarray) -> "Rows":
        return Rows(self.rows.take(mask), self.source[mask], self.floor_key[mask], self.workload[mask],
                    self.measurement[mask], self.scale[mask])


def concat(sources: list[Source]) -> Rows:
    """All rows of `sources`."""
    return Rows(KernelArrays.concat([s.rows for s in sources]),
                np.concatenate([np.full(len(s.rows), s.name, dtype=object) for s in sources]),
                np.concatenate([s.floor_key for s in sources]), np.concatenate([s.workload for s in sources]),
                np.concatenate([s.measurement for s in sources]), np.concatenate([s.scale for s in sources]))
