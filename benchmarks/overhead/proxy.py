"""Launch-bound proxy: what forecasting while training costs when host overhead is the step.

    PYTHONPATH=python python benchmarks/overhead/proxy.py [--quick] [--repeats N]

On a GPU host many real steps are host-bound: the CPU launching ops is the bottleneck, so
every microsecond the capture adds per dispatcher call, per module call or per step shows up
1:1 in the step time. A model of tiny tensors on the CPU (each op a few microseconds, 1-5k ops
per step) reproduces that regime on any machine: host overhead is the whole step.

One table, the columns of issue 13's GPU table, timed in one run on the training thread,
modes taking turns within each repeat, in a shuffled order, each turn one untimed step and
then a burst of timed ones (so drift in the machine's load hits all alike). Each
model has two rows: wall time of the step, and the training thread's CPU time
(time.thread_time), which a busy shared machine disturbs less (but which does not see the
forecast worker competing for the GIL and the cores; the wall row does):

  plain          the capture key is not in the thread's TLS (torch as if Habitat were absent)
  torch.profiler torch.profiler.profile(activities=[CPU]) around each step
  capture        record_step: capture only, no forecast (detailed: every op recorded; steady:
                 only the step's fingerprint, as predict_on does after its detail steps)
  predict_on 1   habitat.predict_on with 1 target GPU
  predict_on 21  habitat.predict_on with every GPU of the database (21)

Steady state: predict_on after its detail steps (the step repeats, so it reuses the forecast):
by default at most one step in 20 hashes each top-level op's name, shapes and dtypes (the
fingerprint; the gap grows 1, 2, 4, ... 20 while it repeats) and the others are only timed,
with the capture key off the thread; "fingerprint every step" is
predict_on(fingerprint_every=1), and "capture only (steady)" is record_step(detailed=False),
the fingerprint alone. "fingerprint us/op added" = (capture only (steady) - plain) / ops. Detailed: every step recorded in full
(predict_on(detail_every=1)); the worker is drained between detailed steps, outside the
timing, so each timed step really is detailed (the worker's own time is not in the column).

Also printed: the time added per dispatcher call in steady state, from op loops (1-element
add, 8x8 addmm) and from the proxy steps themselves ((steady - plain) / ops per step).
"""
from __future__ import annotations

import argparse
import contextlib
import random
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

from models import TinyTransformer  # noqa: E402

import habitat  # noqa: E402
from habitat import _C  # noqa: E402
from habitat.capture.predict import record_step  # noqa: E402


