"""How a per-call timing harness relates to device time, on rows that carry both.

    python benchmarks/accuracy/harness_floor.py [DIR]   # default: the H100 collection of 2026-11-26

NeuSight timed every op call between two CUDA events after a synchronize (its collect.py,
`measure_once`; the mean of the 5 fastest of 25 calls), as `collect_kernels.py` does for its
`Latency` column. The device-time collection of 2026-11-26 also holds each case's CUPTI kernel
time (`Kernel Latency`), so on its rows the harness's time L can be compared with the device
time K of the same call. This script prints, per file, the median L - K by kernel-size bucket
and how well four forms of a floor F explain L from K (mean absolute log error, each with its
best constants, chosen on a grid):

- max-like: L = (F^p + K^p)^(1/p) for p = 4 (the form the trainers assumed before) and p = 2;
- additive: L = F + K (p = 1);
- additive and shaped: L = K + F (1 + r / (1 + K / KNEE_US)), the host's share larger for the
  smallest kernels (habitat.learned.harness.SHAPE_RATIO and KNEE_US).

The trainers take NeuSight's FP32 rows with the shaped additive floor, its F fitted per (GPU, op)
and r and the knee from here (habitat.learned.harness). Rows whose kernel is small against F
carry little information on K whatever the form: a floor fitted and subtracted cannot recover a
2 us kernel behind a 20 us harness with its jitter, which is why the models are trained on
device time wherever it exists.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "benchmarks" / "results" / "kernels" / "H100-SXM5-80GB-2026-11-26"
sys.path.insert(0, str(REPO / "python"))

from habitat.learned.harness import KNEE_US  # noqa: E402  (the package's constants, checked here)

BUCKETS_US = ((0, 5), (5, 20), (20, 50), (50, 200), (200, 1000), (1000, float("inf")))
FLOOR_GRID_US = np.linspace(5.0, 45.0, 161)
RATIO_GRID = np.linspace(0.0, 2.0, 41)


def read(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the harness time L and the device time K (us), rows with both positive; SDPA's
    fwd+bwd rows are skipped (their K holds the forward kernels only: the collection's README)."""
    lat, ker = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("Phase") == "fwd+bwd" and row.get("OPName") == "sdpa":
                continue
            if "Kernel Latency" not in row:
                raise SystemExit(f"{path}: no 'Kernel Latency' column: collected before device time was recorded")
            lat_us, ker_us = float(row["Latency"]) * 1e3, float(row["Kernel Latency"]) * 1e3
            if lat_us > 0 and ker_us > 0:
                lat.append(lat_us)
                ker.append(ker_us)
    return np.array(lat), np.array(ker)


def soft_max_error(lat: np.ndarray, ker: np.ndarray, p: float) -> tuple[float, float]:
    """Least mean |log error| of L = (F^p + K^p)^(1/p) over the floor grid, and its F."""
    return min((float(np.mean(np.abs(np.log((f**p + ker**p) ** (1.0 / p)) - np.log(lat)))), float(f))
               for f in FLOOR_GRID_US)


def shaped_error(lat: np.ndarray, ker: np.ndarray) -> tuple[float, float, float]:
    """Least mean |log error| of L = K + F (1 + r / (1 + K / KNEE_US)), and its F and r."""
    best = (np.inf, 0.0, 0.0)
    shape = 1.0 / (1.0 + ker / KNEE_US)
    for r in RATIO_GRID:
        for f in FLOOR_GRID_US / (1.0 + r):
            e = float(np.mean(np.abs(np.log(ker + f * (1.0 + r * shape)) - np.log(lat))))
            if e < best[0]:
                best = (e, float(f), float(r))
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", default=str(DEFAULT), help="a collect_kernels.py output with Kernel Latency")
    args = p.parse_args(argv)
    paths = sorted(Path(args.data).glob("*.csv"))
    if not paths:
        raise SystemExit(f"{args.data}: no CSV files")
    print("median L - K (us) by device time K, then the mean |log error| of each floor form (its constants)")
    head = " | ".join(f"K {lo:g}-{hi:g}" for lo, hi in BUCKETS_US)
    print(f"| file | rows | {head} | p=4 | p=2 | additive | shaped additive |")
    print("|---|---:|" + "---:|" * (len(BUCKETS_US) + 4))
    ratios = []
    for path in paths:
        lat, ker = read(path)
        if len(lat) < 20:
            continue
        gaps = []
        for lo, hi in BUCKETS_US:
            sel = (ker >= lo) & (ker < hi)
            gaps.append(f"{np.median(lat[sel] - ker[sel]):5.1f} ({sel.sum()})" if sel.sum() >= 3 else "-")
        forms = [soft_max_error(lat, ker, q) for q in (4.0, 2.0, 1.0)]
        shaped = shaped_error(lat, ker)
        ratios.append(shaped[2])
        cells = [f"{100 * e:.1f} % (F {f:.1f})" for e, f in forms]
        cells.append(f"{100 * shaped[0]:.1f} % (F {shaped[1]:.1f}, r {shaped[2]:.2f})")
        print(f"| {path.stem} | {len(lat)} | " + " | ".join(gaps) + " | " + " | ".join(cells) + " |")
    print(f"\nshaped form: median r over the files {np.median(ratios):.2f} (knee {KNEE_US:g} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
