"""Memory a long run's forecast holds per step (issue 14: bounded memory).

    PYTHONPATH=python python3 benchmarks/scale/step_memory.py [--steps N]

Appends N steps to a :class:`habitat.data.forecast.Forecast` as predict_on's worker does for
steady-state steps (``_add_forecast`` with the summary of one detailed step, reused), the
default ``keep_steps``, and prints the bytes tracemalloc sees allocated per appended step
(after a warm-up of 1,000 steps, so the detailed steps and the table of summaries are not
counted), the median of three runs. The summary is the engine's forecast of the golden trace's
first step (tests/python/fixtures/golden_trace.json) on three GPUs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from habitat.data import engine  # noqa: E402
from habitat.data.forecast import Forecast  # noqa: E402

GOLDEN = REPO / "tests" / "python" / "fixtures" / "golden_trace.json"
TARGETS = ["A100", "H100", "L4"]


def bytes_per_step(steps: int) -> float:
    doc = json.loads(GOLDEN.read_text())
    step = doc["steps"][0]
    summary, rows = engine.forecast_step_parts(doc["origin"], step, TARGETS, 1.0)
    forecast = Forecast(TARGETS, doc["origin"])

    def detail() -> tuple[dict, object]:
        return step, rows

    warm = 1000
    for i in range(warm):
        forecast._add_forecast(i, 1.0 + i * 1e-3, summary, detail, rows)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(warm, warm + steps):
        forecast._add_forecast(i, 1.0 + i * 1e-3, summary, detail, rows)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(forecast.steps) == warm + steps
    return (after - before) / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000, help="steps appended (default 100000)")
    args = parser.parse_args()
    runs = [bytes_per_step(args.steps) for _ in range(3)]
    print(f"bytes per appended reused step ({args.steps} steps, keep_steps default, median of 3): "
          f"{statistics.median(runs):.1f} B (runs: {', '.join(f'{r:.1f}' for r in runs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
