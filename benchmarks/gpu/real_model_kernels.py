"""Measured kernel sums of the real-model workloads on this GPU, per op class and per top-level
op, for `benchmarks/accuracy/real_models.py compare` (which forecasts the same workloads from
CPU traces).

    PYTHONPATH=python python benchmarks/gpu/real_model_kernels.py --out DIR [--models a b ...]
        [--precisions fp32 bf16] [--budget-s S] [--profiler] [--no-traces]
    PYTHONPATH=python python benchmarks/gpu/real_model_kernels.py --device cpu --smoke --out /tmp/rmk

Every workload of benchmarks/accuracy/workloads.py (the networks built from configs first:
MobileNetV3-Large, ViT-B/16, BERT-base, T5-small; then the four of models.py), at its real
sizes, fp32 and bf16 autocast, AdamW where the workload says so:
  - the step untraced: `--warmup` steps, then `--bursts` bursts of `--burst-steps` steps back
    to back between two CUDA events; the step time is the median over bursts of burst / steps
    (the host may run ahead of the device, as in training);
  - `--traced` steps recorded by habitat.record_step with CUPTI kernel tracing (a detailed step
    as predict_on records it); the last one's kernels give the kernel sum, the sum per op class
    (benchmarks/accuracy/op_classes.py) and per top-level op; the others' sums show the noise;
  - with `--profiler`, torch.profiler's sum of the device activity of one more step, a count of
    the same kernels independent of Habitat's attribution (memsets and copies included).
Writes DIR/<gpu>/summary.json (benchmarks/accuracy/measured.py reads it), summary.md and, unless
`--no-traces`, traces/<model>_<precision>.json.gz; the summary is rewritten after each workload,
so a run cut short keeps what it measured. `--budget-s`: no workload starts once the time spent
plus the longest workload so far would pass it (the rest are listed as skipped).

`--device cpu` (with `--smoke`: the workloads' seconds-long sizes) runs the same code path with
wall-clock timing and no kernels: a test of the script, not a measurement.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "accuracy"))
import op_classes  # noqa: E402  (benchmarks/accuracy/)
import workloads as wl  # noqa: E402

import habitat  # noqa: E402
from habitat import _C  # noqa: E402
from habitat.capture import cupti  # noqa: E402
from habitat.capture.environment import trace_origin  # noqa: E402
from habitat.capture.record import record_step  # noqa: E402
from habitat.data import engine  # noqa: E402

#: The networks no GPU run has measured yet go first: a run cut short by its budget keeps them.
ORDER = wl.FROM_CONFIGS + wl.GPU_BENCHMARK


class Clock:
    """Per-step time of a burst of steps: CUDA events on a GPU, the wall clock on a CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def burst_ms(self, step: Callable[[], None], steps: int) -> float:
        self.sync()
        if not self.cuda:
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            return (time.perf_counter() - t0) * 1e3 / steps
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            step()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / steps


def _release_capture_key() -> None:
    """After a recorded step the capture key may stay on this thread; the next workload's
    untraced steps are timed without it, as without Habitat."""
    if _C._capture_key_included():
        _C._capture_release_thread()


def profiler_device_ms(step: Callable[[], None], clock: Clock) -> float:
    """torch.profiler's total device time (kernels, memsets, copies) of one step."""
    from torch.profiler import ProfilerActivity, profile

    clock.sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        clock.sync()
    cuda = torch.autograd.DeviceType.CUDA
    return sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == cuda) / 1e3


def kernel_breakdown(origin: dict[str, Any], step: dict[str, Any], gpu: str) -> dict[str, Any]:
    """The traced step's kernel sum, per op class and per top-level (phase, op)."""
    ops = step["ops"]
    us = op_classes.measured_us(ops)
    forecast = engine.forecast_step(origin, step, [gpu]) if gpu != "cpu" else {"ops": []}
    classes = op_classes.classify_step(ops, op_classes.engine_classes(forecast))
    root = op_classes.root_key(ops)
    by_op: dict[str, float] = {}
    for op in ops:
        if us[op["id"]]:
            phase, name = root(op)
            by_op[f"{phase} {name}"] = by_op.get(f"{phase} {name}", 0.0) + us[op["id"]]
    return {"kernel_sum_ms": sum(us.values()) / 1e3,
            "kernels": sum(len(op.get("kernels", [])) for op in ops),
            "kernels_by_class_ms": op_classes.sum_by_class(classes, us),
            "kernels_by_op_us": dict(sorted(by_op.items(), key=lambda kv: -kv[1]))}


