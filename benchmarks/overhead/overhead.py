"""Capture overhead on CPU: per-op interception cost and whole-step overhead, beside torch.profiler.

    PYTHONPATH=python python benchmarks/overhead/overhead.py [--quick]

Modes, timed in the same run on the same thread, taking turns within each repeat:
  base         the capture key is not in the thread's TLS (torch as if Habitat were absent)
  pass         the key is included (as after a first predict_on) but no step is recording
  capture      inside habitat.capture.predict.record_step (ops recorded; the step stays in C++)
  predict_on   inside habitat.predict_on("A100"): capture, then the step is encoded and
               forecast on predict_on's worker thread while training goes on
  profiler     inside torch.profiler.profile(activities=[CPU]) (record_shapes=False)
Whole steps are timed as wall time and as the training thread's CPU time (time.thread_time),
which a busy shared machine disturbs less.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, ContextManager

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))

from models import TinyTransformer, make_workload  # noqa: E402

import habitat  # noqa: E402
from habitat import _C  # noqa: E402
from habitat.capture.predict import record_step  # noqa: E402


def _profiler() -> ContextManager[Any]:
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])


@contextlib.contextmanager
def _key(included: bool):
    before = _C._capture_key_included()
    if included and not before:
        with record_step():  # the documented way to include the key: open a window once
            pass
    elif not included and before:
        _C._capture_release_thread()
    try:
        yield
    finally:
        if before != _C._capture_key_included():
            if before:
                with record_step():
                    pass
            else:
                _C._capture_release_thread()


def _median_time(fn: Callable[[], None], wrap: Callable[[], ContextManager[Any]], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        with wrap():
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


# ----- per-op interception cost --------------------------------------------------------
def per_op_table(n: int, repeats: int) -> list[str]:
    a1 = torch.ones(1)
    m, k = torch.randn(8, 8), torch.randn(8, 8)
    bias = torch.randn(8)
    cases: dict[str, Callable[[], None]] = {
        "add (1 elem)": lambda: [torch.add(a1, a1) for _ in range(n)],
        "addmm 8x8": lambda: [torch.addmm(bias, m, k) for _ in range(n)],
        "view+transpose": lambda: [m.view(64).view(8, 8).t() for _ in range(n)],
    }
    lines = [f"{'op loop':<16} {'calls/iter':>10} {'base us':>8} {'pass us':>8} {'capture us':>10} "
             f"{'profiler us':>11}   (added per dispatcher call)"]
    for label, fn in cases.items():
        with record_step() as rec:
            fn()
        calls = len(rec.step["ops"]) / n  # dispatcher calls the key intercepts per iteration
        with _key(False):
            base = _median_time(fn, contextlib.nullcontext, repeats)
        with _key(True):
            passthrough = _median_time(fn, contextlib.nullcontext, repeats)
            cap = _median_time(fn, record_step, repeats)
        with _key(False):
            prof = _median_time(fn, _profiler, repeats)
        us = 1e6 / (n * calls)  # a case's seconds -> microseconds per dispatcher call
        lines.append(f"{label:<16} {calls:>10.0f} {base * us:>8.2f} {(passthrough - base) * us:>8.2f} "
                     f"{(cap - base) * us:>10.2f} {(prof - base) * us:>11.2f}")
    return lines


# ----- whole-step overhead -------------------------------------------------------------
def _large_transformer() -> Callable[[], Any]:
    torch.manual_seed(0)
    model = TinyTransformer(vocab=2000, dim=256, heads=8, layers=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 2000, (8, 128))

    def step() -> None:
        opt.zero_grad()
        out = model(tokens)
        F.cross_entropy(out.reshape(-1, out.shape[-1]), tokens.reshape(-1)).backward()
        opt.step()
    return step


def _large_cnn() -> Callable[[], Any]:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    ch = 3
    for out in (32, 64, 128, 128):
        layers += [nn.Conv2d(ch, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU(), nn.MaxPool2d(2)]
        ch = out
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(128 * 4 * 4, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,))

    def step() -> None:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


BURST = 3  # consecutive steps per mode and repeat


def step_table(repeats: int) -> list[str]:
    small = {name: make_workload(name, "adam").step for name in ("mlp", "cnn", "transformer")}
    cases = {f"small {k}": v for k, v in small.items()}
    cases["large transformer"] = _large_transformer()
    cases["large cnn"] = _large_cnn()
    predictor = habitat.predict_on("A100")
    modes: dict[str, tuple[bool, Callable[[], ContextManager[Any]]]] = {
        "base": (False, contextlib.nullcontext),
        "pass": (True, contextlib.nullcontext),
        "capture": (True, record_step),
        "predict_on": (True, lambda: predictor),
        "profiler": (False, _profiler),
    }

    header = " ".join(f"{m:>10}" for m in list(modes)[1:])
    lines = [f"{'model':<18} {'ops':>6} {'base ms':>9} {header}   (wall, % over base)",
             f"{'':<18} {'':>6} {'':>9} {header}   (training thread CPU time, % over base)"]
    for label, fn in cases.items():
        for _ in range(2):
            fn()  # warm-up: optimizer state, allocator
        with record_step() as rec:
            fn()
        wall: dict[str, list[float]] = {m: [] for m in modes}
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        # Modes take turns within each repeat, so drift in the machine's load hits all alike.
        # The whole block is timed, exit included. Each turn is a burst of consecutive steps,
        # so predict_on's later steps run beside its worker forecasting the earlier ones (as
        # in training); the worker is drained before the next mode's turn.
        for _ in range(repeats):
            for mode, (included, wrap) in modes.items():
                with _key(included):
                    for _ in range(BURST):
                        w0, c0 = time.perf_counter(), time.thread_time()
                        with wrap():
                            fn()
                        wall[mode].append(time.perf_counter() - w0)
                        cpu[mode].append(time.thread_time() - c0)
                predictor.wait()
        base_wall, base_cpu = statistics.median(wall["base"]), statistics.median(cpu["base"])
        over_wall = " ".join(f"{(statistics.median(wall[m]) / base_wall - 1) * 100:>9.1f}%"
                             for m in list(modes)[1:])
        over_cpu = " ".join(f"{(statistics.median(cpu[m]) / base_cpu - 1) * 100:>9.1f}%"
                            for m in list(modes)[1:])
        lines.append(f"{label:<18} {len(rec.step['ops']):>6} {base_wall * 1e3:>9.2f} {over_wall}")
        lines.append(f"{'':<18} {'':>6} {'':>9} {over_cpu}")
    predictor.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # e.g. forecast warnings for unsupported ops
    n, repeats = (200, 5) if args.quick else (2000, 15)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {n} calls per loop, "
          f"median of {repeats} repeats")
    print("\nPer-op interception cost (us added per dispatcher call the key sees):")
    print("\n".join(per_op_table(n, repeats)))
    print("\nWhole-step overhead on CPU (median over repeats; predict_on forecasts on its own thread):")
    print("\n".join(step_table(max(3, repeats // 2))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
