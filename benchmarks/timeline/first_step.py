"""The step as seen from a run's first detailed steps, against the same step untraced (issue 31).

    PYTHONPATH=python python benchmarks/timeline/first_step.py --out DIR        # on a CUDA GPU
    PYTHONPATH=python python benchmarks/timeline/first_step.py --device cpu --smoke --out DIR

A new user's check, per workload of benchmarks/gpu/models.py's FIRST_STEP_WORKLOADS (ResNet-50
with AdamW in fp32 and bf16, a BERT-base-like encoder in bf16, a T5-small-like
encoder-decoder in fp32):

1. untraced: after a warm-up, bursts of --burst steps back to back (CUDA events around each
   burst, one synchronisation at its end), the step time per burst; median over --bursts;
2. a fresh ``habitat.predict_on`` run: its two detailed steps (CUPTI on, every op recorded),
   each one's step as seen on this GPU (``StepForecast.step_ms``; uncalibrated: no steady-state
   step exists yet), host-bound verdict, GPU-busy share, CUPTI's measured cost per launch;
3. the same run after --steady steady-state steps: the calibrated step as seen, its host
   calibration factor (``host_scale``) and the uncalibrated step beside it;
4. one detailed step recorded alone (``record_step`` with CUPTI, no forecast worker beside it),
   forecast afterwards: what the worker's forecasting costs the traced host;
5. untraced bursts again (the host's drift over the measurement).

Writes DIR/first-step.json, DIR/first-step.md (the table) and DIR/traces/<workload>_<precision>
.json.gz: the second detailed step (format 2, with ``benchmark.measured``: the untraced burst
median), for benchmarks/timeline/uncalibrated.py to replay on a CPU. A GPU session runs it as
``bash benchmarks/gpu/run.sh first-step`` (about 2 minutes on an H100).
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))

from models import FIRST_STEP_WORKLOADS  # noqa: E402

import habitat  # noqa: E402
from habitat import _C  # noqa: E402
from habitat.capture import cupti  # noqa: E402
from habitat.data import engine  # noqa: E402

#: GPUs forecast besides the origin: the README's first example.
OTHER_TARGETS = ("A100-SXM4-80GB", "L4")
#: --smoke: sizes small enough for a CPU check of the script.
_TINY = {"vocab": 512, "width": 64, "layers": 1, "heads": 2}
SMOKE_SIZES = {"resnet50_adamw": {"batch": 2}, "bert_base": {"batch": 2, "context": 16, **_TINY},
               "t5_small": {"batch": 2, "length": 16, **_TINY}}


def untraced_bursts_ms(step: Callable[[], None], bursts: int, burst: int, device: torch.device) -> list[float]:
    """Per-step time of `bursts` bursts of `burst` steps back to back, one synchronisation at
    each burst's end (CUDA events on a GPU, the host clock on a CPU)."""
    out = []
    for _ in range(bursts):
        if device.type == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(burst):
                step()
            end.record()
            torch.cuda.synchronize()
            out.append(start.elapsed_time(end) / burst)
        else:
            t0 = time.perf_counter()
            for _ in range(burst):
                step()
            out.append((time.perf_counter() - t0) * 1e3 / burst)
    return out


def _step_view(step: Any, target: str) -> dict[str, Any]:
    t = step.timeline.get(target, {}) if step.timeline else {}
    return {"step_ms": step.step_ms(target), "kernel_sum_ms": step.time_ms(target),
            "host_ms": t.get("host_ms"), "host_bound": t.get("host_bound"),
            "gpu_busy_fraction": t.get("gpu_busy_fraction"), "host_scale": t.get("host_scale", 1.0),
            "uncalibrated_step_ms": t.get("uncalibrated_step_ms", step.step_ms(target)),
            "launch_overhead_us": t.get("launch_overhead_us"),
            "overhead_removed_ms": t.get("overhead_removed_ms"), "notes": t.get("notes", [])}


