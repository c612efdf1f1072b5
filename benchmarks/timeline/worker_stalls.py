"""Idle stalls in a traced step while predict_on's worker decodes the previous one (issue #15).

predict_on records its first two steps in detail; while step 1 runs, the worker thread
forecasts step 0. On a CUDA machine it also decoded the whole step into Python to find the
origin GPU (`decode_step`: one `json.loads`, a C call that holds the GIL throughout) until
commit 82e35cb, which reads the device in the engine; on the CPU it never did, so here the
decode time printed is that of reading the steps' traces afterwards, and step 1's gaps are
the worker's other work and the two busy cores. This measures the idle gaps longer than 1 ms
(no op open on any thread) in the trace of step 0 (worker idle) and of step 1 (worker busy).

    PYTHONPATH=python python3 benchmarks/timeline/worker_stalls.py [--turns 12] [--workload gpt_2x32_b2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cpu_replay  # noqa: E402
import torch  # noqa: E402

import habitat  # noqa: E402
from habitat.capture import worker as capture_worker  # noqa: E402


def idle_stalls_ms(trace: dict[str, Any], longer_than_us: float = 1000.0) -> float:
    """Time in gaps longer than `longer_than_us` in which no op of the step is open."""
    spans = sorted((op["start_us"], op["start_us"] + op["wall_us"]) for op in trace["ops"])
    total, end = 0.0, spans[0][1]
    for start, stop in spans[1:]:
        if start - end > longer_than_us:
            total += start - end
        end = max(end, stop)
    return total / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--workload", default="gpt_2x32_b2", choices=sorted(cpu_replay.workloads()))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    step = cpu_replay.workloads()[args.workload]()
    for _ in range(5):
        step()
    decode = capture_worker.decode_step
    decode_ms: list[float] = []

    def timed_decode(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return decode(*a, **k)
        finally:
            decode_ms.append(1000 * (time.perf_counter() - t0))

    capture_worker.decode_step = timed_decode  # measured, not changed
    first, second = [], []
    try:
        for _ in range(args.turns):
            predictor = habitat.predict_on(cpu_replay.REPLAY_AS, detail_steps=2)
            for _ in range(2):
                with predictor as forecast:
                    step()
            predictor.close()
            first.append(idle_stalls_ms(forecast.steps[0].trace))
            second.append(idle_stalls_ms(forecast.steps[1].trace))
    finally:
        capture_worker.decode_step = decode
    print(f"{args.workload}, {args.turns} turns, load {os.getloadavg()[0]:.2f} (1-min)")
    print(f"decode_step: median {statistics.median(decode_ms):.1f} ms")
    print(f"idle stalls > 1 ms, step 0 (worker idle): median {statistics.median(first):.2f} ms, "
          f"max {max(first):.2f}")
    print(f"idle stalls > 1 ms, step 1 (worker decoding step 0): median {statistics.median(second):.2f} ms, "
          f"max {max(second):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
