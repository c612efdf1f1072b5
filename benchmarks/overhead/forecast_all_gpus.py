"""Time one step's forecast for every GPU of the device database (the dominance envelope's cost,
learned_envelope.h), through habitat._engine.forecast_step, median of 7 after one warm-up.

    PYTHONPATH=python python3 benchmarks/overhead/forecast_all_gpus.py \
        [benchmarks/results/h100-sxm5-80gb/traces/gpt2_small_fp32.json.gz]
"""
from __future__ import annotations

import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from habitat import _engine
from habitat.data.engine import weights_dir

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "benchmarks/results/h100-sxm5-80gb/traces/gpt2_small_fp32.json.gz"


def main(argv: list[str]) -> int:
    trace = Path(argv[0]) if argv else DEFAULT
    names = [d["name"] for d in json.loads((ROOT / "python/habitat/data/devices.json").read_text())["devices"]]
    text = gzip.open(trace, "rt").read() if trace.suffix == ".gz" else trace.read_text()
    weights = str(weights_dir() or "")
    _engine.forecast_step(text, names, -1, weights)  # loads the weights
    times = []
    for _ in range(7):
        start = time.perf_counter()
        _engine.forecast_step(text, names, -1, weights)
        times.append(time.perf_counter() - start)
    print(f"{trace.name} x {len(names)} GPUs: median {statistics.median(times):.3f} s, min {min(times):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
