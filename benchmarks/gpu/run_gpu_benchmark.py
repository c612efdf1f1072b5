"""Records Habitat traces and the true iteration time of the benchmark models on this GPU.

    python benchmarks/gpu/run_gpu_benchmark.py --out benchmarks/results [--quick]

For each model of models.py in fp32 and in bf16 autocast it writes, under OUT/<gpu>/:
  - traces/<model>_<precision>.json.gz: one traced training step (the habitat trace format)
    with Habitat's forecast for every GPU in the database;
  - summary.json: per workload the measured iteration time (CUDA events around each step
    after a warm-up; median, p10, p90 of many steps), the forecasts, how many ops got
    kernels attached, and the tracing overhead (wall time per step, synchronised: plain,
    with CUPTI kernel tracing only; habitat.predict_on in its long-run steady state, after
    its detailed steps and first fingerprints, as benchmarks/overhead/gpu_table.py measures
    it; a fingerprinted step, record_step(detailed=False), apart; the two detailed steps);
  - summary.md: the same as a table.
compare_results.py turns the summaries of two GPUs into cross-GPU forecast errors.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import WORKLOADS, Workload  # noqa: E402

import habitat  # noqa: E402
from habitat.capture import cupti  # noqa: E402
from habitat.capture.predict import record_step  # noqa: E402
from habitat.data import engine  # noqa: E402

PRECISIONS = {"fp32": False, "bf16": True}  # name -> autocast to bfloat16
#: Steps predict_on runs before its overhead is timed: its detailed steps, then fingerprinted
#: ones until the fingerprint gap has grown to its default 20 (as gpu_table.py --settle).
SETTLE_STEPS = 32


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _stats(values: list[float]) -> dict[str, Any]:
    return {"median_ms": statistics.median(values), "p10_ms": _percentile(values, 0.1),
            "p90_ms": _percentile(values, 0.9), "mean_ms": statistics.fmean(values),
            "steps": len(values)}


def iteration_times_ms(step: Callable[[], None], warmup: int, steps: int) -> list[float]:
    """GPU time of each step: CUDA events recorded before and after it, no host sync in
    between, so host overhead that starves the GPU counts, as it does in training."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(steps)]
    for start, end in events:
        start.record()
        step()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def wall_times_ms(step: Callable[[], None], steps: int) -> list[float]:
    """Host wall time of each step with the device synchronised after it (for overhead)."""
    out = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def interleaved_wall_times_ms(modes: dict[str, Callable[[], None]], turns: int) -> dict[str, list[float]]:
    """wall_times_ms of each mode, one step per mode per turn, the modes taking turns (so a
    drift of the host over the run weighs on every mode alike)."""
    out: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(turns):
        for name, step in modes.items():
            out[name] += wall_times_ms(step, 1)
    return out


# Ops that only allocate or read a scalar back: no kernel to expect.
ALLOCATION_ONLY = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::resize_",
                   "aten::set_", "aten::_local_scalar_dense"}


def _devices(op: dict[str, Any]) -> set[str]:
    metas = list(op.get("outputs", []))
    for arg in op.get("args", []):
        metas += [arg["tensor"]] if "tensor" in arg else arg.get("tensors", [])
    return {str(m.get("device", "cpu")).split(":")[0] for m in metas}


def kernel_coverage(step_forecast: Any) -> dict[str, Any]:
    """How many leaf ops that do device work carry the kernels they launched, and how much
    kernel time sits on composite ops (launched by the op itself, not by a child op)."""
    ops = step_forecast.trace["ops"]
    by_id = {op["id"]: op for op in ops}
    leaf_cuda, with_kernels, missing = 0, 0, {}
    for op in step_forecast.leaf_ops():
        raw = by_id[op.id]
        devices_used = _devices(raw)
        # A host<->device copy is a memcpy, not a kernel.
        if ("cuda" not in devices_used or "cpu" in devices_used or op.op_class == "no_kernel"
                or op.name in ALLOCATION_ONLY):
            continue
        leaf_cuda += 1
        if raw.get("kernels"):
            with_kernels += 1
        else:
            missing[op.full_name] = missing.get(op.full_name, 0) + 1

    def kernel_ms(selected: list[dict[str, Any]]) -> float:
        return sum(k.get("duration_us", 0.0) for op in selected for k in op.get("kernels", [])) / 1e3

    return {"leaf_cuda_ops": leaf_cuda, "with_kernels": with_kernels,
            "missing": dict(sorted(missing.items(), key=lambda kv: -kv[1])),
            "kernel_sum_ms": kernel_ms(ops),
            "composite_kernel_ms": kernel_ms([op for op in ops if op.get("has_children")])}