# ----- the proxy workloads ---------------------------------------------------------------
def proxy_transformer() -> Callable[[], None]:
    """4 pre-norm blocks, d=32, batch 2 x 16 tokens, AdamW: ~3k ops of a few us each."""
    torch.manual_seed(0)
    model = TinyTransformer(vocab=64, dim=32, heads=4, layers=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    tokens = torch.randint(0, 64, (2, 16))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        out = model(tokens)
        F.cross_entropy(out.reshape(-1, out.shape[-1]), tokens.reshape(-1)).backward()
        opt.step()
    return step


def proxy_mlp() -> Callable[[], None]:
    """12 x (Linear 16x16, LayerNorm, GELU), batch 4, SGD with momentum: ~1k ops."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(12):
        layers += [nn.Linear(16, 16), nn.LayerNorm(16), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, foreach=False)
    x, y = torch.randn(4, 16), torch.randint(0, 4, (4,))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


WORKLOADS = {"proxy transformer": proxy_transformer, "proxy mlp": proxy_mlp}


# ----- helpers ---------------------------------------------------------------------------
def _profiler() -> ContextManager[Any]:
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])


def _set_key(included: bool) -> None:
    if included and not _C._capture_key_included():
        with record_step(detailed=False):  # opening a window includes the key
            pass
    elif not included and _C._capture_key_included():
        _C._capture_release_thread()


def _all_targets() -> list[str]:
    return [d.name for d in habitat.devices()]


# ----- per dispatcher call ---------------------------------------------------------------
def per_call(n: int, repeats: int) -> list[str]:
    a1 = torch.ones(1)
    m, k, bias = torch.randn(8, 8), torch.randn(8, 8), torch.randn(8)
    cases: dict[str, Callable[[], None]] = {
        "add (1 elem)": lambda: [torch.add(a1, a1) for _ in range(n)],
        "addmm 8x8": lambda: [torch.addmm(bias, m, k) for _ in range(n)],
    }
    modes: dict[str, tuple[bool, Callable[[], ContextManager[Any]]]] = {
        "plain": (False, contextlib.nullcontext),
        "key only": (True, contextlib.nullcontext),
        "steady": (True, lambda: record_step(detailed=False)),
        "detailed": (True, record_step),
    }
    lines = [f"{'op loop':<14} {'calls/iter':>10} {'plain us':>9} " +
             " ".join(f"{m:>9}" for m in list(modes)[1:]) + "   (us added per dispatcher call)"]
    for label, fn in cases.items():
        with record_step() as rec:
            fn()
        calls = len(rec.step["ops"]) / n
        times: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(repeats):
            for mode, (included, wrap) in modes.items():
                _set_key(included)
                with wrap():
                    t0 = time.perf_counter()
                    fn()
                    times[mode].append(time.perf_counter() - t0)
        base = statistics.median(times["plain"])
        added = " ".join(f"{(statistics.median(times[m]) - base) / (n * calls) * 1e6:>9.3f}"
                         for m in list(modes)[1:])
        lines.append(f"{label:<14} {calls:>10.0f} {base / (n * calls) * 1e6:>9.3f} {added}")
    _set_key(False)
    return lines


# ----- whole steps -----------------------------------------------------------------------
COLUMNS = ["profiler", "capture", "predict_on 1", "predict_on 21"]


def _low(values: Any) -> float:
    """The 25th percentile: on a shared machine other processes only ever add time, so the
    lower quartile estimates a mode's own cost better than the median (both are noisy)."""
    v = sorted(values)
    return v[len(v) // 4]


def _time_steps(fn: Callable[[], None], wrap: Callable[[], ContextManager[Any]], burst: int,
                after: Callable[[], None] | None = None) -> list[tuple[float, float]]:
    """(wall, training thread CPU time) of each step of a burst."""
    out = []
    for _ in range(burst):
        t0, c0 = time.perf_counter(), time.thread_time()
        with wrap():
            fn()
        out.append((time.perf_counter() - t0, time.thread_time() - c0))
        if after is not None:
            after()  # outside the timing
    return out


def _entering(predictor: Any) -> Callable[[], ContextManager[Any]]:
    """A mode's wrap: the same predict_on entered every step."""
    return lambda: predictor


def step_table(repeats: int, burst: int) -> tuple[list[str], list[str]]:
    rows, notes = [], []
    targets21 = _all_targets()
    for label, make in WORKLOADS.items():
        fn = make()
        for _ in range(3):
            fn()  # warm-up: optimizer state, allocator
        with record_step() as rec:
            fn()
        ops = len(rec.step["ops"])
        steady1 = habitat.predict_on("A100")
        steady21 = habitat.predict_on(targets21)
        exact1 = habitat.predict_on("A100", fingerprint_every=1)  # every step fingerprinted
        detail1 = habitat.predict_on("A100", detail_every=1)
        detail21 = habitat.predict_on(targets21, detail_every=1)
        for p in (steady1, steady21, exact1):  # reach the steady state: the detail steps, forecast
            for _ in range(3):
                with p:
                    fn()
            p.wait()
        # mode: (key included, wrap, worker drained after each step (outside the timing))
        modes: dict[str, tuple[bool, Callable[[], ContextManager[Any]], Callable[[], None] | None]] = {
            "plain": (False, contextlib.nullcontext, None),
            "profiler": (False, _profiler, None),
            "capture steady": (True, lambda: record_step(detailed=False), None),
            "capture detailed": (True, record_step, None),
            "predict_on 1 steady": (True, _entering(steady1), None),
            "predict_on 21 steady": (True, _entering(steady21), None),
            "predict_on 1 fingerprint every step": (True, _entering(exact1), None),
            "predict_on 1 detailed": (True, _entering(detail1), detail1.wait),
            "predict_on 21 detailed": (True, _entering(detail21), detail21.wait),
        }
        times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        order = list(modes)
        rng = random.Random(0)
        for _ in range(repeats):
            rng.shuffle(order)  # no mode always follows the same one (caches, the worker)
            for mode in order:
                included, wrap, after = modes[mode]
                _set_key(included)
                # One untimed step first: the burst starts from this mode's own state.
                times[mode] += _time_steps(fn, wrap, burst + 1, after)[1:]
        _set_key(False)
        for clock, which in (("wall", 0), ("CPU", 1)):
            med = {m: _low(t[which] for t in v) for m, v in times.items()}
            base = med["plain"]
            pct = {m: f"{(t / base - 1) * 100:+.1f}%" for m, t in med.items()}
            rows.append(f"| {label} ({clock}) | {ops} | {base * 1e3:.2f} | {pct['profiler']} | "
                        f"{pct['capture steady']} | {pct['predict_on 1 steady']} | "
                        f"{pct['predict_on 21 steady']} | "
                        f"{pct['predict_on 1 fingerprint every step']} | "
                        f"{pct['capture detailed']} | "
                        f"{pct['predict_on 1 detailed']} | {pct['predict_on 21 detailed']} | "
                        f"{(med['capture steady'] - base) / ops * 1e6:.2f} |")
        for p, name in ((steady1, "predict_on 1 steady"), (steady21, "predict_on 21 steady"),
                        (exact1, "predict_on 1 fingerprint every step"),
                        (detail1, "predict_on 1 detailed"), (detail21, "predict_on 21 detailed")):
            p.close()
            notes.append(f"{label}, {name}: steps {p.step_counts} "
                         f"(forecast {p.forecast.time_ms(p.forecast.targets[0]):.3f} ms on "
                         f"{p.forecast.targets[0]})")
    header = ["| model | ops/step | plain ms | torch.profiler | capture only (steady) | "
              "predict_on 1 GPU (steady) | predict_on 21 GPUs (steady) | predict_on 1 GPU "
              "(steady, fingerprint every step) | capture only (detailed) | predict_on 1 GPU "
              "(detailed) | predict_on 21 GPUs (detailed) | fingerprint us/op added |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    return header + rows, notes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    p.add_argument("--repeats", type=int, default=None, help="turns per mode (default 30)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")  # e.g. forecast warnings for unsupported ops
    repeats = args.repeats or (3 if args.quick else 30)
    burst = 2 if args.quick else 3
    n = 200 if args.quick else 2000
    print(f"torch {torch.__version__}, {args.threads} thread(s); lower quartile of {repeats} turns "
          f"x {burst} steps per mode (op loops: median of the turns); % over plain")
    print("\nPer dispatcher call (op loops, median of the turns):")
    print("\n".join(per_call(n, repeats)))
    rows, notes = step_table(repeats, burst)
    print("\nLaunch-bound proxy, whole steps:")
    print("\n".join(rows))
    print("\nSteps per predictor (detailed / reused a forecast / skipped) and its latest forecast:")
    print("\n".join(f"- {n}" for n in notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
