"""Issue 13's overhead table on a GPU: what forecasting while training costs a real step.

    PYTHONPATH=python python benchmarks/overhead/gpu_table.py [--models resnet50 gpt2_small dcgan]
        [--precisions fp32 bf16] [--turns 8] [--burst 4] [--out DIR]
    PYTHONPATH=python python benchmarks/overhead/gpu_table.py --device cpu --smoke   # CPU smoke run

The workloads of benchmarks/gpu/models.py (fp32 and bf16 autocast), each mode timed in
turns, modes shuffled per turn, on the same process and host. The columns of the issue's
H100 table (benchmarks/results/overhead-breakdown-h100.json), each as % over plain:

  plain           the step alone (its time in ms)
  torch.profiler  torch.profiler.profile(CPU + CUDA activities) around each step
  capture only    record_step(): every op recorded in detail, no CUPTI (a detailed step)
  CUPTI only      KernelTracing around the step: kernels traced, synchronised and flushed
  capture+CUPTI   record_step(tracing=KernelTracing()): a detailed step as predict_on runs it
  predict_on 1 / predict_on 21   habitat.predict_on with 1 target GPU / every GPU of the
                  database, with its defaults, in steady state (after its detail steps and
                  the first fingerprints: the steps a long run is made of)
and two more: capture only (steady) = record_step(detailed=False), the fingerprint alone;
predict_on 1 (fp every step) = predict_on(fingerprint_every=1).

Two timings, two tables:
  synchronised   the device is synchronised before and after each step (the issue's method:
                 median wall time per synchronised step);
  burst          `--burst` steps back to back with one synchronisation at the end, per step:
                 the host may run ahead of the device, as in training, so a mode that
                 synchronises inside the step (CUPTI flushes) pays for it here.
Each cell: the median over turns. Writes gpu-overhead.json and gpu-overhead.md to --out.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, ContextManager

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))

from models import WORKLOADS  # noqa: E402

import habitat  # noqa: E402
from habitat import _C  # noqa: E402
from habitat.capture.cupti import KernelTracing, cupti_status  # noqa: E402
from habitat.capture.predict import record_step  # noqa: E402

MODELS = ("resnet50", "gpt2_small", "dcgan")  # the table
COLUMNS = [  # (key, header)
    ("profiler", "torch.profiler"),
    ("capture", "capture only"),
    ("cupti", "CUPTI only"),
    ("capture_cupti", "capture+CUPTI"),
    ("predict_1", "predict_on 1 GPU"),
    ("predict_all", "predict_on 21 GPUs"),
    ("capture_steady", "capture only (steady)"),
    ("predict_1_fp_every_step", "predict_on 1 GPU (fp every step)"),
]


class _TracedStep:
    """KernelTracing around one step, as it runs without the capture (CUPTI only)."""

    def __init__(self, tracing: KernelTracing) -> None:
        self.tracing = tracing

    def __enter__(self) -> None:
        self.tracing.begin_step()

    def __exit__(self, *exc: Any) -> None:
        self.tracing.end_step()


def _profiler(cuda: bool) -> ContextManager[Any]:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    return profile(activities=activities)


def _release_key() -> None:
    if _C._capture_key_included():
        _C._capture_release_thread()


def measure(name: str, precision: str, device: torch.device, turns: int, burst: int,
            batch: int | None, targets_all: list[str], settle: int) -> dict[str, Any]:
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    workload = next(w for w in WORKLOADS if w.name == name)
    train = workload.build(device) if batch is None else workload.build(device, batch=batch)  # type: ignore[call-arg]
    autocast = precision == "bf16"

    def fn() -> None:
        train(autocast)

    for _ in range(3):
        fn()
    sync()
    with record_step() as rec:
        fn()
    ops = len(rec.step["ops"]) if rec.step else 0
    tracing = KernelTracing()
    one = _origin_target() if cuda else ["A100"]  # the issue's: predict_on(["H100"]) on an H100
    predictors = {
        "predict_1": habitat.predict_on(one),
        "predict_all": habitat.predict_on(targets_all),
        "predict_1_fp_every_step": habitat.predict_on(one, fingerprint_every=1),
    }
    for p in predictors.values():  # its detail steps, forecast, then the first fingerprints
        for _ in range(settle):
            with p:
                fn()
        p.wait()
    modes: dict[str, Callable[[], ContextManager[Any]]] = {
        "plain": contextlib.nullcontext,
        "profiler": lambda: _profiler(cuda),
        "capture": record_step,
        "cupti": lambda: _TracedStep(tracing),
        "capture_cupti": lambda: record_step(tracing=tracing),
        "capture_steady": lambda: record_step(detailed=False),
        **{key: (lambda p=p: p) for key, p in predictors.items()},
    }
    synced: dict[str, list[float]] = {m: [] for m in modes}
    bursts: dict[str, list[float]] = {m: [] for m in modes}
    order = list(modes)
    rng = random.Random(0)
    for _ in range(turns):
        rng.shuffle(order)
        for mode in order:
            wrap = modes[mode]
            _release_key()  # as without Habitat; modes that capture include it themselves
            with wrap():
                fn()  # untimed: the mode's own state
            sync()
            t0 = time.perf_counter()
            with wrap():
                fn()
            sync()
            synced[mode].append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            for _ in range(burst):
                with wrap():
                    fn()
            sync()
            bursts[mode].append((time.perf_counter() - t0) * 1e3 / burst)
    _release_key()
    tracing.close()
    counts = {}
    for key, p in predictors.items():
        p.close()
        counts[key] = dict(p.step_counts)
    return {"model": name, "prec": precision, "ops": ops,
            "synchronised_ms": {m: statistics.median(v) for m, v in synced.items()},
            "burst_ms": {m: statistics.median(v) for m, v in bursts.items()},
            "predictor_steps": counts}


def _origin_target() -> list[str]:
    from habitat.capture.cupti import origin_device

    name = origin_device()
    known = {d.name for d in habitat.devices()}
    return [name] if name in known else [sorted(known)[0]]


def table(results: list[dict[str, Any]], timing: str) -> list[str]:
    lines = ["| model | prec | ops | plain ms | " + " | ".join(h for _, h in COLUMNS) + " |",
             "|---|---|---|---|" + "---|" * len(COLUMNS)]
    for r in results:
        t = r[timing]
        base = t["plain"]
        cells = " | ".join(f"{(t[k] / base - 1) * 100:+.0f}%" for k, _ in COLUMNS)
        lines.append(f"| {r['model']} | {r['prec']} | {r['ops']} | {base:.1f} | {cells} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=[w.name for w in WORKLOADS])
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    p.add_argument("--turns", type=int, default=8, help="turns per mode (default 8)")
    p.add_argument("--burst", type=int, default=4, help="steps per burst (default 4)")
    p.add_argument("--settle", type=int, default=32,
                   help="steps each predictor runs before the timing (default 32: its "
                        "fingerprint gap has grown to the default 20 by then)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke run)")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the workload's)")
    p.add_argument("--smoke", action="store_true",
                   help="dcgan fp32 only, batch 1, 1 turn of 1-step bursts: checks the script")
    p.add_argument("--out", type=Path, default=None, help="write gpu-overhead.json/.md here")
    args = p.parse_args(argv)
    if args.smoke:
        args.models, args.precisions, args.turns, args.burst = ["dcgan"], ["fp32"], 1, 1
        args.batch, args.settle = args.batch or 1, 3
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_table.py needs a CUDA GPU (or --device cpu for a smoke run)", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    targets_all = [d.name for d in habitat.devices()]
    gpu = torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu"
    head = (f"# {gpu}, torch {torch.__version__}, CUPTI: {cupti_status()}; median of {args.turns} "
            f"turns per mode, bursts of {args.burst} steps; % over plain")
    print(head, flush=True)
    results = []
    for name in args.models:
        for precision in args.precisions:
            t0 = time.perf_counter()
            results.append(measure(name, precision, device, args.turns, args.burst, args.batch,
                                   targets_all, args.settle))
            print(f"{name} {precision}: {time.perf_counter() - t0:.0f} s; "
                  f"steps {results[-1]['predictor_steps']}", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    md = [head, "", "Synchronised steps (the issue's method):", *table(results, "synchronised_ms"),
          "", f"Bursts of {args.burst} steps, one synchronisation at the end:",
          *table(results, "burst_ms")]
    print("\n".join(md[1:]))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu-overhead.json").write_text(json.dumps(
            {"device": gpu, "torch": torch.__version__, "cupti": cupti_status(),
             "turns": args.turns, "burst": args.burst, "results": results}, indent=1))
        (args.out / "gpu-overhead.md").write_text("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