class ApiRecords:
    """HABITAT_CUPTI_API_RECORDS for one measurement ("all": CUPTI's default; "launches": the
    launch calls' API records only), with CUPTI's cost per launch measured again under it."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        self.saved = os.environ.get("HABITAT_CUPTI_API_RECORDS")
        os.environ["HABITAT_CUPTI_API_RECORDS"] = self.mode
        _C.cupti_set_launch_overhead(-1.0)  # measured again at the next traced step

    def __exit__(self, *exc: Any) -> None:
        if self.saved is None:
            os.environ.pop("HABITAT_CUPTI_API_RECORDS", None)
        else:
            os.environ["HABITAT_CUPTI_API_RECORDS"] = self.saved
        _C.cupti_set_launch_overhead(-1.0)


def measure(name: str, build: Callable[..., Callable[[bool], None]], precision: str,
            device: torch.device, args: argparse.Namespace, out_dir: Path,
            api_records: str = "all") -> dict[str, Any]:
    with ApiRecords(api_records):
        row = _measure(name, build, precision, device, args, out_dir, api_records)
    row["api_records"] = api_records
    return row


def _measure(name: str, build: Callable[..., Callable[[bool], None]], precision: str,
             device: torch.device, args: argparse.Namespace, out_dir: Path,
             api_records: str) -> dict[str, Any]:
    torch.manual_seed(0)
    sizes = SMOKE_SIZES.get(name, {}) if args.smoke else {}
    train = build(device, **sizes)
    autocast = precision == "bf16"

    def step() -> None:
        train(autocast)

    for _ in range(args.warmup):
        step()
    before = untraced_bursts_ms(step, args.bursts, args.burst, device)
    origin = cupti.origin_device() if device.type == "cuda" else "H100-SXM5-80GB"
    targets = [origin] + [t for t in OTHER_TARGETS if t != origin]
    predictor = habitat.predict_on(targets)
    detailed_walls = []
    for _ in range(2):
        t0 = time.perf_counter()
        with predictor as forecast:
            step()
        detailed_walls.append((time.perf_counter() - t0) * 1e3)
    predictor.wait()
    detailed = [_step_view(s, origin) for s in forecast.steps[:2]]
    second = forecast.steps[1] if len(forecast.steps) > 1 else forecast.latest
    # Now: the steady-state steps below push the second step out of the kept detail (keep_steps).
    trace = second.trace
    document = engine.trace_document(forecast.origin, [trace]) if trace is not None else None
    for _ in range(args.steady):
        with predictor as forecast:
            step()
    predictor.close()
    calibrated = _step_view(forecast.latest, origin)
    isolated = _isolated_detailed_step(step, forecast.origin, targets, origin)
    after = untraced_bursts_ms(step, args.bursts, args.burst, device)
    untraced = statistics.median(before + after)

    if document is not None:
        document["benchmark"] = {"model": name, "precision": precision,
                                 "measured": {"median_ms": untraced, "bursts_ms": before + after,
                                              "burst_steps": args.burst}}
        suffix = "" if api_records == "all" else f"_{api_records}"
        path = out_dir / "traces" / f"{name}_{precision}{suffix}.json.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(document, f, separators=(",", ":"))
    return {"workload": name, "precision": precision, "origin": origin,
            "untraced_ms": untraced, "untraced_before_ms": before, "untraced_after_ms": after,
            "detailed_wall_ms": detailed_walls, "detailed": detailed, "calibrated": calibrated,
            "isolated": isolated,
            "step_counts": dict(predictor.step_counts),
            "kernels_recorded": sum(len(op.get("kernels", [])) for op in trace["ops"]) if trace else 0}


def _isolated_detailed_step(step: Callable[[], None], origin_doc: dict[str, Any], targets: list[str],
                            origin: str) -> dict[str, Any]:
    """One detailed step recorded alone (record_step with CUPTI, no predict_on: no forecast
    worker running beside it, no steady-state steps), forecast afterwards: beside predict_on's
    detailed steps, what the worker's forecasting of the previous step costs the traced host."""
    from habitat.capture.cupti import KernelTracing
    from habitat.capture.predict import record_step
    from habitat.data.forecast import Forecast

    tracing = KernelTracing()
    try:
        with record_step(tracing=tracing) as rec:
            step()
    finally:
        tracing.close()
    if rec.step is None:
        return {}
    doc = engine.trace_document(origin_doc, [rec.step])
    return _step_view(Forecast.from_trace(doc, targets).latest, origin)


