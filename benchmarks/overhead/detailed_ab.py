"""Detailed steps against torch.profiler, per op: what a fully recorded step costs on CPU.

    PYTHONPATH=python python benchmarks/overhead/detailed_ab.py [--turns N] [--models a,b]

Issue 13's target "detailed steps <= torch.profiler's overhead". For each model, one process
times, in shuffled turns (each mode one untimed step, then one timed), three modes on the
training thread:

  plain     the capture key off the thread (torch as if Habitat were absent)
  profiler  torch.profiler.profile(activities=[CPU]) around the step
  capture   record_step(): every op recorded in detail (module paths, phases, arguments,
            outputs), the step kept in C++ (the "capture only" column of the GPU table)

and prints the median over turns of each mode's step time (wall and thread CPU time) and
the time added per recorded op ((mode - plain) / ops), with capture / profiler as a ratio.
Models: the launch-bound proxies of proxy.py (tiny tensors) and benchmarks/gpu/models.py's
resnet50 and dcgan slimmed for a CPU (1/16 of the width, batch 2; resnet50 at 32x32 input),
whose module structure and op mix are those of the GPU table's rows.
"""
from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, ContextManager

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "overhead"))

from proxy import proxy_mlp, proxy_transformer  # noqa: E402

from habitat import _C  # noqa: E402
from habitat.capture.predict import record_step  # noqa: E402

# benchmarks/gpu/models.py, loaded under its own name (tests/python/models.py is "models").
_spec = importlib.util.spec_from_file_location("gpu_models", ROOT / "benchmarks" / "gpu" / "models.py")
assert _spec is not None and _spec.loader is not None
gpu_models = importlib.util.module_from_spec(_spec)
sys.modules["gpu_models"] = gpu_models
_spec.loader.exec_module(gpu_models)


class _SlimResNet50(torch.nn.Module):
    """benchmarks/gpu/models.py's ResNet50 (its Bottleneck blocks 3-4-6-3, stem, pooling,
    head) at 1/16 of the width: the same modules and ops, tensors small enough that the host
    is the step, as on the GPU."""

    def __init__(self, width: int = 4, classes: int = 10) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        layers, inplanes = [], width
        for planes, blocks, stride in ((width, 3, 1), (2 * width, 4, 2), (4 * width, 6, 2),
                                       (8 * width, 3, 2)):
            for i in range(blocks):
                layers.append(gpu_models.Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * gpu_models.Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet50_slim() -> Callable[[], None]:
    torch.manual_seed(0)
    model = _SlimResNet50().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(2, 3, 32, 32).to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (2,))

    def step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def dcgan_slim() -> Callable[[], None]:
    """benchmarks/gpu/models.py's DCGAN step (discriminator then generator, Adam) with its
    networks at width 4 instead of 64, batch 2."""
    torch.manual_seed(0)
    nz = 16
    gen, disc = gpu_models._generator(nz, 4), gpu_models._discriminator(4)
    gen.apply(gpu_models._init_dcgan)
    disc.apply(gpu_models._init_dcgan)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.rand(2, 3, 64, 64) * 2 - 1
    noise = torch.randn(2, nz, 1, 1)
    ones, zeros = torch.ones(2), torch.zeros(2)

    def step() -> None:
        fake = gen(noise)
        d_loss = (F.binary_cross_entropy_with_logits(disc(real).flatten(), ones)
                  + F.binary_cross_entropy_with_logits(disc(fake.detach()).flatten(), zeros))
        d_loss.backward()
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)
        g_loss = F.binary_cross_entropy_with_logits(disc(fake).flatten(), ones)
        g_loss.backward()
        opt_g.step()
        opt_g.zero_grad(set_to_none=True)
    return step


MODELS: dict[str, Callable[[], Callable[[], None]]] = {
    "proxy transformer": proxy_transformer,
    "proxy mlp": proxy_mlp,
    "resnet50 slim": resnet50_slim,
    "dcgan slim": dcgan_slim,
}


def _profiler() -> ContextManager[Any]:
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])


class _Plain:
    def __enter__(self) -> None:
        if _C._capture_key_included():
            _C._capture_release_thread()

    def __exit__(self, *exc: Any) -> None:
        pass


MODES: dict[str, Callable[[], ContextManager[Any]]] = {
    "plain": _Plain,
    "profiler": _profiler,
    "capture": record_step,
}


def measure(name: str, turns: int) -> dict[str, Any]:
    step = MODELS[name]()
    for _ in range(3):
        step()
    with record_step() as rec:
        step()
    ops = len(rec.step["ops"]) if rec.step else 0
    wall: dict[str, list[float]] = {m: [] for m in MODES}
    cpu: dict[str, list[float]] = {m: [] for m in MODES}
    order = list(MODES)
    rng = random.Random(0)
    for _ in range(turns):
        rng.shuffle(order)
        for mode in order:
            wrap = MODES[mode]
            with wrap():
                step()
            if _C._capture_key_included():
                _C._capture_release_thread()
            w0, c0 = time.perf_counter(), time.thread_time()
            with wrap():
                step()
            c1, w1 = time.thread_time(), time.perf_counter()
            wall[mode].append((w1 - w0) * 1e3)
            cpu[mode].append((c1 - c0) * 1e3)
            if _C._capture_key_included():
                _C._capture_release_thread()
    return {"model": name, "ops": ops,
            "wall": {m: statistics.median(v) for m, v in wall.items()},
            "cpu": {m: statistics.median(v) for m, v in cpu.items()}}


def rows(result: dict[str, Any]) -> list[str]:
    out = []
    ops = result["ops"]
    for clock in ("wall", "cpu"):
        t = result[clock]
        plain = t["plain"]
        per_op = {m: (t[m] - plain) / ops * 1e3 for m in ("profiler", "capture")}
        pct = {m: (t[m] / plain - 1) * 100 for m in ("profiler", "capture")}
        out.append(f"| {result['model']} ({clock}) | {ops} | {plain:.2f} | {pct['profiler']:+.0f}% | "
                   f"{pct['capture']:+.0f}% | {per_op['profiler']:.2f} | {per_op['capture']:.2f} | "
                   f"{per_op['capture'] / per_op['profiler']:.2f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); median of {args.turns} "
          f"shuffled turns per mode; us/op = (mode - plain) / recorded ops")
    print("| model | ops/step | plain ms | torch.profiler | capture (detailed) | profiler us/op | "
          "capture us/op | capture / profiler |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for line in rows(measure(name.strip(), args.turns)):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
