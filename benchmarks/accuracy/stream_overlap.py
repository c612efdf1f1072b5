"""Ops whose kernels overlap on the device: per op name of a recorded GPU trace (format 2, with
CUPTI's device start times), its kernels' summed durations against the time the device was busy
with them (the union of their intervals), for every op whose kernels ran on more than one stream.

    python benchmarks/accuracy/stream_overlap.py TRACE.json.gz [...]

A kernel sum counts concurrent kernels in full, each stretched by the others it shares the GPU
with; the engine forecasts an op as its kernels one after another, each alone. cuDNN's stacked
LSTM layers run as a wavefront on several streams (benchmarks/results/real-models-cpu-trace.md).
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

import op_classes


def overlap_by_op(step: dict) -> dict[str, tuple[int, float, float]]:
    """op name -> (kernels, summed durations us, busy us) for ops with kernels on several streams."""
    kernels: dict[str, list[dict]] = defaultdict(list)
    for op in step["ops"]:
        kernels[op["name"]] += [k for k in op.get("kernels", []) if k.get("device_start_us") is not None]
    out = {}
    for name, ks in kernels.items():
        if len({k.get("stream") for k in ks}) < 2:
            continue
        out[name] = (len(ks), sum(k["duration_us"] for k in ks), op_classes.busy_us(ks) or 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", type=Path)
    args = ap.parse_args(argv)
    print("| trace | op | kernels | summed durations ms | device busy ms | sum / busy |")
    print("|---|---|---|---|---|---|")
    for path in args.traces:
        with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
            doc = json.load(f)
        for name, (n, summed, busy) in sorted(overlap_by_op(doc["steps"][0]).items()):
            print(f"| {path.parent.parent.name}/{path.name} | {name} | {n} | {summed / 1e3:.2f} | {busy / 1e3:.2f} | {summed / busy:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
