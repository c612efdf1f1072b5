"""The recorded H100 steps put on 8x H100 with DDP, with and without the single-GPU step's host
cadence (habitat.analysis.parallel: each phase takes at least the host's time to issue it), and
with what DDP adds on every rank (its reducer over each gradient tensor, the buckets' launches:
habitat.analysis.distributed_host).
No multi-GPU step was measured: the single GPU's measured step is the reference a data-parallel
rank cannot beat.

    PYTHONPATH=python python3 benchmarks/accuracy/cluster_host.py
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from habitat import Forecast
from habitat.analysis.cluster import Cluster
from habitat.analysis.cluster_compare import forecast_on_cluster
from habitat.analysis.parallel import Parallelism, parallel_step
from habitat.analysis.step_work import step_work_from_step

RUN = Path(__file__).resolve().parents[1] / "results" / "h100-sxm5-80gb-2026-11-23"
GPU = "H100-SXM5-80GB"


def main() -> None:
    measured = {(r["model"], r["precision"]): r for r in json.loads((RUN / "summary.json").read_text())["results"]}
    print("| workload | measured on 1 GPU, ms | kernel sum | step as seen (1 GPU) | 8x H100 DDP, device only "
          "| 8x H100 DDP, with the host | and DDP's own work | gradient tensors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for trace in sorted((RUN / "traces").glob("*.json.gz")):
        model, precision = trace.name.removesuffix(".json.gz").rsplit("_", 1)
        forecast = Forecast.load(trace, [GPU])
        step = forecast.latest
        work = step_work_from_step(step, GPU)
        device_only = dataclasses.replace(work, host_forward_us=0.0, host_backward_us=0.0,
                                          host_optimizer_us=0.0, seen_adjust_us=0.0, framework=None)
        cluster = Cluster(GPU, 8)
        before = parallel_step(device_only, cluster, Parallelism(data=8))
        host = parallel_step(dataclasses.replace(work, framework=None), cluster, Parallelism(data=8))
        now = forecast_on_cluster(forecast, cluster, "ddp")
        row = measured.get((model, precision), {})
        print(f"| {model} {precision} | {row.get('measured', {}).get('median_ms', float('nan')):.2f} | {step.time_ms(GPU):.2f} | "
              f"{step.step_ms(GPU):.2f} | {before.time_ms:.2f} | {host.time_ms:.2f} | {now.time_ms:.2f} | "
              f"{work.framework.tensors if work.framework else '-'} |")


if __name__ == "__main__":
    main()
