"""The constants of the multi-tensor kernels' model (csrc/src/predict/multi_tensor_kernels.cpp:
_foreach_* ops and the fused Adam/AdamW/SGD steps), fitted on the AdamW rows of the H100
families collection outside its held-out fifth (habitat.learned.family_table.held_out), and the
model's error on the held-out fifth and on the H200's collection, which no constant saw.

    python benchmarks/accuracy/multi_tensor_fit.py [--h100 DIR] [--h200 DIR]

ATen's multi_tensor_apply (ATen/native/cuda/MultiTensorApply.cuh) cuts each tensor into chunks
of 65536 elements, one 512-thread block per chunk, and launches a kernel whenever the launch's
block table (320 blocks) or tensor table fills (csrc/src/cost/multi_tensor_apply.h). A block
walks its chunk 2048 elements at a time (512 threads x ILP 4), each step a load, the arithmetic
and a store that wait on each other: a block of a full chunk takes 32 dependent steps whatever
the rest of the launch does. A launch takes

    fixed + bytes / (bandwidth x share) + longest block's steps x cycles / clock

the stream of its bytes plus the dependent steps of its longest block (which the stream does not
hide: the last blocks to start still walk their whole chunk). The sum fits the H100's rows better
than the larger of the two (32-bit foreach: 3.3 % held out against 9.7 %, the bandwidth share
0.95 against 0.76; a p-norm of the two lies between). MobileNetV3-Large's 174 parameters (4 to
1.2 M elements) make every AdamW expression two to four launches of mostly small tensors, which a
roofline over bytes forecast at half their time (benchmarks/results/real-models-cpu-trace.md).
The constants are fitted apart for the foreach kernels (one kernel per arithmetic step, 1-4
lists) and the fused AdamW kernel (the whole update, 4 lists), and for each element width (a
16-bit launch moves half the bytes in the same steps).

The rows' parameter lists are not in the CSVs; they are the collector's own draws
(benchmarks/gpu/kernel_shapes.py adamw_shapes with the collection's seed), matched to each row by
its Tensors, Elements, Largest and Chunks columns. A foreach row is torch 2.11's
_multi_tensor_adamw on CUDA (torch/optim/adam.py, decoupled weight decay, step counters on the
host): _foreach_mul_, lerp_, mul_, addcmul_, sqrt, div_ (a scalar list), add_, addcdiv_ (a
scalar list); a fused row is the step counters' _foreach_add_ and one _fused_adamw_.

The fit minimises the mean squared log error (structure_fit.py: Nelder-Mead from scipy). Its
printout is the source of the constants in multi_tensor_kernels.cpp (rounded there).
"""
from __future__ import annotations

import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))  # the collector's shape draws

from kernel_shapes import adamw_shapes  # noqa: E402

from habitat.learned.family_table import held_out  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from structure_fit import Phase, collection_rows, run  # noqa: E402

H100 = ROOT / "benchmarks/results/kernels/H100-SXM5-80GB-2026-11-26-families"
H200 = ROOT / "benchmarks/results/kernels/H200-SXM-141GB-2026-11-27"
SEEDS = {"H100": 0, "H200": 1}  # the collections' --seed (their READMEs)
DRAWN = 300  # collect_kernels.py --memory: the shapes drawn per family
STEM = "adamw"

CHUNK = 65536
BLOCK_STEP = 512 * 4  # elements a block moves per dependent step
MAX_BLOCKS = 320
MAX_TENSORS = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}
MAX_TENSORS_SCALAR_LIST = {1: 96, 2: 64, 3: 48, 4: 36, 5: 30}

# (lists the kernel takes, element reads and writes per element, scalar list) of each foreach
# expression; the fused update reads params, grads, exp_avgs, exp_avg_sqs and writes 3 of them.
FOREACH = ((1, 2, False), (2, 3, False), (1, 2, False), (3, 3, False), (2, 2, False), (1, 2, True),
           (1, 2, False), (3, 4, True))
FUSED = ((4, 7, False),)


@dataclass
class Launch:
    elements: int
    longest_block: int  # elements of its largest chunk


@dataclass
class Row:
    gpu: str
    phase: str  # the implementation: foreach or fused
    elem: int
    launches: list[tuple[Launch, int]]  # each launch and its bytes per element
    counters: list[Launch]  # the fused path's _foreach_add_ over its step counters
    us: float
    held: bool