def _pct(value: float | None, ref: float) -> str:
    return "" if value is None or not ref else f"{100 * (value / ref - 1):+.1f}%"


def markdown(rows: list[dict[str, Any]], header: str) -> str:
    lines = [header, "",
             "| workload | precision | CUPTI API records | untraced ms (bursts) | kernel sum ms (kernels) "
             "| detailed step 1 as seen (err) | detailed step 2 as seen (err) | verdict, GPU busy "
             "| CUPTI us/launch | calibrated (err) | host scale | detailed step alone (err) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['precision']} | {r.get('api_records', '')} "
                         f"| error: {r['error'][:80]} | | | | | | | | |")
            continue
        u, d, c = r["untraced_ms"], r["detailed"], r["calibrated"]
        last = d[-1]
        busy = last["gpu_busy_fraction"]
        verdict = ("host-bound" if last["host_bound"] else "device-bound") + (
            f", {100 * busy:.0f}%" if busy is not None else "")
        cost = last["launch_overhead_us"]
        lines.append(
            f"| {r['workload']} | {r['precision']} | {r['api_records']} | {u:.2f} "
            f"| {last['kernel_sum_ms']:.2f} ({r['kernels_recorded']}) "
            + "".join(f"| {s['step_ms']:.2f} ({_pct(s['step_ms'], u)}) " for s in d)
            + f"| {verdict} | {f'{cost:.2f}' if cost else '-'} "
            f"| {c['step_ms']:.2f} ({_pct(c['step_ms'], u)}) | {c['host_scale']:.2f} "
            + (f"| {r['isolated']['step_ms']:.2f} ({_pct(r['isolated']['step_ms'], u)}) |" if r.get("isolated") else "| |"))
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workloads", nargs="+", default=None,
                   help="names (resnet50_adamw, bert_base, t5_small); default: all four rows")
    p.add_argument("--device", default="cuda")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--bursts", type=int, default=5, help="untraced bursts before and after")
    p.add_argument("--burst", type=int, default=10, help="steps per untraced burst")
    p.add_argument("--steady", type=int, default=24, help="steady-state steps before the calibrated read")
    p.add_argument("--cupti-api-records", choices=["all", "launches", "both"], default="all",
                   help="CUPTI's API records during the traced steps (HABITAT_CUPTI_API_RECORDS): "
                        "every call's (default), the launch calls' only, or each workload both ways")
    p.add_argument("--smoke", action="store_true", help="batch 2, 1 burst of 2 steps: checks the script")
    args = p.parse_args(argv)
    if args.smoke:
        args.warmup, args.bursts, args.burst, args.steady = 1, 1, 2, 6
    return args


def write_results(rows: list[dict[str, Any]], device: torch.device, out: Path) -> str:
    """Writes OUT/first-step.json and .md with the rows measured so far; returns the table."""
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "habitat": habitat.__version__,
           "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
           "cupti": cupti.cupti_status(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    header = (f"# The first detailed steps' step as seen vs the untraced step ({env['device']}, torch "
              f"{env['torch']}, CUDA {env['cuda']}; CUPTI: {env['cupti']})")
    (out / "first-step.json").write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
    table = markdown(rows, header)
    (out / "first-step.md").write_text(table)
    return table


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("first_step.py needs a CUDA GPU (or --device cpu --smoke)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for workload, precision in FIRST_STEP_WORKLOADS:
        if args.workloads and workload.name not in args.workloads:
            continue
        if device.type == "cpu" and precision == "bf16":
            continue  # the models autocast on CUDA only
        modes = ["all", "launches"] if args.cupti_api_records == "both" else [args.cupti_api_records]
        for mode in modes:
            t0 = time.perf_counter()
            try:
                r = measure(workload.name, workload.build, precision, device, args, args.out, mode)
            except Exception as exc:  # one broken workload must not lose the others
                r = {"workload": workload.name, "precision": precision, "api_records": mode,
                     "error": f"{type(exc).__name__}: {exc}"}
            rows.append(r)
            write_results(rows, device, args.out)  # a run cut short keeps the rows done
            print(f"{workload.name} {precision} (CUPTI API records: {mode}): "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    print(write_results(rows, device, args.out))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
