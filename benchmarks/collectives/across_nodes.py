"""The collective model across nodes against published multi-node nccl-tests all_reduce curves
(multinode_all_reduce.json), by the protocol in README.md ("Across nodes: the calibration
protocol"): NCCL's tuner pick stays; its time across nodes becomes
``latency_scale x the tuner's latency + the tuner's bandwidth time / busbw_share``, the two
constants fitted per pool (two nodes; more than two nodes) by linear least squares on relative
time error, every curve scored with the constants fitted on the other curves of its pool.

    PYTHONPATH=python python3 benchmarks/collectives/across_nodes.py [--json OUT]

prints each curve held out, the listed-apart curves and spot checks with the shipped constants,
and the devices.json blocks (the fit on each whole pool).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from habitat.analysis.cluster import Cluster

DATA = Path(__file__).with_name("multinode_all_reduce.json")
SIZES = (1 << 20, 1 << 30)  # the range: 1 MiB - 1 GiB
POOLS = ("two nodes", "more than two nodes")


def load(data: Path = DATA) -> dict:
    return json.loads(data.read_text())


def pool_of(curve: dict) -> str | None:
    """The pool a curve is fitted in, or None (forced settings: listed apart)."""
    if curve.get("forced"):
        return None
    return POOLS[0] if curve["ranks"] <= 2 * curve["gpus_per_node"] else POOLS[1]


def _cluster(curve: dict) -> Cluster:
    return Cluster(curve["device"], curve["ranks"], curve["gpus_per_node"], network=curve["network"])


def points(curve: dict, sizes: tuple[int, int] = SIZES) -> list[dict]:
    """Per size in range: measured time (us, from busbw as nccl-tests computes it), the tuner's
    latency and bandwidth time of its pick, and the shipped model's busbw."""
    n = curve["ranks"]
    factor = 2 * (n - 1) / n  # nccl-tests: busbw = algbw x 2(n-1)/n
    cluster = _cluster(curve)
    out = []
    for size, busbw in sorted((int(s), bw) for s, bw in curve["busbw_gbs"].items()):
        if not sizes[0] <= size <= sizes[1]:
            continue
        e = cluster.collective("all_reduce", size, algorithm=curve.get("algorithm", "auto"))
        out.append({"bytes": size, "measured_busbw_gbs": busbw,
                    "measured_us": size * factor / (busbw * 1e9) * 1e6,
                    "latency_us": e["tuner_latency_us"], "bandwidth_us": e["tuner_time_us"] - e["tuner_latency_us"],
                    "tuner_busbw_gbs": size * factor / (e["tuner_time_us"] * 1e-6) / 1e9,
                    "shipped_busbw_gbs": e["busbw_gbs"], "pick": f"{e['algorithm']}/{e['protocol']}"})
    return out


def fit(curves: list[dict]) -> dict[str, float]:
    """latency_scale and busbw_share minimising the relative time error over every point of
    `curves` (each curve's sizes weigh the same: every curve prints the same 11 sizes)."""
    rows = [p for c in curves for p in points(c)]
    t = np.array([p["measured_us"] for p in rows])
    x = np.vstack([[p["latency_us"] for p in rows], [p["bandwidth_us"] for p in rows]]).T / t[:, None]
    (lam, beta), *_ = np.linalg.lstsq(x, np.ones(len(rows)), rcond=None)
    if lam <= 0 or beta <= 0:
        raise ValueError(f"the fit is not physical (latency_scale {lam:.3f}, 1/busbw_share {beta:.3f})")
    return {"latency_scale": round(float(lam), 4), "busbw_share": round(float(1.0 / beta), 4)}


def score(curve: dict, constants: dict[str, float] | None) -> dict:
    """busbw error per size with `constants` (None: the shipped model as it stands)."""
    rows = []
    for p in points(curve):
        if constants is None:
            predicted = p["shipped_busbw_gbs"]
        else:
            t = constants["latency_scale"] * p["latency_us"] + p["bandwidth_us"] / constants["busbw_share"]
            predicted = p["measured_busbw_gbs"] * p["measured_us"] / t
        rows.append({"bytes": p["bytes"], "measured_busbw_gbs": p["measured_busbw_gbs"],
                     "predicted_busbw_gbs": round(predicted, 2), "pick": p["pick"],
                     "tuner_busbw_gbs": round(p["tuner_busbw_gbs"], 2),
                     "error_pct": round((predicted - p["measured_busbw_gbs"]) / p["measured_busbw_gbs"] * 100, 1),
                     "tuner_error_pct": round((p["tuner_busbw_gbs"] - p["measured_busbw_gbs"])
                                              / p["measured_busbw_gbs"] * 100, 1)})
    errs = [abs(r["error_pct"]) for r in rows]
    return {"rows": rows, "mean_abs_error_pct": round(sum(errs) / len(errs), 1),
            "within_25pct": sum(e <= 25 for e in errs), "points": len(errs),
            "tuner_mean_abs_error_pct": round(sum(abs(r["tuner_error_pct"]) for r in rows) / len(rows), 1)}


