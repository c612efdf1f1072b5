"""The collective model against published nccl-tests all_reduce bus bandwidths (8 GPUs, one
NVSwitch node, 1 MiB - 1 GiB), by node cross-validation (README.md): every nccl-tests curve is
scored with the achieved constants fitted on the other curves of its fabric's pool (calibrate.py),
never on itself; a curve from another harness, in no fit, with the shipped constants.

    PYTHONPATH=python python3 benchmarks/collectives/compare_nccl_tests.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from habitat.analysis.cluster import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibrate  # noqa: E402  (beside this script)

DATA = calibrate.DATA
SIZES = (1 << 20, 1 << 30)  # the range: 1 MiB - 1 GiB


def _shipped(curve: dict, nbytes: int) -> dict:
    return Cluster(curve["device"], curve["ranks"]).collective("all_reduce", nbytes, algorithm=curve["algorithm"])


def score(curve: dict, collective: Callable[[dict, int], dict]) -> dict:
    """busbw per size in the issue's range, measured against the model timed by `collective`."""
    factor = 2 * (curve["ranks"] - 1) / curve["ranks"]  # nccl-tests: algbw = busbw / (2(n-1)/n)
    rows = []
    points = sorted((int(s), bw) for s, bw in curve["busbw_gbs"].items())
    for size, measured in [(s, bw) for s, bw in points if SIZES[0] <= s <= SIZES[1]]:
        e = collective(curve, size)
        rows.append({"bytes": size, "measured_busbw_gbs": measured,
                     "predicted_busbw_gbs": round(e["busbw_gbs"], 2), "algorithm": e["algorithm"],
                     "protocol": e["protocol"], "measured_us": round(size / (measured / factor * 1e9) * 1e6, 1),
                     "predicted_us": round(e["time_us"], 1),
                     "nccl_tuner_busbw_gbs": round(size * factor / (e["tuner_time_us"] * 1e-6) / 1e9, 2),
                     "error_pct": round((e["busbw_gbs"] - measured) / measured * 100, 1)})
    errs = [abs(r["error_pct"]) for r in rows]
    tuner = [abs(r["nccl_tuner_busbw_gbs"] - r["measured_busbw_gbs"]) / r["measured_busbw_gbs"] * 100 for r in rows]
    return {"rows": rows, "mean_abs_error_pct": round(sum(errs) / len(errs), 1), "max_abs_error_pct": max(errs),
            "within_15pct": sum(e <= 15 for e in errs), "points": len(errs),
            "nccl_tuner_mean_abs_error_pct": round(sum(tuner) / len(tuner), 1)}


def compare(data: Path = DATA) -> list[dict]:
    curves = calibrate.load_curves(data)
    held_out = calibrate.held_out_fits(curves)
    pools = calibrate.pools(curves)
    out = []
    for curve in curves:
        pool = calibrate.pool_name(curve)
        if curve["name"] in held_out:
            others = len(pools[pool]) - 1
            scored = f"held out (fitted on the other {others} curve{'s' if others > 1 else ''} of pool {pool})"
            result = score(curve, calibrate.collective_with(held_out[curve["name"]]))
            result["shipped_fit_mean_abs_error_pct"] = score(curve, _shipped)["mean_abs_error_pct"]
        else:
            scored = ("shipped constants (in no fit: another harness)" if pool is None else
                      f"shipped constants, fitted on this curve alone (pool {pool} has no other): a residual")
            result = score(curve, _shipped)
        out.append({"name": curve["name"], "device": curve["device"], "harness": curve["harness"],
                    "algorithm": curve["algorithm"], "scored": scored, "source": curve["source"], **result})
    return out


def by_gpu(results: list[dict]) -> dict[str, dict]:
    """Mean |error| over every size of a GPU type's curves (A100-SXM4 covers the 40 and 80 GB cards)."""
    groups: dict[str, list[dict]] = {}
    for c in results:
        groups.setdefault("-".join(c["device"].split("-")[:2]), []).append(c)
    out = {}
    for gpu, cs in groups.items():
        errs = [abs(r["error_pct"]) for c in cs for r in c["rows"]]
        out[gpu] = {"curves": len(cs), "points": len(errs), "mean_abs_error_pct": round(sum(errs) / len(errs), 1),
                    "within_15pct": sum(e <= 15 for e in errs)}
    return out


