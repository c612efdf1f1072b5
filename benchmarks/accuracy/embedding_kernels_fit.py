"""The constants of the CUDA embedding kernels' model (csrc/src/predict/embedding_kernels.cpp),
fitted on the H100 families collection's embedding rows outside its held-out fifth
(habitat.learned.family_table.held_out), and the model's error on the held-out fifth and on
the H200's collection, which no constant saw.

    python benchmarks/accuracy/embedding_kernels_fit.py [--h100 DIR] [--h200 DIR]

ATen's CUDA embedding launches one of three gathers forward (index_select along the rows:
Indexing.cu) and one of two backward paths (Embedding.cu embedding_dense_backward_cuda):

- forward, at most 16 indices: indexSelectSmallIndex, each thread walking the indices in turn
  (a DRAM round trip per index): fixed + indices x cycles / clock;
- forward, rows a multiple of 16 bytes: vectorized_gather_kernel, one block per index and
  256 16-byte vectors: fixed + max(DRAM bytes / bandwidth, blocks x cycles / (SMs x clock));
- forward, other rows: the element-wise gather: fixed + max(DRAM bytes / bandwidth,
  elements x cycles / (SMs x clock));
- backward, at most 3072 indices (no scale_grad_by_freq): a zero fill of the weight gradient
  and embedding_backward_feature_kernel, 32 indices per step of a block of 32 x 32 threads
  whose steps are dependent memory round trips: fixed + fill + steps x cycles / clock, the
  cycles of a step between an L2 hit and a DRAM miss by the share of the gradient the L2 holds;
- backward, more indices: a radix sort of the indices, segment offsets, per-segment partial
  sums of up to 10 rows (compute_grad_weight) and their scatter: fixed + fill + (partial
  segments x D x cycles + indices x cycles) / (SMs x clock), the segment counts those of
  uniformly drawn indices (the collection's; token ids repeat more).

The fit minimises the mean squared log error (structure_fit.py: Nelder-Mead from scipy). Its printout is the
source of the constants in embedding_kernels.cpp (rounded there).
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
SMALL_INDEX_MAX = 16  # Indexing.cu: indexSelectSmallIndex up to 16 indices
FEATURE_PATH_MAX = 3072  # Embedding.cu: the feature kernel up to 3072 indices
INDEX_BYTES = 8


@dataclass
class Row:
    gpu: str
    phase: str
    elem: int
    vocab: int
    dim: int
    tokens: int
    us: float
    held: bool


def load(directory: Path, gpu: str) -> list[Row]:
    rows = []
    for elem, r in collection_rows(directory, "embedding"):
        shape = {k: int(r[k]) for k in ("Vocab", "Dim", "Tokens")}
        rows.append(Row(gpu, r["Phase"], elem, shape["Vocab"], shape["Dim"], shape["Tokens"],
                        float(r["Kernel Latency"]) * 1000, held_out("embedding", shape)))
    return rows


def forward_path(r: Row) -> str:
    if r.tokens <= SMALL_INDEX_MAX:
        return "small"
    return "vectorized" if (r.dim * r.elem) % 16 == 0 else "elementwise"


def backward_path(r: Row) -> str:
    return "feature" if r.tokens <= FEATURE_PATH_MAX else "sort"


FORWARD = ("fixed_small_us", "cycles_per_small_index", "fixed_vectorized_us", "cycles_per_block",
           "fixed_elementwise_us", "cycles_per_element", "bandwidth_efficiency")
BACKWARD = ("fixed_feature_us", "cycles_per_step_l2", "cycles_per_step_dram", "fixed_sort_us",
            "cycles_per_partial_element", "cycles_per_index")


def forward_us(c: dict[str, float], r: Row, dev) -> float:
    clock = dev.clock_mhz  # cycles per microsecond
    sm_cycles = dev.sms * clock
    path = forward_path(r)
    if path == "small":
        return c["fixed_small_us"] + r.tokens * c["cycles_per_small_index"] / clock
    out = r.tokens * r.dim * r.elem
    dram = (out + min(r.vocab * r.dim * r.elem, out) + INDEX_BYTES * r.tokens) / (dev.bandwidth_gbs * 1e3)
    dram /= min(c["bandwidth_efficiency"], 1.0)
    if path == "vectorized":
        blocks = r.tokens * math.ceil(r.dim * r.elem / 16 / 256)
        return c["fixed_vectorized_us"] + max(dram, blocks * c["cycles_per_block"] / sm_cycles)
    return c["fixed_elementwise_us"] + max(dram, r.tokens * r.dim * c["cycles_per_element"] / sm_cycles)


def unique_rows(vocab: int, tokens: int) -> float:
    """Expected distinct rows among `tokens` uniform draws of `vocab`."""
    return vocab * -math.expm1(tokens * math.log1p(-1.0 / vocab)) if vocab > 1 else 1.0


def backward_us(c: dict[str, float], r: Row, dev) -> float:
    clock = dev.clock_mhz
    fill = r.vocab * r.dim * r.elem / (dev.bandwidth_gbs * 1e3)
    if backward_path(r) == "feature":
        blocks = math.ceil(r.dim / 32)
        waves = math.ceil(blocks / (2 * dev.sms))  # 1024-thread blocks: two per SM
        l2_share = min(1.0, dev.l2_mb * 1e6 / (r.vocab * r.dim * 4))
        step = c["cycles_per_step_l2"] * l2_share + c["cycles_per_step_dram"] * (1 - l2_share)
        return c["fixed_feature_us"] + fill + math.ceil(r.tokens / 32) * waves * step / clock
    segments = unique_rows(r.vocab, r.tokens)
    partials = segments + max(0.0, r.tokens - segments) / 10
    work = partials * r.dim * c["cycles_per_partial_element"] + r.tokens * c["cycles_per_index"]
    return c["fixed_sort_us"] + fill + work / (dev.sms * clock)


def main(argv: list[str] | None = None) -> int:
    return run(__doc__, argv, H100, H200, load, [
        Phase("fwd", FORWARD, [1.5, 700, 1.3, 160, 3.6, 0.6, 0.9], forward_us, forward_path),
        Phase("bwd", BACKWARD, [2.0, 1500, 4000, 66, 4.5, 80], backward_us, backward_path)])


if __name__ == "__main__":
    sys.exit(main())
