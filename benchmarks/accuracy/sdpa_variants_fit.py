"""The measured cost of attention dropout and of a mask in fused SDPA kernels, from the encoder
family's rows: each shape was timed plain (OPName sdpa), with transformers' additive padding mask
(sdpa_mask) and with training's attention dropout, p = 0.1 (sdpa_dropout), on every backend
(collect_kernels.py --families encoder). The attention model learns the plain rows; this prints,
per backend, precision (fp32, or 16-bit) and pass, the median over the shapes of the variant's
device time over the plain time (the backward: the fwd+bwd row less the fwd row, for each),
the factors csrc/src/learned/attention_variants.cpp puts on a variant's plain forecast.

    python benchmarks/accuracy/sdpa_variants_fit.py [--data DIR]
"""
from __future__ import annotations

import argparse
import csv
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks/results/kernels/H200-SXM-141GB-2026-11-28"
VARIANTS = {"sdpa_mask": "mask", "sdpa_dropout": "dropout"}
BACKENDS = ("cudnn", "efficient", "flash")


def read(data: Path) -> dict[tuple[str, str, str, tuple[int, ...]], dict[str, float]]:
    """(backend, precision class, phase, shape) -> OPName -> device time (us)."""
    out: dict[tuple[str, str, str, tuple[int, ...]], dict[str, float]] = defaultdict(dict)
    for path in sorted(data.glob("sdpa_enc_*.csv")):
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                if r["Backend"] not in BACKENDS:
                    continue
                cls = "fp32" if r["Precision"] == "fp32" else "16-bit"
                shape = tuple(int(r[c]) for c in ("B", "H", "L", "S", "E"))
                out[r["Backend"], cls, r["Phase"], shape][r["OPName"]] = float(r["Kernel Latency"]) * 1e3
    return out


def ratios(rows: dict) -> dict[tuple[str, str, str, str], list[float]]:
    """(backend, precision class, pass, variant) -> the variant's time over the plain one, per
    shape and precision."""
    out: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for (backend, cls, phase, shape), times in rows.items():
        if phase != "fwd":
            continue
        both = rows.get((backend, cls, "fwd+bwd", shape), {})
        for op, variant in VARIANTS.items():
            if "sdpa" not in times or op not in times:
                continue
            out[backend, cls, "fwd", variant].append(times[op] / times["sdpa"])
            if "sdpa" in both and op in both:
                plain_bwd, variant_bwd = both["sdpa"] - times["sdpa"], both[op] - times[op]
                if plain_bwd > 0 and variant_bwd > 0:
                    out[backend, cls, "bwd", variant].append(variant_bwd / plain_bwd)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args(argv)
    found = ratios(read(args.data))
    print(f"{'backend':10s} {'precision':9s} {'pass':4s} {'variant':8s} {'n':>3s} {'median':>7s} {'min':>6s} {'max':>6s}")
    for key in sorted(found):
        r = found[key]
        print(f"{key[0]:10s} {key[1]:9s} {key[2]:4s} {key[3]:8s} {len(r):3d} {statistics.median(r):7.2f} "
              f"{min(r):6.2f} {max(r):6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
