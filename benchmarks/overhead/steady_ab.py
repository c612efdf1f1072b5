"""Steady-state cost of predict_on, as an interleaved A/B on the launch-bound proxies.

    PYTHONPATH=python python benchmarks/overhead/steady_ab.py [--pairs N] [--quick]

For each proxy workload (benchmarks/overhead/proxy.py) and each predictor (1 target GPU,
every GPU of the database), the same training step runs alternately plain and inside the
predictor, one step each, in a random order per pair, for N pairs after the predictor has
reached its steady state. Each step's wall time and training-thread CPU time
(time.thread_time) are kept. A shared machine only ever adds time, and its load drifts, so
the table gives, per clock:

  q25 / median    the lower quartile and the median of each side's steps, and predict_on's
                  excess over plain for each;
  paired median   the median over pairs of (predict_on step - plain step), relative to the
                  plain median: each pair ran back to back, so slow drift cancels.

The predictor's own step kinds over the run (detailed / fingerprinted / timed) are printed
below the table: the excess is the amortised cost of that mix.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy import WORKLOADS, _all_targets  # noqa: E402

import habitat  # noqa: E402
from habitat import _C  # noqa: E402


def _q25(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 4]


def _plain_step(fn: Callable[[], None]) -> tuple[float, float]:
    if _C._capture_key_included():  # left by the predictor's last fingerprinted step
        _C._capture_release_thread()
    t0, c0 = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - t0, time.thread_time() - c0


def _predicted_step(fn: Callable[[], None], predictor: Any) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.thread_time()
    with predictor:
        fn()
    return time.perf_counter() - t0, time.thread_time() - c0


def ab(label: str, make: Callable[[], Callable[[], None]], targets: list[str], pairs: int,
       seed: int, options: dict[str, Any]) -> tuple[list[str], str]:
    fn = make()
    for _ in range(3):
        fn()  # optimizer state, allocator
    predictor = habitat.predict_on(targets, **options)
    for _ in range(12):  # the detail steps, forecast, then the first steady ones
        with predictor:
            fn()
    predictor.wait()
    before = dict(predictor._schedule.kind_counts)  # steps begun per kind (detailed/fingerprinted/timed)
    plain: list[tuple[float, float]] = []
    ours: list[tuple[float, float]] = []
    rng = random.Random(seed)
    for _ in range(pairs):
        if rng.random() < 0.5:
            plain.append(_plain_step(fn))
            ours.append(_predicted_step(fn, predictor))
        else:
            ours.append(_predicted_step(fn, predictor))
            plain.append(_plain_step(fn))
    kinds = {k: v - before[k] for k, v in predictor._schedule.kind_counts.items()}
    counts = predictor.step_counts
    predictor.close()
    rows = []
    name = f"{label}, {len(targets)} GPU{'s' if len(targets) > 1 else ''}"
    for clock, i in (("wall", 0), ("CPU", 1)):
        a, b = [t[i] for t in plain], [t[i] for t in ours]
        qa, qb, ma, mb = _q25(a), _q25(b), statistics.median(a), statistics.median(b)
        paired = statistics.median(y - x for x, y in zip(a, b)) / ma
        rows.append(f"| {name} ({clock}) | {pairs} | {qa * 1e3:.3f} | {qb * 1e3:.3f} | "
                    f"{(qb / qa - 1) * 100:+.1f}% | {ma * 1e3:.3f} | {mb * 1e3:.3f} | "
                    f"{(mb / ma - 1) * 100:+.1f}% | {paired * 100:+.1f}% |")
    note = f"- {name}: step kinds {dict(sorted(kinds.items()))}; predictor counts {counts}"
    return rows, note


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=None, help="A/B pairs per row (default 600)")
    p.add_argument("--quick", action="store_true", help="60 pairs (a smoke run)")
    p.add_argument("--fingerprint-every", type=int, default=None,
                   help="predict_on(fingerprint_every=N) (default: predict_on's default)")
    p.add_argument("--targets", choices=("1", "21", "both"), default="both",
                   help="predictors to measure: 1 target GPU, all 21, or both (default)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    pairs = args.pairs or (60 if args.quick else 600)
    print(f"torch {torch.__version__}, {args.threads} thread(s); {pairs} interleaved pairs "
          "(plain step, predict_on step; random order per pair) per row")
    print("| workload | pairs | plain q25 ms | predict_on q25 ms | excess q25 | plain median ms | "
          "predict_on median ms | excess median | paired median |")
    print("|---|---|---|---|---|---|---|---|---|")
    options = {} if args.fingerprint_every is None else {"fingerprint_every": args.fingerprint_every}
    if options:
        print(f"predict_on options: {options}")
    notes = []
    target_sets = {"1": [["A100"]], "21": [_all_targets()], "both": [["A100"], _all_targets()]}
    for seed, (label, make) in enumerate(WORKLOADS.items()):
        for targets in target_sets[args.targets]:
            rows, note = ab(label, make, targets, pairs, seed, options)
            print("\n".join(rows), flush=True)
            notes.append(note)
    print("\nStep kinds of the predict_on steps (fingerprinted: the capture key hashes each "
          "top-level op; timed: only timed, the key off the thread):")
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
