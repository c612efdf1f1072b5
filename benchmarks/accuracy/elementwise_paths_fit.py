"""The per-element bound of ATen's non-vectorized element-wise kernels
(csrc/src/cost/aten_loops.h kNonVectorizedCyclesPerElement), measured on recorded GPU
steps, and how well the engine tells the kernels apart.

    python benchmarks/accuracy/elementwise_paths_fit.py [--results DIR]

ATen runs a point-wise op as one of three kernels (CUDALoops.cuh): vectorized_elementwise_kernel
(contiguous operands of one dtype), unrolled_elementwise_kernel (contiguous, mixed floating
dtypes: a cast per operand) and elementwise_kernel with an offset calculator (a strided or
broadcast operand). Per recorded op with one such kernel of at least MIN_US: its SM cycles per
output element, time x SMs x clock / elements. The constant is the median over the two
non-vectorized kernels of the training runs (habitat.learned.traces.RUNS, the four networks of
benchmarks/gpu/models.py); the real networks of benchmarks/results/real-models-gpu score it
(held out: the bound alone against each such kernel's time). Then the engine's own call
(`vectorized` of its element-wise part) against the kernel each op of those traces ran.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from habitat.learned.devices import default_table  # noqa: E402
from habitat.learned.traces import RUNS  # noqa: E402

MIN_US = 8.0  # shorter kernels are launch- and tail-bound
HELD_OUT = ("real-models-gpu/h100-sxm5-80gb", "real-models-gpu/h200-sxm-141gb")
KERNELS = (("vectorized", "vectorized_elementwise_kernel"), ("unrolled", "unrolled_elementwise_kernel"),
           ("offset", "_ZN2at6native18elementwise_kernel"))


def kernel_kind(name: str) -> str | None:
    return next((kind for kind, key in KERNELS if key in name), None)


def load(path: Path) -> dict:
    import gzip

    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        return json.load(f)


def samples(results: Path, runs: tuple[str, ...]) -> list[tuple[str, str, float, float]]:
    """(kind, gpu, elements, us) of every op with one element-wise kernel of at least MIN_US."""
    devices = default_table()
    out = []
    for run in runs:
        for path in sorted((results / run / "traces").glob("*.json.gz")):
            doc = load(path)
            gpu = devices.find(doc["origin"]["device"]).name
            for op in doc["steps"][0]["ops"]:
                ks = op.get("kernels", [])
                if len(ks) != 1 or ks[0]["duration_us"] < MIN_US or (kind := kernel_kind(ks[0]["name"])) is None:
                    continue
                shapes = [t["shape"] for t in op.get("outputs") or [] if "shape" in t]
                if not shapes:
                    continue
                out.append((kind, gpu, float(math.prod(shapes[0])), float(ks[0]["duration_us"])))
    return out


def cycles(s: tuple[str, str, float, float], devices) -> float:
    dev = devices.find(s[1])
    return s[3] * dev.sms * dev.clock_mhz / s[2]


def path_agreement(results: Path) -> dict[tuple[str, float], int]:
    """(kernel kind, the engine's `vectorized`) -> ops, over the held-out traces' element-wise
    ops with one kernel."""
    from habitat import _engine

    counts: dict[tuple[str, float], int] = defaultdict(int)
    for run in HELD_OUT:
        for path in sorted((results / run / "traces").glob("*.json.gz")):
            doc = load(path)
            kinds = {op["id"]: kernel_kind(op["kernels"][0]["name"]) for op in doc["steps"][0]["ops"]
                     if len(op.get("kernels", [])) == 1}
            for op_id, _cls, parts in _engine.learned_op_parts(json.dumps(doc), 0):
                kind = kinds.get(op_id)
                if kind is None or len(parts) != 1 or "vectorized" not in parts[0][1]:
                    continue
                counts[(kind, parts[0][1]["vectorized"])] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks/results")
    args = ap.parse_args(argv)
    devices = default_table()
    train, held = samples(args.results, RUNS), samples(args.results, HELD_OUT)
    fit = [cycles(s, devices) for s in train if s[0] != "vectorized"]
    c = float(np.median(fit))
    print(f"SM cycles per output element, non-vectorized kernels >= {MIN_US:g} us of the training runs: "
          f"median {c:.3f} over {len(fit)} kernels")
    print("| kernel | runs | GPU | kernels | cycles / element: median (p10-p90) | the bound alone: mean |error| |")
    print("|---|---|---|---|---|---|")
    for label, data in (("training", train), ("held out", held)):
        for kind, _ in KERNELS:
            for gpu in sorted({s[1] for s in data}):
                mine = [s for s in data if s[0] == kind and s[1] == gpu]
                if not mine:
                    continue
                cyc = np.array([cycles(s, devices) for s in mine])
                err = np.abs(c / cyc - 1) * 100
                bound = f"{err.mean():.1f} %" if kind != "vectorized" else "(not applied)"
                print(f"| {kind} | {label} | {gpu} | {len(mine)} | {np.median(cyc):.2f} "
                      f"({np.percentile(cyc, 10):.2f}-{np.percentile(cyc, 90):.2f}) | {bound} |")
    print("\nThe engine's call against the kernel that ran (held-out traces, element-wise ops with one kernel):")
    for (kind, vec), n in sorted(path_agreement(args.results).items()):
        print(f"  {kind:10s} engine vectorized={int(vec)}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
