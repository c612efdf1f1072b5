"""The uncalibrated step as seen (a detailed step alone) on every recorded format-2 trace.

    PYTHONPATH=python python benchmarks/timeline/uncalibrated.py [--json OUT]

Re-forecasts the format-2 traces of habitat.evaluate.uncalibrated.FORMAT2_RUNS for their own
GPU, prints the uncalibrated and calibrated step as seen against the measured untraced step,
the host breakdown (where the traced host time goes) and issue 31's figures. Runs on a CPU in
about half a minute; tests/python/evaluate/test_timeline_uncalibrated.py asserts the figures.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from habitat.evaluate.uncalibrated import evaluate, host_breakdown, markdown, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    rows = evaluate()
    s = summary(rows)
    print(markdown(rows))
    print()
    print(host_breakdown(rows))
    print()
    for name, figures in s.items():
        if isinstance(figures, dict):
            calibrated = (f"calibrated {figures['calibrated_mean_abs_pct']:.1f}% "
                          f"({figures['calibrated_within_10pct']}/{figures['calibrated_traces']} within 10%)"
                          if figures["calibrated_traces"] else "no steady-state wall to calibrate to")
            print(f"{name}: uncalibrated mean |error| {figures['uncalibrated_mean_abs_pct']:.1f}% "
                  f"({figures['uncalibrated_within_20pct']}/{figures['traces']} within 20%), {calibrated}")
    print("measured device-bound (kernel sum within 5% of the measured step): "
          + (", ".join(s["device_bound_measured"]) or "none")
          + "; of them forecast host-bound uncalibrated: " + (", ".join(s["device_bound_called_host_bound"]) or "none"))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