def run_workload(work: wl.Workload, precision: str, device: torch.device, gpu: str, args: argparse.Namespace,
                 out_dir: Path) -> dict[str, Any]:
    autocast = precision == "bf16"
    torch.manual_seed(0)
    train = work.step(device, smoke=args.smoke)

    def step() -> None:
        train(autocast)

    clock = Clock(device)
    for _ in range(args.warmup):
        step()
    bursts = [clock.burst_ms(step, args.burst_steps) for _ in range(args.bursts)]

    tracing = cupti.KernelTracing() if device.type == "cuda" else None
    traced = []
    try:
        for _ in range(args.traced):
            clock.sync()
            with record_step(0, tracing=tracing) as rec:
                step()
            traced.append(rec.step)
    finally:
        if tracing is not None:
            tracing.close()
        _release_capture_key()
    origin = trace_origin(gpu)
    breakdown = kernel_breakdown(origin, traced[-1], gpu)
    result: dict[str, Any] = {
        "model": work.name, "precision": precision, "description": work.description, "smoke": args.smoke,
        "measured": {"median_ms": statistics.median(bursts), "bursts_ms": bursts, "burst_steps": args.burst_steps},
        "coverage": {"kernel_sum_ms": breakdown["kernel_sum_ms"], "kernels": breakdown["kernels"],
                     "traced_kernel_sums_ms": [sum(op_classes.measured_us(s["ops"]).values()) / 1e3 for s in traced]},
        "kernels_by_class_ms": breakdown["kernels_by_class_ms"],
        "kernels_by_op_us": breakdown["kernels_by_op_us"],
        "origin": origin,
    }
    if args.profiler and device.type == "cuda":
        try:
            result["profiler_device_ms"] = profiler_device_ms(step, clock)
        except Exception as exc:  # a profiler problem must not lose the measurement
            result["profiler_error"] = f"{type(exc).__name__}: {exc}"
    if not args.no_traces:
        path = out_dir / "traces" / f"{work.name}_{precision}.json.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(engine.trace_document(origin, [traced[-1]]), f, separators=(",", ":"))
        result["trace"] = str(path.relative_to(out_dir))
    return result


def environment(device: torch.device, gpu: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "gpu": gpu, "torch": torch.__version__, "habitat": habitat.__version__,
        "python": platform.python_version(), "host": platform.node(),
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32, "cupti": cupti.cupti_status(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.gmtime())}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update({"torch_device_name": props.name, "sms": props.multi_processor_count,
                    "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()})
    return env


def markdown(env: dict[str, Any], results: list[dict[str, Any]]) -> str:
    lines = [f"# Real-model kernel sums on {env['gpu']}", "",
             f"torch {env['torch']}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}; CUPTI: {env['cupti']}; "
             f"{env['date']}", "",
             "| workload | precision | step ms (median of bursts) | kernel sum ms | traced sums ms | "
             "profiler device ms | top classes (ms) |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['model']} | {r['precision']} | {r.get('error') or r['skipped']} | | | | |")
            continue
        top = sorted(r["kernels_by_class_ms"].items(), key=lambda kv: -kv[1])[:4]
        sums = ", ".join(f"{s:.2f}" for s in r["coverage"]["traced_kernel_sums_ms"])
        lines.append(f"| {r['model']} | {r['precision']} | {r['measured']['median_ms']:.2f} | "
                     f"{r['coverage']['kernel_sum_ms']:.2f} | {sums} | {r.get('profiler_device_ms', float('nan')):.2f} | "
                     + ", ".join(f"{c} {ms:.2f}" for c, ms in top) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="writes OUT/<gpu>/")
    p.add_argument("--models", nargs="+", default=list(ORDER), choices=list(ORDER))
    p.add_argument("--precisions", nargs="+", default=list(wl.PRECISIONS), choices=list(wl.PRECISIONS))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--smoke", action="store_true", help="the workloads' tiny sizes (tests; not a measurement)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--bursts", type=int, default=5)
    p.add_argument("--burst-steps", type=int, default=10)
    p.add_argument("--traced", type=int, default=2, help="recorded steps; the last one is kept")
    p.add_argument("--budget-s", type=float, help="start no workload that would end past this many seconds")
    p.add_argument("--profiler", action="store_true", help="also torch.profiler's device time of one step")
    p.add_argument("--no-traces", action="store_true", help="keep only the summary")
    args = p.parse_args(argv)
    if min(args.warmup, args.bursts - 1, args.burst_steps - 1, args.traced - 1) < 0:
        p.error("--bursts, --burst-steps and --traced must be at least 1, --warmup at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("real_model_kernels.py: no CUDA GPU here; `--device cpu --smoke` runs the script on the CPU",
              file=sys.stderr)
        return 2
    device = torch.device(args.device)
    gpu = cupti.origin_device() if device.type == "cuda" else "cpu"
    workloads = wl.load(device.type)
    out_dir = args.out / gpu.lower()
    out_dir.mkdir(parents=True, exist_ok=True)
    env = environment(device, gpu)
    print(f"{gpu}; CUPTI: {env['cupti']}", flush=True)
    results: list[dict[str, Any]] = []
    t_start, longest = time.perf_counter(), 0.0
    for name in [m for m in ORDER if m in args.models]:
        for precision in args.precisions:
            spent = time.perf_counter() - t_start
            if args.budget_s is not None and spent + longest > args.budget_s:
                results.append({"model": name, "precision": precision,
                                "skipped": f"budget: {spent:.0f} s spent of {args.budget_s:.0f}"})
                continue
            t0 = time.perf_counter()
            try:
                r = run_workload(workloads[name], precision, device, gpu, args, out_dir)
                print(f"{name:>18} {precision}: step {r['measured']['median_ms']:8.2f} ms, kernels "
                      f"{r['coverage']['kernel_sum_ms']:8.2f} ms ({time.perf_counter() - t0:.0f} s)", flush=True)
            except Exception as exc:  # one broken workload must not lose the others
                traceback.print_exc()
                r = {"model": name, "precision": precision, "error": f"{type(exc).__name__}: {exc}"}
            longest = max(longest, time.perf_counter() - t0)
            results.append(r)
            (out_dir / "summary.json").write_text(json.dumps({"environment": env, "results": results}, indent=1))
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    (out_dir / "summary.json").write_text(json.dumps({"environment": env, "results": results}, indent=1))
    (out_dir / "summary.md").write_text(markdown(env, results))
    print(markdown(env, results))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
