"""The kernel collector's CSV rows (NeuSight's columns plus `Precision`, `Phase`, the two
device-time columns and each family's shape columns) and files. Torch-free."""
from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path
from typing import Any, Callable

from cudnn_transforms import transform_kind

BASE_COLUMNS = ["OPName", "Latency", "Device", "Torch Version", "CUDNN Version", "Kernel Name",
                "Warps per SM", "Blocks per SM", "Grid x", "Grid y", "Grid z", "Block x", "Block y",
                "Block z", "CUDA Version", "Kernels", "Precision", "Phase", "Kernel Latency", "Transform Latency"]
Kernel = dict[str, Any]
Row = dict[str, Any]


def is_transform(kernel_name: str) -> bool:
    """cuDNN's layout transforms around NHWC kernels given NCHW tensors: `Transform Latency` sums them."""
    return transform_kind(kernel_name) is not None


def kernel_latency_ms(runs: list[list[Kernel]], select: Callable[[str], bool] = lambda name: True) -> float:
    """Median over the runs of the summed durations (profiler us) of the selected kernels, in ms."""
    sums = [sum(k["dur"] for k in run if select(k["name"])) for run in runs]
    return statistics.median(sums) / 1000.0 if sums else 0.0


def unique_names(kernels: list[Kernel]) -> list[str]:
    """Distinct kernel names in launch order."""
    return list(dict.fromkeys(k["name"] for k in kernels))


def make_row(case: Any, latency_ms: float, runs: list[list[Kernel]], meta: dict[str, Any], sms: int) -> Row:
    """The CSV row of one case (kernel_case.Case): `runs` are the kernels of its profiled runs
    (the first one names the kernels)."""
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


def read_rows(out_dir: Path) -> dict[str, list[Row]]:
    """The rows of the CSV files already in out_dir, by file name (without .csv)."""
    found = {}
    for path in sorted(Path(out_dir).glob("*.csv")):
        with open(path, newline="") as f:
            found[path.stem] = list(csv.DictReader(f))
    return found


def write_rows(out_dir: Path, rows_by_file: dict[str, list[Row]],
               kept: dict[str, list[Row]] | None = None) -> list[Path]:
    """Writes <out_dir>/<name>.csv for every name with rows: the `kept` rows of that name (an
    earlier run's, read_rows) first, then this run's. The columns are BASE_COLUMNS and then
    every shape column of the rows, in the order they first appear."""
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = kept or {}
    written = []
    for name, new in sorted(rows_by_file.items()):
        rows = kept.get(name, []) + new
        if not new:
            continue
        shape_cols = list(dict.fromkeys(c for r in rows for c in r if c not in BASE_COLUMNS))
        path = out_dir / f"{name}.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=BASE_COLUMNS + shape_cols)
            w.writeheader()
            w.writerows(rows)
        written.append(path)
    return written
