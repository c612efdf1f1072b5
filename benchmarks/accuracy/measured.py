"""Measured kernel sums of real training steps on a GPU, read from the summaries the GPU
benchmarks write: `benchmarks/gpu/run_gpu_benchmark.py` (the four models.py workloads,
`benchmarks/results/<gpu>/`) and `benchmarks/gpu/real_model_kernels.py` (every workload of
workloads.py, `benchmarks/results/real-models-gpu/<gpu>/`). Both write
`<dir>/summary.json` with `environment.gpu` and one result per model and precision holding
`measured.median_ms` (the step), `coverage.kernel_sum_ms` (its kernels) and `trace` (the traced
step with its kernels, relative to <dir>); real_model_kernels.py adds `kernels_by_class_ms`,
used when the trace was not kept.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import op_classes


def load_json(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        return json.load(f)


@dataclass
class Measurement:
    """One workload and precision measured on one GPU in one run."""

    gpu: str  # the device database name, e.g. H100-SXM5-80GB
    run: str  # the run's date (or its folder's name)
    model: str
    precision: str
    step_ms: float
    kernel_ms: float
    trace: Path | None  # the GPU trace with its kernels, when kept
    summary_by_class_ms: dict[str, float] = field(default_factory=dict)

    def gpu_step(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(origin, step) of the traced GPU step."""
        if self.trace is None:
            raise FileNotFoundError(f"{self.model} {self.precision} on {self.gpu} ({self.run}): no trace kept")
        doc = load_json(self.trace)
        return doc["origin"], doc["steps"][0]

    @cached_property
    def device_ms(self) -> float:
        """The step's kernel time as device time: its ops' kernels' busy time (op_classes.kernel_us)
        where the kept trace has every kernel's start time, else the summary's kernel sum."""
        if self.trace is None:
            return self.kernel_ms
        ops = self.gpu_step()[1]["ops"]
        if any(k.get("device_start_us") is None for op in ops for k in op.get("kernels", [])):
            return self.kernel_ms
        return sum(op_classes.kernel_us(op) for op in ops) / 1e3

    @cached_property
    def by_class_ms(self) -> dict[str, float]:
        """Kernel time per op class (op_classes.py): from the trace when it was kept (its ops
        classed by the engine as a forecast for this GPU would class them), else the summary's."""
        if self.trace is None:
            return dict(self.summary_by_class_ms)
        from habitat.data import engine

        origin, step = self.gpu_step()
        forecast = engine.forecast_step(origin, step, [self.gpu])
        return op_classes.sum_by_class(op_classes.classify_step(step["ops"], op_classes.engine_classes(forecast)),
                                       op_classes.measured_us(step["ops"]))


def read_summary(folder: Path) -> list[Measurement]:
    """The measurements of one GPU-benchmark output folder (holding summary.json); results
    that failed or recorded no kernels are left out."""
    summary = load_json(folder / "summary.json")
    env = summary.get("environment", {})
    if "gpu" not in env:
        raise ValueError(f"{folder / 'summary.json'}: no environment.gpu; is this a GPU benchmark summary?")
    run = str(env.get("date", ""))[:10] or folder.name
    out = []
    for r in summary.get("results", []):
        kernel_ms = r.get("coverage", {}).get("kernel_sum_ms", 0.0)
        if "error" in r or not kernel_ms:
            continue
        trace = folder / r["trace"] if r.get("trace") else None
        out.append(Measurement(env["gpu"], run, r["model"], r["precision"], r["measured"]["median_ms"], kernel_ms,
                               trace if trace is not None and trace.exists() else None,
                               r.get("kernels_by_class_ms", {})))
    return out


def read_all(folders: list[Path]) -> list[Measurement]:
    out: list[Measurement] = []
    for folder in folders:
        if not (folder / "summary.json").exists():
            raise FileNotFoundError(f"{folder}: no summary.json (pass the folder a GPU benchmark wrote, "
                                    "e.g. benchmarks/results/h100-sxm5-80gb)")
        out += read_summary(folder)
    return out