def side_by_side(device: str, data: Path = DATA, low: int = 32 << 10, high: int = 16 << 20) -> dict:
    """Every curve of one GPU family (device names starting with `device`: A100-SXM4 covers the 40
    and 80 GB cards, the same NVLink 3 fabric), time per call (us) from `low` to `high`, beside the
    model: where published curves of the same node type part, and how (the 8x A100 curves at 1-2 MiB)."""
    curves = [c for c in calibrate.load_curves(data) if c["device"].startswith(device)]
    cluster = Cluster(device, curves[0]["ranks"])
    sizes = sorted({int(s) for c in curves for s in c["busbw_gbs"] if low <= int(s) <= high})
    rows = []
    for size in sizes:
        e = cluster.collective("all_reduce", size)
        row = {"bytes": size, "model_us": round(e["time_us"], 1), "model": f"{e['algorithm']}/{e['protocol']}"}
        for c in curves:
            bw = c["busbw_gbs"].get(str(size))
            factor = 2 * (c["ranks"] - 1) / c["ranks"]
            row[c["name"]] = round(size * factor / (bw * 1e9) * 1e6, 1) if bw else None
        rows.append(row)
    return {"device": device, "curves": [c["name"] for c in curves], "rows": rows}


def print_side_by_side(t: dict) -> None:
    print(f"\n{t['device']}: time per all_reduce call (us), every published curve beside the model")
    names = t["curves"]
    print(f"  {'size':>8s} " + " ".join(f"{'curve ' + str(i + 1):>9s}" for i in range(len(names))) +
          f" {'model':>9s}  pick")
    for r in t["rows"]:
        size = r["bytes"] / 1024
        label = f"{size:.0f}K" if size < 1024 else f"{size / 1024:.0f}M"
        cells = " ".join(f"{r[n]:9.1f}" if r[n] is not None else f"{'-':>9s}" for n in names)
        print(f"  {label:>8s} {cells} {r['model_us']:9.1f}  {r['model']}")
    for i, n in enumerate(names):
        print(f"  curve {i + 1}: {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args()
    results = compare()
    for c in results:
        print(f"\n{c['name']} (algorithm {c['algorithm']}, {c['harness']})\n  scored: {c['scored']}"
              f"\n  source: {c['source'][:110]}...")
        print(f"  {'size':>9s} {'measured':>9s} {'model':>9s} {'algo/proto':>12s} {'error':>7s} "
              f"{'meas. us':>9s} {'model us':>9s} {'gap us':>7s}")
        for r in c["rows"]:
            size = r["bytes"] / 2**20
            print(f"  {size:7.0f}MB {r['measured_busbw_gbs']:9.1f} {r['predicted_busbw_gbs']:9.1f} "
                  f"{r['algorithm'] + '/' + r['protocol']:>12s} {r['error_pct']:+6.1f}% "
                  f"{r['measured_us']:9.1f} {r['predicted_us']:9.1f} {r['measured_us'] - r['predicted_us']:7.1f}")
        residual = c.get("shipped_fit_mean_abs_error_pct")
        print(f"  mean |error| {c['mean_abs_error_pct']}%, max {c['max_abs_error_pct']}%, "
              f"{c['within_15pct']}/{c['points']} sizes within 15% "
              f"(NCCL's tuner estimate alone: {c['nccl_tuner_mean_abs_error_pct']}%"
              + (f"; shipped constants, fitted with this curve: {residual}%" if residual is not None else "") + ")")
    gpus = by_gpu(results)
    print("\nper GPU type, every size of its curves:")
    for gpu, g in gpus.items():
        print(f"  {gpu:10s} {g['curves']} curves, {g['points']} sizes: mean |error| {g['mean_abs_error_pct']}%, "
              f"{g['within_15pct']}/{g['points']} within 15%")
    print("\nacross nodes: benchmarks/collectives/across_nodes.py")
    a100 = side_by_side("A100-SXM4")
    print_side_by_side(a100)
    if args.json:
        Path(args.json).write_text(json.dumps({"curves": results, "by_gpu": gpus},
                                              indent=1) + "\n")
        Path(args.json).with_name("a100_side_by_side.json").write_text(json.dumps(a100, indent=1) + "\n")


if __name__ == "__main__":
    main()
