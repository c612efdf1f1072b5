"""Steady-state cost of predict_on(..., log_dir=...) on a tiny step (issue 13 / 14).

A 0.3 ms MLP training step on the CPU is the worst case for the sinks: the forecast thread's
Python work (the step history line, TensorBoard's per-step scalars) holds the GIL the training
loop needs. Blocks of plain steps and of steps inside one open predict_on(log_dir) alternate;
after a warm-up of each, the median block time per step is compared.

    PYTHONPATH=python python3 benchmarks/overhead/log_dir_ab.py [--blocks 20] [--steps 1000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

import habitat


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=20, help="blocks per mode (default 20)")
    p.add_argument("--steps", type=int, default=1000, help="steps per block (default 1000)")
    p.add_argument("--targets", type=int, default=3, help="target GPUs (default 3)")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(16, 64)

    def step() -> None:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    targets = [d.name for d in habitat.devices()][: args.targets]
    with tempfile.TemporaryDirectory() as log_dir:
        predictor = habitat.predict_on(targets, log_dir=log_dir)
        per_step = {"plain": [], "log_dir": []}
        for block in range(args.blocks + 2):  # the first two blocks warm up
            for mode in ("plain", "log_dir"):
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    if mode == "plain":
                        step()
                    else:
                        with predictor:
                            step()
                if block >= 2:
                    per_step[mode].append((time.perf_counter() - t0) / args.steps * 1e3)
        counts = dict(predictor.step_counts)
        predictor.close()
    plain, logged = statistics.median(per_step["plain"]), statistics.median(per_step["log_dir"])
    print(f"# {args.blocks} blocks of {args.steps} steps per mode, {len(targets)} targets, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"plain: {plain:.3f} ms/step   log_dir: {logged:.3f} ms/step   "
          f"overhead: {100 * (logged / plain - 1):+.1f}%")
    if counts:
        print(f"step counts: {counts}")


if __name__ == "__main__":
    main()
