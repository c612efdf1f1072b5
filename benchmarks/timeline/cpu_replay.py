"""Habitat's own time removed from a traced step's host cadence, checked on the CPU (issue #15).

On a CPU every op's work is host time, so the timeline's host cadence of a step traced by
habitat.predict_on, with Habitat's own recording time removed, should be the wall time of the
same step run without Habitat. Both are measured here in one process, interleaved (plain,
traced, plain, traced, ...): the lower quartile of the plain steps' wall times against that
of the traced steps' corrected host times (the timeline's host_ms; the trace is replayed as a GPU origin's op times,
so the engine removes Habitat's time exactly as it does for a GPU trace). Each traced step is
the first detailed step of a fresh predict_on whose worker is drained before the next turn.

    PYTHONPATH=python python3 benchmarks/timeline/cpu_replay.py [--turns 7] [--json OUT]

Small batches keep the steps dispatch-bound, like the host-bound GPU steps the correction is for.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))

import torch  # noqa: E402

import habitat  # noqa: E402
from habitat.data import engine  # noqa: E402
from habitat.data.forecast import Forecast  # noqa: E402

REPLAY_AS = "H100-SXM5-80GB"  # any GPU: only the host side of the timeline is read


def workloads() -> dict[str, Callable[[], Callable[[], None]]]:
    """The benchmark models' structures (benchmarks/gpu/models.py) at tiny sizes, plus an MLP:
    the host dispatch, not the arithmetic, dominates each step, as on a host-bound GPU."""
    import models  # benchmarks/gpu/models.py
    from torch import nn
    from torch.nn import functional as F

    from habitat.demo import GPT

    def trainer(model: nn.Module, loss_of: Callable[[], torch.Tensor], clip: bool = False) -> Callable[[], None]:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step() -> None:
            loss_of().backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    def mlp() -> Callable[[], None]:
        net = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(64, 64), nn.ReLU())])
        x = torch.randn(16, 64)
        return trainer(net, lambda: net(x).square().mean())

    def resnet() -> Callable[[], None]:
        net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                            models.Bottleneck(16, 4), models.Bottleneck(16, 8, stride=2), models.Bottleneck(32, 8),
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        x, y = torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))
        return trainer(net, lambda: F.cross_entropy(net(x), y))

    def gpt() -> Callable[[], None]:
        net = GPT(vocab=256, width=32, layers=2, heads=2, context=16, tie_weights=True, gelu="tanh")
        idx, tgt = torch.randint(0, 256, (2, 16)), torch.randint(0, 256, (2, 16))
        return trainer(net, lambda: F.cross_entropy(net(idx).flatten(0, 1), tgt.flatten()))

    def seq2seq() -> Callable[[], None]:
        net = models.Seq2Seq(vocab=100, embed=16, hidden=32, layers=2)
        src, tgt = torch.randint(0, 100, (2, 8)), torch.randint(0, 100, (2, 9))
        return trainer(net, lambda: F.cross_entropy(net(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten()),
                       clip=True)

    return {"mlp_8x64_b16": mlp, "resnet_3blocks_b2": resnet, "gpt_2x32_b2": gpt, "seq2seq_2x32_b2": seq2seq}


def traced_host_ms(step: Callable[[], None]) -> tuple[float, float, dict[str, Any]]:
    """One detailed step under a fresh predict_on: (its traced host span ms, the timeline's
    corrected host ms, the timeline dict)."""
    predictor = habitat.predict_on(REPLAY_AS, detail_steps=1)
    with predictor as forecast:
        step()
    predictor.close()  # drains the worker before the next plain step
    doc = engine.trace_document(dict(forecast.origin, device=REPLAY_AS), [forecast.latest.trace])
    timeline = Forecast.from_trace(doc, [REPLAY_AS]).latest.timeline[REPLAY_AS]
    span_ms = max(op["start_us"] + op["wall_us"] for op in forecast.latest.trace["ops"]) / 1000
    return span_ms, timeline["host_ms"], timeline


def lower_quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[0]


def measure(name: str, make: Callable[[], Callable[[], None]], turns: int) -> dict[str, Any]:
    step = make()
    for _ in range(5):
        step()
    plain, traced_wall, corrected = [], [], []
    timeline: dict[str, Any] = {}
    for _ in range(turns):
        t0 = time.perf_counter()
        step()
        plain.append(1000 * (time.perf_counter() - t0))
        wall, host, timeline = traced_host_ms(step)
        traced_wall.append(wall)
        corrected.append(host)
    # Lower quartiles: on a shared machine other work only ever slows a step down.
    p, c, w = lower_quartile(plain), lower_quartile(corrected), lower_quartile(traced_wall)
    return {"workload": name, "plain_ms": p, "traced_span_ms": w,
            "corrected_host_ms": c, "error_pct": 100 * (c / p - 1),
            "uncorrected_error_pct": 100 * (w / p - 1),
            "plain_median_ms": statistics.median(plain), "corrected_median_ms": statistics.median(corrected),
            "plain_min_ms": min(plain), "corrected_min_ms": min(corrected),
            "min_error_pct": 100 * (min(corrected) / min(plain) - 1),
            "overhead_source": timeline.get("overhead_source"),
            "overhead_per_op_us": timeline.get("overhead_per_op_us"),
            "overhead_removed_ms": timeline.get("overhead_removed_ms"), "turns": turns}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=11)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print(f"load: {os.getloadavg()[0]:.2f} (1-min), torch {torch.__version__}, 1 intra-op thread")
    print("| workload | plain step ms | traced host span ms | corrected host ms | error | "
          "uncorrected error | error of the minima | Habitat's time removed ms (us/op, source) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for name, make in workloads().items():
        r = measure(name, make, args.turns)
        rows.append(r)
        print(f"| {name} | {r['plain_ms']:.2f} | {r['traced_span_ms']:.2f} | {r['corrected_host_ms']:.2f} "
              f"| {r['error_pct']:+.1f}% | {r['uncorrected_error_pct']:+.1f}% | {r['min_error_pct']:+.1f}% "
              f"| {r['overhead_removed_ms']:.2f} ({r['overhead_per_op_us']:.2f}, {r['overhead_source']}) |")
    print(f"load after: {os.getloadavg()[0]:.2f} (1-min)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load": os.getloadavg()[0]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