def evaluate(data: Path = DATA) -> dict:
    """Every pooled curve held out, the whole-pool fits, the rest with the shipped constants."""
    doc = load(data)
    curves = doc["curves"]
    pools = {name: [c for c in curves if pool_of(c) == name] for name in POOLS}
    out: dict = {"fits": {}, "curves": [], "spot_checks": []}
    for name, members in pools.items():
        if len(members) >= 1:
            out["fits"][name] = {**fit(members), "curves": [c["name"] for c in members]}
        for c in members:
            others = [o for o in members if o is not c]
            held = fit(others) if others else None
            result = score(c, held) if held else score(c, out["fits"][name])
            out["curves"].append({"name": c["name"], "pool": name, "network": c["network"],
                                  "scored": (f"held out (fitted on the other {len(others)} curve"
                                             f"{'s' if len(others) > 1 else ''} of its pool)" if held
                                             else "its own pool's fit (alone in the pool: a residual)"),
                                  "fit": held, "source": c["source"], **result})
    for c in curves:
        if pool_of(c) is None:
            out["curves"].append({"name": c["name"], "pool": None, "network": c["network"],
                                  "scored": f"shipped constants (forced: {c['forced']}; in no fit)",
                                  "fit": None, "source": c["source"], **score(c, None)})
    for s in doc.get("spot_checks", []):
        cluster = _cluster(s)
        factor = 2 * (s["ranks"] - 1) / s["ranks"]
        for size, busbw in sorted((int(k), v) for k, v in s["busbw_gbs"].items()):
            e = cluster.collective("all_reduce", size)
            out["spot_checks"].append({"name": s["name"], "bytes": size, "measured_busbw_gbs": busbw,
                                       "predicted_busbw_gbs": round(e["busbw_gbs"], 2),
                                       "error_pct": round((e["busbw_gbs"] - busbw) / busbw * 100, 1),
                                       "measured_us": round(size * factor / (busbw * 1e9) * 1e6, 1),
                                       "source": s["source"]})
    two = [c for c in out["curves"] if c["pool"] == POOLS[0]]
    out["two_nodes_held_out_mean_abs_error_pct"] = round(float(np.mean([c["mean_abs_error_pct"] for c in two])), 1)
    return out


def devices_blocks(fits: dict) -> dict:
    """The devices.json `achieved` entries every network tier carries."""
    return {"two_nodes": {k: fits[POOLS[0]][k] for k in ("latency_scale", "busbw_share")},
            "more_nodes": {k: fits[POOLS[1]][k] for k in ("latency_scale", "busbw_share")}}


def _label(nbytes: int) -> str:
    return f"{nbytes >> 20}M" if nbytes < 1 << 30 else f"{nbytes >> 30}G"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args()
    r = evaluate()
    for c in r["curves"]:
        print(f"\n{c['name']} [{c['network']}]\n  scored: {c['scored']}"
              + (f" latency_scale {c['fit']['latency_scale']}, busbw_share {c['fit']['busbw_share']}" if c["fit"] else ""))
        print(f"  {'size':>6s} {'measured':>9s} {'model':>8s} {'error':>7s} {'tuner':>8s} {'error':>7s}  pick")
        for row in c["rows"]:
            print(f"  {_label(row['bytes']):>6s} {row['measured_busbw_gbs']:9.1f} {row['predicted_busbw_gbs']:8.1f} "
                  f"{row['error_pct']:+6.1f}% {row['tuner_busbw_gbs']:8.1f} {row['tuner_error_pct']:+6.1f}%  {row['pick']}")
        print(f"  mean |error| {c['mean_abs_error_pct']}% ({c['within_25pct']}/{c['points']} within 25%); "
              f"NCCL's tuner alone {c['tuner_mean_abs_error_pct']}%")
    print(f"\ntwo-node curves held out: mean |error| {r['two_nodes_held_out_mean_abs_error_pct']}%")
    print("\nspot checks (shipped constants):")
    for s in r["spot_checks"]:
        print(f"  {s['name'][:70]:70s} {_label(s['bytes']):>4s} measured {s['measured_busbw_gbs']:6.1f} "
              f"model {s['predicted_busbw_gbs']:6.1f} ({s['error_pct']:+.1f}%)")
    print("\nwhole-pool fits (devices.json, every network tier's achieved block):")
    print(json.dumps(devices_blocks(r["fits"]), indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")


if __name__ == "__main__":
    main()
