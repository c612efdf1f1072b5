"""Fits the achieved-performance constants of the collective model on the calibration curves of
nccl_tests_all_reduce.json (role "calibration"; never on the "evaluation" curves) and prints them
as devices.json's `interconnects.links.<tier>.achieved` blocks.

    PYTHONPATH=python python3 benchmarks/collectives/calibrate.py

NCCL's tuner (the engine's reimplementation, unchanged by these constants) picks the algorithm and
protocol for every size; the points NCCL ran with one protocol then give, by linear least squares
on relative time error:
- ring, per protocol p:  time = base[p] + 2(n-1) x step_latency + bus bytes / (fraction x spec)
  (base: NCCL's per-call baseLatencies, 6.6 / 14 / 8.4 us for LL / LL128 / Simple);
- NVLS:  time = latency + bytes / algbw(chunk), 1/algbw(c) = 1/algbw(128K) +
  overhead / (channels x heads) x (1/c - 1/128K), c = NCCL's NVLS chunk for the size (enqueue.cc),
  algbw(128K) = nvls_algbw_fraction x spec from devices.json (NCCL maintainer's ~275 GB/s).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from habitat.analysis.cluster import Cluster

DATA = Path(__file__).with_name("nccl_tests_all_reduce.json")
RING_BASE_US = {"LL": 6.6, "LL128": 14.0}  # NCCL tuning.cc baseLatencies (ring); Simple: the tier's
MIN_RING_BYTES = 64 << 10   # below this the LL latency floor carries no bandwidth information
MIN_NVLS_BYTES = 1 << 20    # NCCL's own tuner never picks NVLS below ~1-2 MiB on one node
NVLS_MAX_CHUNK = 131072     # NCCL_NVLS_CHUNKSIZE default
NVLS_CHANNELS = 16          # NCCL_NVLS_NCHANNELS default (NCCL 2.18-2.20, src/transport/nvls.cc)


def nvls_chunk(nbytes: float, ops: float) -> float:
    chunk = NVLS_MAX_CHUNK
    if nbytes < 64 * ops * chunk and chunk > 65536:
        chunk = 65536
    if nbytes < 8 * ops * chunk and chunk > 32768:
        chunk = 32768
    if nbytes < 2 * ops * chunk and chunk > 16384:
        chunk = 16384
    return chunk


def _lstsq_relative(columns: list[np.ndarray], target: np.ndarray) -> np.ndarray:
    """min sum((target - X b) / target)^2: every point weighs the same in relative error."""
    x = np.vstack(columns).T / target[:, None]
    coef, *_ = np.linalg.lstsq(x, np.ones_like(target), rcond=None)
    return coef


def measured_us(size: int, busbw_gbs: float, ranks: int) -> float:
    return size * 2 * (ranks - 1) / ranks / (busbw_gbs * 1e9) * 1e6


def fit_curve(curve: dict) -> dict:
    n = curve["ranks"]
    cluster = Cluster(curve["device"], n)
    tier = cluster.intra
    spec = tier["bandwidth_gbs"] * 1e9
    points = sorted((int(s), bw) for s, bw in curve["busbw_gbs"].items())
    picks = [(s, bw, cluster.collective("all_reduce", s, algorithm=curve["algorithm"])) for s, bw in points]
    out: dict = {"tier": tier["name"], "calibrated_on": curve["name"]}
    for proto in ("LL", "LL128", "Simple"):
        sel = [(s, bw) for s, bw, e in picks
               if e["algorithm"] == "ring" and e["protocol"] == proto and s >= MIN_RING_BYTES]
        if len(sel) < 2:
            continue
        size = np.array([s for s, _ in sel], float)
        t = np.array([measured_us(s, bw, n) for s, bw in sel])
        base = RING_BASE_US.get(proto, tier["base_latency_us"])
        bus_bytes = size * 2 * (n - 1) / n
        steps = 2 * (n - 1)
        step_us, inv_fraction = _lstsq_relative([np.full_like(t, steps), bus_bytes / spec * 1e6], t - base)
        out[proto] = {"busbw_fraction": round(1 / inv_fraction, 3), "step_latency_us": round(step_us, 2),
                      "points": f"{int(size.min()) >> 10} KiB-{int(size.max()) >> 20} MiB ({len(sel)})"}
    sel = [(s, bw) for s, bw, e in picks if e["algorithm"] == "nvls" and s >= MIN_NVLS_BYTES]
    if len(sel) >= 2:
        ops = NVLS_CHANNELS * n
        size = np.array([s for s, _ in sel], float)
        t = np.array([measured_us(s, bw, n) for s, bw in sel])
        full = tier["nvls_algbw_fraction"] * spec
        extra = size * np.array([1 / nvls_chunk(s, ops) - 1 / NVLS_MAX_CHUNK for s in size]) / ops
        latency, overhead = _lstsq_relative([np.ones_like(t), extra], t - size / full * 1e6)
        out["nvls_latency_us"] = round(latency, 1)
        out["nvls_chunk_overhead_us"] = round(overhead, 2)
        out["nvls_channels"] = NVLS_CHANNELS
        out["nvls_points"] = f"{int(size.min()) >> 20} MiB-{int(size.max()) >> 20} MiB ({len(sel)})"
    return out


def main() -> None:
    curves = [c for c in json.loads(DATA.read_text())["curves"] if c["role"] == "calibration"]
    for curve in curves:
        print(json.dumps(fit_curve(curve), indent=1))


if __name__ == "__main__":
    main()