def run_workload(workload: Workload, precision: str, targets: list[str], out_dir: Path,
                 warmup: int, steps: int, overhead_steps: int) -> dict[str, Any]:
    autocast = PRECISIONS[precision]
    torch.manual_seed(0)
    train_step = workload.build(torch.device("cuda"))

    def step() -> None:
        train_step(autocast)

    measured = iteration_times_ms(step, warmup, steps)

    plain = wall_times_ms(step, overhead_steps)
    tracing = cupti.KernelTracing()
    traced_stats: list[dict[str, Any]] = []

    def cupti_step() -> None:
        tracing.begin_step()
        step()
        kernels = tracing.end_step()
        if kernels is not None:
            traced_stats.append(kernels.stats)

    cupti_only = wall_times_ms(cupti_step, overhead_steps)
    tracing.close()

    predictor = habitat.predict_on(targets)
    forecast = None

    def habitat_step() -> None:
        nonlocal forecast
        with predictor as forecast:
            step()

    def fingerprinted_step() -> None:
        with record_step(detailed=False):
            step()

    # The first steps of a run: its detailed steps (CUPTI, every op recorded), then
    # fingerprinted ones while the fingerprint gap grows; timed, but not the overhead a long
    # run pays. The overhead column is measured after them, beside plain steps.
    settle_wall = wall_times_ms(habitat_step, SETTLE_STEPS)
    predictor.wait()
    detailed = predictor.step_counts.get("detailed", 0)
    steady = interleaved_wall_times_ms({"plain": step, "habitat": habitat_step,
                                        "fingerprinted": fingerprinted_step}, overhead_steps)
    predictor.close()  # stops its worker; the forecast keeps every step read so far
    assert forecast is not None
    latest = forecast.latest

    trace_path = out_dir / "traces" / f"{workload.name}_{precision}.json.gz"
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    document = engine.trace_document(forecast.origin, [latest.trace])
    document["forecast"] = {"targets": forecast.targets, "steps": [latest.summary()]}
    document["benchmark"] = {"model": workload.name, "precision": precision,
                             "measured": _stats(measured)}
    with gzip.open(trace_path, "wt", encoding="utf-8") as f:
        json.dump(document, f, separators=(",", ":"))

    plain_ms = statistics.median(plain)
    steady_plain_ms = statistics.median(steady["plain"])
    result = {
        "model": workload.name, "precision": precision, "description": workload.description,
        "measured": _stats(measured),
        "forecast_ms": dict(latest.total_ms),
        # The step as seen (host launch cadence and syncs included; the timeline model).
        "step_ms": {t: latest.step_ms(t) for t in latest.targets},
        "methods": latest.method_ops,
        "unsupported": latest.unsupported,
        "coverage": kernel_coverage(latest),
        "cupti_stats": traced_stats[-1] if traced_stats else None,
        "overhead": {
            "plain_wall_ms": plain_ms,
            "cupti_wall_ms": statistics.median(cupti_only),
            "cupti_overhead_pct": 100 * (statistics.median(cupti_only) / plain_ms - 1),
            # predict_on in its long-run steady state (after SETTLE_STEPS), against plain steps
            # timed in the same turns.
            "steady_plain_wall_ms": steady_plain_ms,
            "habitat_wall_ms": statistics.median(steady["habitat"]),
            "habitat_overhead_pct": 100 * (statistics.median(steady["habitat"]) / steady_plain_ms - 1),
            # A fingerprinted step alone (record_step(detailed=False)): what one step in
            # fingerprint_every pays in a long run, and every step while the gap grows.
            "fingerprinted_wall_ms": statistics.median(steady["fingerprinted"]),
            "fingerprinted_overhead_pct": 100 * (statistics.median(steady["fingerprinted"]) / steady_plain_ms - 1),
            # The run's first steps: its detailed ones, each against the plain step.
            "detailed_steps": detailed,
            "detailed_wall_ms": settle_wall[:detailed],
            "detailed_overhead_pct": [100 * (w / plain_ms - 1) for w in settle_wall[:detailed]],
        },
        "origin": forecast.origin,
        "trace": str(trace_path.relative_to(out_dir)),
    }
    return result


