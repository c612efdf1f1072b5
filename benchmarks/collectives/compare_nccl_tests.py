"""The collective model against published nccl-tests all_reduce bus bandwidths (8 GPUs, one
NVSwitch node, 1 MiB - 1 GiB). Curves with role "evaluation" were never fitted to; the
"calibration" curves (what benchmarks/collectives/calibrate.py fitted the achieved constants on)
are listed too, as the fit's residuals, and kept out of the evaluation figures.

    PYTHONPATH=python python3 benchmarks/collectives/compare_nccl_tests.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from habitat.analysis.cluster import Cluster

DATA = Path(__file__).with_name("nccl_tests_all_reduce.json")
SIZES = (1 << 20, 1 << 30)  # the range: 1 MiB - 1 GiB


def compare(data: Path = DATA) -> list[dict]:
    out = []
    for curve in json.loads(data.read_text())["curves"]:
        cluster = Cluster(curve["device"], curve["ranks"])
        rows = []
        points = sorted((int(s), bw) for s, bw in curve["busbw_gbs"].items())
        for size, measured in [(s, bw) for s, bw in points if SIZES[0] <= s <= SIZES[1]]:
            e = cluster.collective("all_reduce", size, algorithm=curve.get("algorithm", "auto"))
            # nccl-tests' time: bytes / algbw, algbw = busbw / (2(n-1)/n).
            factor = 2 * (curve["ranks"] - 1) / curve["ranks"]
            measured_us = int(size) / (measured / factor * 1e9) * 1e6
            rows.append({"bytes": int(size), "measured_busbw_gbs": measured,
                         "predicted_busbw_gbs": round(e["busbw_gbs"], 2), "algorithm": e["algorithm"],
                         "protocol": e["protocol"], "measured_us": round(measured_us, 1),
                         "predicted_us": round(e["time_us"], 1),
                         "nccl_tuner_busbw_gbs": round(size * factor / (e["tuner_time_us"] * 1e-6) / 1e9, 2),
                         "error_pct": round((e["busbw_gbs"] - measured) / measured * 100, 1)})
        errs = [abs(r["error_pct"]) for r in rows]
        out.append({"name": curve["name"], "role": curve["role"], "algorithm": curve.get("algorithm", "auto"),
                    "source": curve["source"], "rows": rows,
                    "mean_abs_error_pct": round(sum(errs) / len(errs), 1), "max_abs_error_pct": max(errs),
                    "within_15pct": sum(e <= 15 for e in errs), "points": len(errs),
                    "nccl_tuner_mean_abs_error_pct": round(sum(
                        abs(r["nccl_tuner_busbw_gbs"] - r["measured_busbw_gbs"]) / r["measured_busbw_gbs"] * 100
                        for r in rows) / len(rows), 1)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args()
    results = compare()
    for c in results:
        print(f"\n[{c['role']}] {c['name']} (algorithm {c['algorithm']})\n  source: {c['source'][:110]}...")
        print(f"  {'size':>9s} {'measured':>9s} {'model':>9s} {'algo/proto':>12s} {'error':>7s} "
              f"{'meas. us':>9s} {'model us':>9s} {'gap us':>7s}")
        for r in c["rows"]:
            size = r["bytes"] / 2**20
            print(f"  {size:7.0f}MB {r['measured_busbw_gbs']:9.1f} {r['predicted_busbw_gbs']:9.1f} "
                  f"{r['algorithm'] + '/' + r['protocol']:>12s} {r['error_pct']:+6.1f}% "
                  f"{r['measured_us']:9.1f} {r['predicted_us']:9.1f} {r['measured_us'] - r['predicted_us']:7.1f}")
        print(f"  mean |error| {c['mean_abs_error_pct']}%, max {c['max_abs_error_pct']}%, "
              f"{c['within_15pct']}/{c['points']} sizes within 15% "
              f"(NCCL's tuner estimate alone: {c['nccl_tuner_mean_abs_error_pct']}%)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
