"""``print(forecast)`` of one large loaded step (issue 14): only the printed ops decoded.

    PYTHONPATH=python python3 benchmarks/scale/print_step.py [--ops N] [--repeat R]

A synthetic step of N ops (default 90,000: the golden trace's first step repeated with fresh
ids, as benchmarks/scale/scale.py builds them) is forecast with ``Forecast.from_trace`` for
three GPUs, then printed two ways, interleaved R times (default 3): as ``print(forecast)`` does
it (the step's trace not decoded: its printed ops decoded alone, see
``habitat.data.forecast.StepText``) and after decoding the whole trace first (the former
route: ``forecast.latest.trace`` then ``str``). The texts must be identical; prints the medians.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402

from habitat.data.engine import trace_document  # noqa: E402
from habitat.data.forecast import Forecast  # noqa: E402

TARGETS = ["A100", "H100", "L4"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=90_000, help="ops in the step (default 90000)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs (default 3)")
    args = parser.parse_args()
    origin, step = scale.synthetic_step(args.ops)
    doc = trace_document(origin, [step])
    fast, whole = [], []
    for _ in range(args.repeat):
        forecast = Forecast.from_trace(doc, TARGETS)
        start = time.perf_counter()
        a = str(forecast)
        fast.append(time.perf_counter() - start)
        forecast = Forecast.from_trace(doc, TARGETS)
        start = time.perf_counter()
        forecast.latest.trace  # noqa: B018  # the former route: the whole step decoded
        b = str(forecast)
        whole.append(time.perf_counter() - start)
        if a != b:
            print("the two prints differ", file=sys.stderr)
            return 1
    print(f"print(forecast), one step of {args.ops} ops x {len(TARGETS)} GPUs, median of {args.repeat}: "
          f"{statistics.median(fast):.2f} s (printed ops decoded alone) vs "
          f"{statistics.median(whole):.2f} s (whole step decoded first); identical text")
    return 0


if __name__ == "__main__":
    sys.exit(main())
