"""Fits the achieved-performance constants of the collective model on the published nccl-tests
curves of nccl_tests_all_reduce.json and prints them as devices.json's
`interconnects.links.<tier>.achieved` blocks (README.md, "Node cross-validation").

    PYTHONPATH=python python3 benchmarks/collectives/calibrate.py

Curves are pooled per fabric: every nccl-tests curve of a tier (NVLS-forced curves apart). The
shipped constants are the fit on a whole pool; compare_nccl_tests.py scores each pooled curve
with the fit on the other curves of its pool (leave one node out). A curve from another harness
enters no fit.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from habitat import _engine
from habitat.analysis.cluster import Cluster, interconnects
from habitat.data.devices import PACKAGED_DEVICES

DATA = Path(__file__).with_name("nccl_tests_all_reduce.json")
RING_BASE_US = {"LL": 6.6, "LL128": 14.0}  # NCCL tuning.cc baseLatencies (ring); Simple: the tier's
MIN_RING_BYTES = 64 << 10   # below this the LL latency floor carries no bandwidth information
MIN_NVLS_BYTES = 1 << 20    # NCCL's own tuner never picks NVLS below ~1-2 MiB on one node
NVLS_MAX_CHUNK = 131072     # NCCL_NVLS_CHUNKSIZE default
NVLS_CHANNELS = 16          # NCCL_NVLS_NCHANNELS default (NCCL 2.18-2.20, src/transport/nvls.cc)
PROTOCOLS = ("LL", "LL128", "Simple")
# No Hopper ring curve has been published with the whole range, so Hopper's ring protocols take
# the A100 fit: the same per-step latencies and the same share of NCCL's ring bandwidth
# (the tier's `efficiency`).
RING_CARRY_OVER = {"nvlink4-nvswitch": "nvlink3-nvswitch"}


def load_curves(data: Path = DATA) -> list[dict]:
    return json.loads(data.read_text())["curves"]


def pool_name(curve: dict) -> str | None:
    """The pool a curve is fitted in (its tier, NVLS-forced runs apart), or None: another harness."""
    if curve["harness"] != "nccl-tests":
        return None
    tier = Cluster(curve["device"], curve["ranks"]).intra["name"]
    return f"{tier}/nvls" if curve["algorithm"] == "nvls" else tier


def pools(curves: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in curves:
        if (name := pool_name(c)) is not None:
            out.setdefault(name, []).append(c)
    return out


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


def common_sizes(curves: list[dict]) -> tuple[int, int]:
    """From 64 KiB, the sizes every curve prints: each node of a pool weighs the same."""
    low = max([MIN_RING_BYTES] + [min(int(s) for s in c["busbw_gbs"]) for c in curves])
    return low, min(max(int(s) for s in c["busbw_gbs"]) for c in curves)


def fit(curves: list[dict]) -> dict:
    """The achieved constants of one tier, fitted on the pooled points of `curves`."""
    low, high = common_sizes(curves)
    n = curves[0]["ranks"]
    tier = Cluster(curves[0]["device"], n).intra
    spec = tier["bandwidth_gbs"] * 1e9
    picks = []  # (size, measured us, algorithm, protocol)
    for curve in curves:
        cluster = Cluster(curve["device"], n)
        for s, bw in sorted((int(s), bw) for s, bw in curve["busbw_gbs"].items()):
            if low <= s <= high:
                e = cluster.collective("all_reduce", s, algorithm=curve["algorithm"])
                picks.append((s, measured_us(s, bw, n), e["algorithm"], e["protocol"]))
    out: dict[str, Any] = {"tier": tier["name"], "calibrated_on": [c["name"] for c in curves],
                           "sizes": f"{low >> 10} KiB-{high >> 20} MiB"}
    for proto in PROTOCOLS:
        sel = [(s, t) for s, t, a, p in picks if a == "ring" and p == proto]
        if len(sel) < 2:
            continue
        size = np.array([s for s, _ in sel], float)
        t = np.array([t for _, t in sel])
        base = RING_BASE_US.get(proto, tier["base_latency_us"])
        bus_bytes = size * 2 * (n - 1) / n
        step_us, inv_fraction = _lstsq_relative([np.full_like(t, 2 * (n - 1)), bus_bytes / spec * 1e6], t - base)
        out[proto] = {"busbw_fraction": round(1 / inv_fraction, 3), "step_latency_us": round(step_us, 2),
                      "points": f"{int(size.min()) >> 10} KiB-{int(size.max()) >> 20} MiB ({len(sel)})"}
    sel = [(s, t) for s, t, a, _ in picks if a == "nvls" and s >= MIN_NVLS_BYTES]
    if len(sel) >= 2:
        ops = NVLS_CHANNELS * n
        size = np.array([s for s, _ in sel], float)
        t = np.array([t for _, t in sel])
        full = tier["nvls_algbw_fraction"] * spec
        extra = size * np.array([1 / nvls_chunk(s, ops) - 1 / NVLS_MAX_CHUNK for s in size]) / ops
        latency, overhead = _lstsq_relative([np.ones_like(t), extra], t - size / full * 1e6)
        out["nvls_latency_us"] = round(latency, 1)
        out["nvls_chunk_overhead_us"] = round(overhead, 2)
        out["nvls_channels"] = NVLS_CHANNELS
        out["nvls_points"] = f"{int(size.min()) >> 20} MiB-{int(size.max()) >> 20} MiB ({len(sel)})"
    return out


def carried_ring(ring_fit: dict, to_tier: str) -> dict:
    """A ring fit moved to another NVLink tier: same step latencies, same share of NCCL's ring
    bandwidth (the tiers' `efficiency`)."""
    scale = interconnects().link(to_tier)["efficiency"] / interconnects().link(ring_fit["tier"])["efficiency"]
    return {p: {"busbw_fraction": round(ring_fit[p]["busbw_fraction"] * scale, 3),
                "step_latency_us": ring_fit[p]["step_latency_us"]} for p in PROTOCOLS if p in ring_fit}


def achieved_blocks(fits: list[dict]) -> dict[str, dict]:
    """devices.json `achieved` blocks per tier from pool fits (NVLS and ring pools of a tier merged,
    Hopper's ring carried over from the A100 fit)."""
    blocks: dict[str, dict] = {}
    for f in fits:
        block = blocks.setdefault(f["tier"], {})
        block.update({k: v for k, v in f.items() if k in PROTOCOLS or (k.startswith("nvls_") and k != "nvls_points")})
    for to_tier, from_tier in RING_CARRY_OVER.items():
        source = next((f for f in fits if f["tier"] == from_tier and any(p in f for p in PROTOCOLS)), None)
        if source is not None and to_tier in blocks:
            for p, v in carried_ring(source, to_tier).items():
                blocks[to_tier].setdefault(p, v)
    for block in blocks.values():
        for p in PROTOCOLS:
            if p in block:
                block[p] = {k: block[p][k] for k in ("busbw_fraction", "step_latency_us")}
    return blocks


def collective_with(blocks: dict[str, dict]) -> Callable[[dict, int], dict]:
    """all_reduce on a curve's cluster, timed with these `achieved` blocks instead of the shipped ones."""
    override = {"interconnects": {"links": {tier: {"achieved": b} for tier, b in blocks.items()}}}
    db = _engine.Interconnects.from_documents([PACKAGED_DEVICES.read_text(), json.dumps(override)])

    def collective(curve: dict, nbytes: int) -> dict:
        gpu = Cluster(curve["device"], curve["ranks"]).gpu
        return db.make_cluster(gpu, curve["ranks"], None, None, None).collective(
            "all_reduce", float(nbytes), None, curve["algorithm"])
    return collective


def held_out_fits(curves: list[dict]) -> dict[str, dict[str, dict]]:
    """For every pooled curve, the `achieved` blocks fitted without it (its pool's other curves;
    the other pools as shipped, i.e. fitted whole)."""
    by_pool = pools(curves)
    whole = {name: fit(members) for name, members in by_pool.items()}
    out = {}
    for name, members in by_pool.items():
        for held in members:
            rest = [c for c in members if c is not held]
            if not rest:
                continue
            fits = [fit(rest) if other == name else f for other, f in whole.items()]
            out[held["name"]] = achieved_blocks(fits)
    return out


def shipped_fits(curves: list[dict]) -> dict[str, dict]:
    return achieved_blocks([fit(members) for members in pools(curves).values()])


def main() -> None:
    curves = load_curves()
    for name, members in pools(curves).items():
        f = fit(members)
        print(f"pool {name}: {len(members)} curves, {f['sizes']}")
        print(json.dumps({k: v for k, v in f.items() if k not in ("tier", "sizes")}, indent=1))
    print("\ndevices.json `achieved` blocks (whole pools; Hopper ring carried over from the A100 fit):")
    print(json.dumps(shipped_fits(curves), indent=1))


if __name__ == "__main__":
    main()
