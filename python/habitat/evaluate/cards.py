"""Two GPUs measured on the same GEMM shapes: how much faster one really is than the other, and
how much faster Habitat's GEMM forecast says it is.

    python -m habitat.evaluate cards --data NEUSIGHT_DATA [--origin GPU] [--target GPU]

Why it exists: Habitat's FP32 GEMM model has one Ampere GPU in its training data, NeuSight's
A100 PCIe 40GB (250 W). NeuSight's test/ set measured the same shapes, with the same cuBLAS
kernels and software, on that card and on the A100 80GB PCIe (300 W); the device database gives
both the same SMs, clock and 19.5 TFLOPS FP32 peak. Compute-bound rows (at least `MIN_MS` on
both cards) isolate what the database cannot see: how close each card stays to its boost clock
under sustained SGEMM load. See weights/README.md, "Why A100 FP32 GEMMs are forecast at ~82 %".
"""
from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from habitat.evaluate import predictors as P
from habitat.learned.devices import DeviceTable

DEFAULT_ORIGIN = "NVIDIA A100-PCIE-40GB"
DEFAULT_TARGET = "NVIDIA A100 80GB PCIe"
OPS = ("bmm", "linear")
MIN_MS = 1.0  # well above every harness floor (22-100 us): the kernel's own time dominates


def _rows(path: Path, origin: str, target: str) -> dict[tuple[int, int, int, int], dict[str, tuple[float, str]]]:
    """(B, M, N, K) -> {device: (latency ms, kernel name)} for the two devices."""
    by: dict[tuple[int, int, int, int], dict[str, tuple[float, str]]] = defaultdict(dict)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["Device"] in (origin, target):
                key = (int(r["B"]), int(r["M"]), int(r["N"]), int(r["K"]))
                by[key][r["Device"]] = (float(r["Latency"]), r.get("Kernel Name", ""))
    return by


def _quartiles(x: np.ndarray) -> dict[str, float]:
    q25, q50, q75 = np.percentile(x, [25, 50, 75])
    return {"q25": float(q25), "median": float(q50), "q75": float(q75)}


def evaluate(data: Path, models: P.ModelSet, devices: DeviceTable, origin: str = DEFAULT_ORIGIN,
             target: str = DEFAULT_TARGET, folder: str = "test") -> dict:
    gemm = models.shipped.get("gemm")
    if gemm is None:
        raise FileNotFoundError("no gemm model in the weights directory: the forecast ratio needs one")
    dev_o, dev_t = devices.find(origin), devices.find(target)
    out: dict = {"origin": origin, "target": target, "folder": folder, "min_ms": MIN_MS, "ops": {}}
    for op in OPS:
        path = data / folder / f"{op}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: --data must be a NeuSight-format folder with {folder}/{op}.csv")
        by = _rows(path, origin, target)
        keys = [k for k, v in by.items() if len(v) == 2 and min(t for t, _ in v.values()) >= MIN_MS]
        if not keys:
            out["ops"][op] = {"n": 0}
            continue
        same_kernel = sum(1 for k in keys if by[k][origin][1] == by[k][target][1])
        # NeuSight's A[B,M,N] x B[B,N,K]: N is the reduction, so Habitat's (b, m, n, k) = (B, M, K, N).
        arr = np.array(keys, dtype=float)
        shapes = {"b": arr[:, 0], "m": arr[:, 1], "n": arr[:, 3], "k": arr[:, 2],
                  "elem_bytes": np.full(len(keys), 4.0)}
        flops = 2.0 * arr[:, 0] * arr[:, 1] * arr[:, 2] * arr[:, 3]
        meas_o = np.array([by[k][origin][0] for k in keys]) * 1e3
        meas_t = np.array([by[k][target][0] for k in keys]) * 1e3
        fc_o = gemm.predict(shapes, dev_o, "fp32")
        fc_t = gemm.predict(shapes, dev_t, "fp32")
        out["ops"][op] = {
            "n": len(keys),
            "same_kernel": same_kernel,
            "measured_origin_over_target": _quartiles(meas_o / meas_t),
            "forecast_origin_over_target": _quartiles(fc_o / fc_t),
            "measured_tflops": {origin: float(np.median(flops / meas_o / 1e6)),
                                target: float(np.median(flops / meas_t / 1e6))},
            "forecast_over_measured": {origin: float(np.median(fc_o / meas_o)),
                                       target: float(np.median(fc_t / meas_t))},
            "fp32_peak_tflops": {origin: dev_o.peak_flops("fp32") / 1e12, target: dev_t.peak_flops("fp32") / 1e12},
        }
    return out


def print_report(results: dict) -> None:
    o, t = results["origin"], results["target"]
    print(f"== {o} vs {t}: the same {results['folder']}/ GEMM shapes, rows >= {results['min_ms']} ms on both")
    for op, r in results["ops"].items():
        if not r["n"]:
            print(f"{op:7s} no shared compute-bound rows")
            continue
        m, f = r["measured_origin_over_target"], r["forecast_origin_over_target"]
        print(f"{op:7s} n {r['n']:5d} (same kernel {r['same_kernel']})  time {o} / {t}: measured "
              f"{m['median']:.3f} [{m['q25']:.3f}, {m['q75']:.3f}], forecast {f['median']:.3f}")
        for dev in (o, t):
            peak = r["fp32_peak_tflops"][dev]
            tf = r["measured_tflops"][dev]
            print(f"        {dev:24s} measured {tf:5.2f} TFLOPS ({100 * tf / peak:4.1f} % of {peak:.1f}), "
                  f"forecast/measured {r['forecast_over_measured'][dev]:.3f}")
    if not any(r["n"] for r in results["ops"].values()):
        return
    ratios = [r["measured_origin_over_target"]["median"] for r in results["ops"].values() if r["n"]]
    print(f"(geometric mean of the medians: measured {math.exp(np.mean(np.log(ratios))):.3f})")
