"""Host-aware forecasts (the timeline) against the recorded GPU runs: the per-trace error table.

    PYTHONPATH=python python benchmarks/timeline/timeline_accuracy.py [--json OUT] [--no-cpu-proxy]

Re-forecasts the 16 recorded format-1 traces (benchmarks/results/{h100-sxm5-80gb,h200-sxm-141gb}/
traces) and the 8 format-2 traces of the later H100 run (h100-sxm5-80gb-2026-11-23/traces) for
their own GPU and for the other one, and as CPU-traced steps (proxy), and prints each error
against the measured step (benchmark.measured.median_ms). How each column is made, and
what is held out: python/habitat/evaluate/timeline.py. Runs on CPU in about a minute.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from habitat import _engine
from habitat.evaluate.timeline import (
    evaluate,
    host_breakdown,
    host_difference,
    markdown,
    own_errors_with_constant,
    summary,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    parser.add_argument("--no-cpu-proxy", action="store_true", help="skip the CPU-origin proxy column")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    rows = evaluate(cpu_proxy=not args.no_cpu_proxy, later=True)
    print(markdown(rows))
    print()
    print(host_difference(rows))
    s = summary(rows)
    print("format 1 (16 traces of 2026-11-22):")
    print(f"own GPU: mean |error| {s['own_mean_abs_pct']:.1f}% (kernel sum before: "
          f"{s['kernel_sum_mean_abs_pct']:.1f}%), {s['own_within_10pct']}/{s['traces']} within 10%")
    print("over 10% on their own GPU: " + ("; ".join(s["own_over_10pct"]) or "none"))
    print(f"cross GPU: mean |error| {s['cross_mean_abs_pct']:.1f}% with the origin's host, "
          f"{s['cross_ref_host_mean_abs_pct']:.1f}% with the other machine's host as reference")
    fixed = own_errors_with_constant(_engine.DEFAULT_OVERHEAD_PER_OP_US)
    within = sum(abs(v) <= 10 for v in fixed.values())
    print(f"own GPU with the fixed per-op cost of prof2_cupti.json ({_engine.DEFAULT_OVERHEAD_PER_OP_US} us) "
          f"instead of each step's wrapper-op estimate: mean |error| "
          f"{sum(abs(v) for v in fixed.values()) / len(fixed):.1f}%, {within}/{len(fixed)} within 10% ("
          + ", ".join(f"{w} {m[:4]} {v:+.1f}%" for (m, w), v in fixed.items()) + ")")
    if s["cpu_proxy_mean_abs_pct"] is not None:
        print(f"CPU-origin proxy: mean |error| {s['cpu_proxy_mean_abs_pct']:.1f}%, "
              f"{s['cpu_proxy_within_15pct']}/{s['traces']} within 15%")
    later = s.get("later")
    if later:
        print(f"format 2 ({later['traces']} traces of the later runs): own GPU mean |error| "
              f"{later['own_mean_abs_pct']:.1f}% (kernel sum: {later['kernel_sum_mean_abs_pct']:.1f}%), "
              f"{later['own_within_10pct']}/{later['traces']} within 10%; cross GPU (vs the other GPU's "
              f"format-1 run) {later['cross_mean_abs_pct']:.1f}% origin host, "
              f"{later['cross_ref_host_mean_abs_pct']:.1f}% reference host")
        print("over 10% on their own GPU: " + ("; ".join(later["own_over_10pct"]) or "none"))
        print()
        print(host_breakdown(rows))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
