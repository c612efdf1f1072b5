"""Writes the trace files that benchmarks/scale/json_parsers.cpp parses (issue 33).

    python3 benchmarks/scale/json_traces.py OUT_DIR      (habitat installed: pip install .)

The traces of scale.py's rows, written as save_trace writes them (the engine's canonical form):

- synthetic25.json: the "load" row's 25 MB trace (10k-op synthetic steps until that large);
- synthetic200k.json: the "CLI compare" row's one step of 200k synthetic ops;
- real.json: scale.py's real-ops step (11,362 recorded H100 ops, kernels and arguments) repeated
  as steps until 50 MB: real traces carry more strings and arguments than the synthetic ones.
"""
from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import real_ops_document, synthetic_step  # noqa: E402

from habitat.data.engine import trace_document  # noqa: E402
from habitat.data.trace import save_trace  # noqa: E402


def steps_until(step: dict, origin: dict, size: float) -> list[dict]:
    """Copies of `step`, indexed 0.., until their trace document is at least `size` bytes as
    saved (compact JSON)."""
    one = len(json.dumps(trace_document(origin, [step]), separators=(",", ":")))
    steps = []
    for index in range(math.ceil(size / one)):
        s = copy.deepcopy(step)
        s["index"] = index
        steps.append(s)
    return steps


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    origin, step = synthetic_step(10_000)
    save_trace(trace_document(origin, steps_until(step, origin, 25e6)), out / "synthetic25.json")
    _, big = synthetic_step(200_000)
    save_trace(trace_document(origin, [big]), out / "synthetic200k.json")
    del big
    real = real_ops_document()
    real["steps"] = steps_until(real["steps"][0], real["origin"], 50e6)
    save_trace(real, out / "real.json")
    for path in sorted(out.glob("*.json")):
        print(f"{path}: {path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
