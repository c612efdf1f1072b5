"""Host-aware forecasts of CPU-traced steps against the recorded GPU measurements (issue #15).

Each benchmark workload traced on the CPU (benchmarks/results/cpu-traces/) is forecast for the
H100 and H200 with the packaged eager-PyTorch host model (HABITAT_HOST_MODEL=packaged) and the
step as seen is compared with the step measured on that GPU (benchmarks/results/<gpu>/summary.json).

    PYTHONPATH=python python3 benchmarks/timeline/cpu_origin.py
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPUS = {"H100-SXM5-80GB": "h100-sxm5-80gb", "H200-SXM-141GB": "h200-sxm-141gb"}


def measured() -> dict[tuple[str, str, str], float]:
    out = {}
    for gpu, folder in GPUS.items():
        summary = json.loads((ROOT / "benchmarks/results" / folder / "summary.json").read_text())
        for row in summary.get("results", summary.get("workloads", [])):
            out[(row["model"], row["precision"], gpu)] = row["measured"]["median_ms"]
    return out


def main() -> int:
    os.environ.setdefault("HABITAT_HOST_MODEL", "packaged")
    from habitat.data.forecast import Forecast

    steps = measured()
    errors = []
    print("| workload | precision | GPU | measured ms | kernel sum ms | step as seen ms | error | host-bound |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted((ROOT / "benchmarks/results/cpu-traces").glob("*.json.gz")):
        model, precision = path.name[: -len(".json.gz")].rsplit("_", 1)
        if (model, precision, "H100-SXM5-80GB") not in steps:
            continue  # built from a config, no GPU run to compare with
        step = Forecast.load(path, targets=list(GPUS)).latest
        for gpu in GPUS:
            m = steps[(model, precision, gpu)]
            seen = step.step_ms(gpu)
            errors.append(abs(seen - m) / m)
            print(f"| {model} | {precision} | {gpu} | {m:.1f} | {step.time_ms(gpu):.1f} | {seen:.1f} | "
                  f"{(seen - m) / m:+.1%} | {step.host_bound(gpu)} |")
    print(f"\nmean abs error of the step as seen: {sum(errors) / len(errors):.1%} over {len(errors)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