def environment(gpu: str) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": gpu, "torch_device_name": props.name, "sms": props.multi_processor_count,
        "memory_gb": props.total_memory / 2**30, "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "habitat": habitat.__version__, "python": platform.python_version(),
        "host": platform.node(), "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cupti": cupti.cupti_status(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def markdown(env: dict[str, Any], results: list[dict[str, Any]]) -> str:
    gpu = env["gpu"]
    lines = [f"# Habitat GPU benchmark on {gpu}", "",
             f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}; "
             f"CUPTI: {env['cupti']}", "",
             "| model | precision | measured ms (median) | forecast on origin ms | ops with kernels |"
             " CUPTI overhead | habitat overhead (steady state) | fingerprinted step | detailed steps |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['precision']} | error: {r['error'][:80]} | | | | | | |")
            continue
        cov, ovh = r["coverage"], r["overhead"]
        if "fingerprinted_overhead_pct" in ovh:
            habitat_cells = (f"{ovh['habitat_overhead_pct']:+.1f}% | {ovh['fingerprinted_overhead_pct']:+.1f}% | "
                             + ", ".join(f"{p:+.0f}%" for p in ovh["detailed_overhead_pct"]))
        else:  # recorded before these columns: predict_on's first steps, mostly fingerprinted
            habitat_cells = f"{ovh['habitat_overhead_pct']:+.1f}% (first steps) | | "
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['measured']['median_ms']:.2f} | "
            f"{r['forecast_ms'].get(gpu, float('nan')):.2f} | "
            f"{cov['with_kernels']}/{cov['leaf_cuda_ops']} | {ovh['cupti_overhead_pct']:+.1f}% | "
            f"{habitat_cells} |")
    lines += ["", "Overhead: synchronised wall time per step against plain steps. Steady state: "
              f"predict_on after its first {SETTLE_STEPS} steps (detailed, then fingerprinted "
              "while the fingerprint gap grows), timed in turns with plain steps; a fingerprinted "
              "step (record_step(detailed=False), one step in 20 of a long run) apart; the "
              "detailed steps are the run's first ones."]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--models", nargs="+", default=[w.name for w in WORKLOADS],
                        choices=[w.name for w in WORKLOADS])
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=list(PRECISIONS))
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50, help="timed steps for the iteration time")
    parser.add_argument("--overhead-steps", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="few steps: a smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup, args.steps, args.overhead_steps = 2, 5, 4
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("run_gpu_benchmark.py needs a CUDA GPU", file=sys.stderr)
        return 2

    gpu = cupti.origin_device()
    out_dir = args.out / gpu.lower()
    out_dir.mkdir(parents=True, exist_ok=True)
    targets = [d.name for d in habitat.devices()]
    env = environment(gpu)
    print(f"GPU {env['torch_device_name']} -> database name {gpu}; CUPTI: {env['cupti']}", flush=True)

    results: list[dict[str, Any]] = []
    for workload in WORKLOADS:
        if workload.name not in args.models:
            continue
        for precision in args.precisions:
            t0 = time.perf_counter()
            try:
                r = run_workload(workload, precision, targets, out_dir, args.warmup, args.steps,
                                 args.overhead_steps)
                print(f"{workload.name:>13} {precision}: measured {r['measured']['median_ms']:8.2f} ms, "
                      f"forecast here {r['forecast_ms'].get(gpu, float('nan')):8.2f} ms, "
                      f"kernels on {r['coverage']['with_kernels']}/{r['coverage']['leaf_cuda_ops']} ops, "
                      f"overhead cupti {r['overhead']['cupti_overhead_pct']:+.1f}% "
                      f"habitat {r['overhead']['habitat_overhead_pct']:+.1f}% (steady), "
                      f"fingerprinted {r['overhead']['fingerprinted_overhead_pct']:+.1f}% "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
            except Exception as exc:  # one broken workload must not lose the others
                traceback.print_exc()
                r = {"model": workload.name, "precision": precision,
                     "error": f"{type(exc).__name__}: {exc}"}
            results.append(r)
            gc.collect()
            torch.cuda.empty_cache()

    (out_dir / "summary.json").write_text(json.dumps({"environment": env, "results": results},
                                                     indent=1))
    (out_dir / "summary.md").write_text(markdown(env, results))
    print(markdown(env, results))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
