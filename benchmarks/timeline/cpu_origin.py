"""Host-aware forecasts of CPU-traced steps against the recorded GPU measurements (issue #15).

Each benchmark workload traced on the CPU (benchmarks/results/cpu-traces/) is forecast for the
H100 and H200 with an eager-PyTorch host model and the step as seen is compared with the step
measured on that GPU (benchmarks/results/<run>/summary.json: the H100 and H200 runs of
2026-11-22 and the H100 run of 2026-11-23 of benchmarks/gpu/models.py's four workloads, and the
H100 and H200 runs of 2026-11-27 of the four networks built from configs, real-models-gpu/).

The host model is the inclusive one (habitat.analysis.host_model.calibrate_inclusive), calibrated
LEAVE ONE WORKLOAD OUT: the model that forecasts resnet50 (bf16 and fp32) is calibrated on the
format-2 traces (h100-sxm5-80gb-2026-11-23/traces) of the other three models only, so no trace
of a workload, on any GPU, informs its own forecast; the networks built from configs, of which
no trace calibrates anything, get the model of all eight (the packaged one's calibration). The
calibration reads the traces' host times and their untraced steady-state wall time (the trace's
wall_ms), never a benchmark's measured step time, which appears only in the error columns.

    PYTHONPATH=python python3 benchmarks/timeline/cpu_origin.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CALIBRATION_RUN = "h100-sxm5-80gb-2026-11-23"
# (run folder, GPU database name, column label)
RUNS = [("h100-sxm5-80gb", "H100-SXM5-80GB", "H100 11-22"), ("h200-sxm-141gb", "H200-SXM-141GB", "H200 11-22"),
        ("h100-sxm5-80gb-2026-11-23", "H100-SXM5-80GB", "H100 11-23"),
        ("real-models-gpu/h100-sxm5-80gb", "H100-SXM5-80GB", "H100 11-27"),
        ("real-models-gpu/h200-sxm-141gb", "H200-SXM-141GB", "H200 11-27")]
GPUS = ["H100-SXM5-80GB", "H200-SXM-141GB"]


def measured() -> dict[tuple[str, str], float]:
    """(workload, run folder) -> the benchmark's measured step (ms): the test, never an input of
    the workload's own forecast."""
    out = {}
    for folder, _, _ in RUNS:
        summary = json.loads((ROOT / "benchmarks/results" / folder / "summary.json").read_text())
        for row in summary.get("results", summary.get("workloads", [])):
            out[(f"{row['model']}_{row['precision']}", folder)] = row["measured"]["median_ms"]
    return out


def model_name(workload: str) -> str:
    return workload.rsplit("_", 1)[0]


def held_out_models(costs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """model name -> the host model calibrated without any trace of that model (`costs` keyed by
    "<run>/<workload>")."""
    from habitat.analysis.host_model import model_from_costs

    models = sorted({model_name(key.rsplit("/", 1)[1]) for key in costs})
    return {m: model_from_costs((key, c) for key, c in sorted(costs.items())
                                if model_name(key.rsplit("/", 1)[1]) != m)
            for m in models}


def calibration_costs() -> dict[str, dict[str, Any]]:
    """"<run>/<workload>" -> trace_host_costs of CALIBRATION_RUN's format-2 traces."""
    from habitat.analysis.host_model import load_document, trace_host_costs

    return {f"{CALIBRATION_RUN}/{p.name.removesuffix('.json.gz')}": trace_host_costs(load_document(p))
            for p in sorted((ROOT / "benchmarks/results" / CALIBRATION_RUN / "traces").glob("*.json.gz"))}


def forecast_with(model: dict[str, Any], trace: Path) -> Any:
    from habitat.data.forecast import Forecast

    fd, path = tempfile.mkstemp(suffix=".json", prefix="habitat-host-model-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(model, f)
    previous = os.environ.get("HABITAT_HOST_MODEL")
    os.environ["HABITAT_HOST_MODEL"] = path
    try:
        return Forecast.load(trace, targets=GPUS).latest
    finally:
        os.environ.pop("HABITAT_HOST_MODEL") if previous is None else os.environ.__setitem__("HABITAT_HOST_MODEL", previous)
        os.unlink(path)


def evaluate() -> list[dict[str, Any]]:
    from habitat.analysis.host_model import model_from_costs

    costs = calibration_costs()
    models = held_out_models(costs)
    every = model_from_costs(sorted(costs.items()))  # for a workload none of them is a trace of
    steps = measured()
    rows = []
    for path in sorted((ROOT / "benchmarks/results/cpu-traces").glob("*.json.gz")):
        workload = path.name.removesuffix(".json.gz")
        if not any((workload, folder) in steps for folder, _, _ in RUNS):
            continue  # no GPU run of this workload to compare with
        step = forecast_with(models.get(model_name(workload), every), path)
        for folder, gpu, label in RUNS:
            m = steps.get((workload, folder))
            if m is None:
                continue
            t = step.timeline[gpu]
            rows.append({"workload": workload, "run": label, "gpu": gpu, "measured_ms": m,
                         "kernel_sum_ms": step.time_ms(gpu), "step_ms": step.step_ms(gpu),
                         "host_ms": t["host_ms"], "gpu_busy_fraction": t["gpu_busy_fraction"],
                         "host_bound": bool(t["host_bound"]),
                         "error": step.step_ms(gpu) / m - 1.0, "kernel_sum_error": step.time_ms(gpu) / m - 1.0})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    rows = evaluate()
    print("| workload | run | measured ms | kernel sum ms (default before) | host ms | step as seen ms | error | "
          "GPU busy | host-bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['run']} | {r['measured_ms']:.1f} | {r['kernel_sum_ms']:.1f} "
              f"({r['kernel_sum_error']:+.1%}) | {r['host_ms']:.1f} | {r['step_ms']:.1f} | {r['error']:+.1%} | "
              f"{r['gpu_busy_fraction']:.0%} | {r['host_bound']} |")
    for label in sorted({r["run"] for r in rows}) + ["all"]:
        sel = [r for r in rows if label in ("all", r["run"])]
        mean = sum(abs(r["error"]) for r in sel) / len(sel)
        ksum = sum(abs(r["kernel_sum_error"]) for r in sel) / len(sel)
        within = sum(abs(r["error"]) <= 0.15 for r in sel)
        print(f"\n{label}: step as seen {mean:.1%} mean abs error ({within}/{len(sel)} within 15%); "
              f"kernel sum {ksum:.1%}", end="")
    print()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
