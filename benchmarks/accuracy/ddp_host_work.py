"""A DDP step on N GPUs forecast from a step captured on one rank, against the same step captured
under DDP on N gloo ranks (CPU; the test's workers, tests/python/parallel/ddp_host_workers.py):
with and without what the framework adds on a rank (habitat.analysis.distributed_host).

    PYTHONPATH=python python3 benchmarks/accuracy/ddp_host_work.py [--ranks 2 4] [--gpus H100 A100 L4]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "python" / "parallel"), str(ROOT / "tests" / "python")]

import c10d_workers  # noqa: E402  (the test's spawn helper and workers)
import ddp_host_workers  # noqa: E402

from habitat.analysis.cluster import Cluster  # noqa: E402
from habitat.analysis.cluster_compare import forecast_on_cluster  # noqa: E402
from habitat.analysis.parallel import parallel_step  # noqa: E402
from habitat.analysis.step_work import step_work_from_step  # noqa: E402
from habitat.data.forecast import Forecast  # noqa: E402


def run(world: int, gpus: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        c10d_workers.start(ddp_host_workers.worker, Path(tmp), timeout_s=600, world=world)
        one = Forecast.from_trace(Path(tmp) / "out" / "one_rank.json", gpus)
        ddp = Forecast.from_trace(Path(tmp) / "out" / "ddp.json", gpus)
    rows = []
    for gpu in gpus:
        cluster = Cluster(gpu, world)
        captured = forecast_on_cluster(ddp, cluster, "ddp")
        from_one = forecast_on_cluster(one, cluster, "ddp")
        bare = parallel_step(replace(step_work_from_step(one.latest, cluster.gpu), framework=None), cluster, "ddp")
        rows.append({"ranks": world, "gpu": cluster.gpu, "one_gpu_step_ms": one.latest.step_ms(gpu),
                     "ddp_capture_ms": captured.time_ms, "one_rank_ms": from_one.time_ms, "without_ms": bare.time_ms})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--gpus", nargs="+", default=["H100", "A100", "L4"])
    args = ap.parse_args()
    print(f"DDP step of {ddp_host_workers.LAYERS} Linear({ddp_host_workers.FEATURES}) layers + ReLU, batch 32, "
          "SGD, CPU capture (gloo); forecast ms per step:")
    print("| ranks | GPU | one GPU (step as seen) | from the DDP capture | from one rank | error | "
          "from one rank, framework left out | error |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for world in args.ranks:
        for r in run(world, args.gpus):
            ref = r["ddp_capture_ms"]
            print(f"| {r['ranks']} | {r['gpu']} | {r['one_gpu_step_ms']:.3f} | {ref:.3f} | {r['one_rank_ms']:.3f} | "
                  f"{(r['one_rank_ms'] - ref) / ref * 100:+.1f}% | {r['without_ms']:.3f} | "
                  f"{(r['without_ms'] - ref) / ref * 100:+.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