def launches(sizes: list[int], lists: int, scalar_list: bool) -> list[Launch]:
    """multi_tensor_apply launches over tensors of `sizes` (csrc/src/cost/op_cost_optimizer.cpp)."""
    max_tensors = (MAX_TENSORS_SCALAR_LIST if scalar_list else MAX_TENSORS)[lists]
    out: list[Launch] = []
    blocks = loaded = elements = longest = 0
    for n in sizes:
        if n <= 0:
            continue
        loaded += 1
        left = n
        while left > 0:
            take = min(math.ceil(left / CHUNK), MAX_BLOCKS - blocks)
            moved = min(left, take * CHUNK)
            longest = max(longest, min(left, CHUNK))
            blocks, elements, left = blocks + take, elements + moved, left - moved
            if (loaded == max_tensors and left == 0) or blocks == MAX_BLOCKS:
                out.append(Launch(elements, longest))
                blocks = elements = longest = 0
                loaded = 0 if left == 0 else 1
    if blocks:
        out.append(Launch(elements, longest))
    return out


def step_launches(sizes: list[int], impl: str, elem: int) -> list[tuple[Launch, int]]:
    out = []
    for lists, moved, scalar_list in FOREACH if impl == "foreach" else FUSED:
        out += [(launch, moved * elem) for launch in launches(sizes, lists, scalar_list)]
    return out


LIST_COLUMNS = ("Tensors", "Elements", "Largest", "Chunks")


def parameter_lists(gpu: str, family: str = STEM) -> dict[tuple[int, ...], list[int]]:
    """The parameter lists the collector drew for `family` on `gpu`'s collection, by their
    LIST_COLUMNS values."""
    return {tuple(s[c] for c in LIST_COLUMNS): list(s["sizes"])
            for s in adamw_shapes(DRAWN, random.Random(f"{SEEDS[gpu]}/{family}"))}


def list_of(drawn: dict[tuple[int, ...], list[int]], row: dict[str, str], where: Path) -> list[int]:
    """The drawn list of a CSV row, matched by its LIST_COLUMNS."""
    key = tuple(int(row[c]) for c in LIST_COLUMNS)
    if key not in drawn:
        raise SystemExit(f"{where}: no drawn parameter list has {dict(zip(LIST_COLUMNS, key))} (another seed or "
                         "count?)")
    return drawn[key]


def load(directory: Path, gpu: str) -> list[Row]:
    drawn = parameter_lists(gpu)
    rows = []
    for elem, r in collection_rows(directory, STEM):
        shape = {k: int(r[k]) for k in LIST_COLUMNS}
        sizes = list_of(drawn, r, directory)
        counters = launches([1] * len(sizes), 1, False) if r["Impl"] == "fused" else []
        rows.append(Row(gpu, r["Impl"], elem, step_launches(sizes, r["Impl"], elem), counters,
                        float(r["Kernel Latency"]) * 1000, held_out(STEM, shape)))
    return rows


def launch_us(c: dict[str, float], launch: Launch, bytes_per_element: int, device) -> float:
    bandwidth = device.bandwidth_gbs * 1e3 * c["bandwidth_share"]  # bytes per us
    steps = math.ceil(launch.longest_block / BLOCK_STEP)
    return (c["fixed_us"] + launch.elements * bytes_per_element / bandwidth
            + steps * c["cycles_per_step"] / device.clock_mhz)


def phases(counters: dict[str, dict[str, float]]) -> list[Phase]:
    """The foreach phase, then the fused one, whose step-counter launches (a _foreach_add_ of
    float32 scalars, as the engine forecasts it) take the 32-bit foreach constants: `counters`
    holds them once the 32-bit foreach phase is fitted."""
    def model(c: dict[str, float], r: Row, device) -> float:
        us = sum(launch_us(c, launch, moved, device) for launch, moved in r.launches)
        return us + sum(launch_us(counters["foreach"], launch, 4 * 2, device) for launch in r.counters)

    def group(r: Row) -> str:
        return f"{r.elem * 8}-bit"
    constants = ("fixed_us", "bandwidth_share", "cycles_per_step")
    return [Phase(impl, constants, [1.5, 0.8, 700.0], model, group) for impl in ("foreach", "fused")]


def main(argv: list[str] | None = None) -> int:
    counters: dict[str, dict[str, float]] = {}  # the 32-bit run's fitted constants, by phase
    for elem in (4, 2):
        print(f"#### {elem * 8}-bit parameters")
        run(__doc__, argv, H100, H200, lambda d, gpu, e=elem: [r for r in load(d, gpu) if r.elem == e],
            phases(counters), counters if elem == 4 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
