"""The constants of the CUDA nll_loss kernels' model (csrc/src/predict/loss_kernels.cpp), fitted on
the H100 families collection's nll_loss rows outside its held-out fifth
(habitat.learned.family_table.held_out), and the model's error on the held-out fifth and on the
H200's collection, which no constant saw.

    python benchmarks/accuracy/loss_kernels_fit.py [--h100 DIR] [--h200 DIR]

With a mean or sum reduction over a 2-D input, ATen (LossNLL.cu) launches both passes as one
block of nll_loss_threads(N) = clamp(2^round(log2(N / 16)), 32, 1024) threads that walk the N
samples in turn; each step loads the sample's target and then its class's element, two dependent
memory round trips:

- forward: fixed + ceil(N / threads) x cycles / clock;
- backward: a zero fill of the [N, C] input gradient at a share of the DRAM bandwidth, then the
  same walk writing one element per sample: fixed + fill + ceil(N / threads) x cycles / clock.

The fit minimises the mean squared log error (structure_fit.py: Nelder-Mead from scipy). Its printout is the source
of the constants in loss_kernels.cpp (rounded there).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from habitat.learned.family_table import held_out  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from structure_fit import Phase, collection_rows, run  # noqa: E402

H100 = ROOT / "benchmarks/results/kernels/H100-SXM5-80GB-2026-11-26-families"
H200 = ROOT / "benchmarks/results/kernels/H200-SXM-141GB-2026-11-27"
STEM = "crossentropy"  # collect_kernels.py: its nll_loss rows time that op alone


@dataclass
class Row:
    gpu: str
    phase: str
    elem: int
    samples: int
    classes: int
    us: float
    held: bool


def load(directory: Path, gpu: str) -> list[Row]:
    rows = []
    for elem, r in collection_rows(directory, STEM):
        if r["OPName"] != "nll_loss":
            continue
        shape = {k: int(r[k]) for k in ("Tokens", "Classes")}
        rows.append(Row(gpu, r["Phase"], elem, shape["Tokens"], shape["Classes"], float(r["Kernel Latency"]) * 1000,
                        held_out(STEM, shape)))
    return rows


def threads(samples: int) -> int:
    """LossNLL.cu nll_loss_threads (integer N / 16, as ATen divides)."""
    per16 = samples // 16
    return 32 if per16 < 1 else min(1024, max(32, 1 << round(math.log2(per16))))


def steps(samples: int) -> int:
    return math.ceil(samples / threads(samples))


FORWARD = ("fixed_forward_us", "cycles_per_forward_step")
BACKWARD = ("fixed_backward_us", "cycles_per_backward_step", "fill_bandwidth_share")


def forward_us(c: dict[str, float], r: Row, dev) -> float:
    return c["fixed_forward_us"] + steps(r.samples) * c["cycles_per_forward_step"] / dev.clock_mhz


def backward_us(c: dict[str, float], r: Row, dev) -> float:
    fill = r.samples * r.classes * r.elem / (dev.bandwidth_gbs * 1e3 * min(c["fill_bandwidth_share"], 1.0))
    return c["fixed_backward_us"] + fill + steps(r.samples) * c["cycles_per_backward_step"] / dev.clock_mhz


def main(argv: list[str] | None = None) -> int:
    def precision(r: Row) -> str:
        return "fp32" if r.elem == 4 else "bf16"

    return run(__doc__, argv, H100, H200, load, [Phase("fwd", FORWARD, [1.5, 900], forward_us, precision),
                                                 Phase("bwd", BACKWARD, [2.0, 700, 0.9], backward_us, precision)])


if __name__ == "__main__":
    sys.exit(main())
