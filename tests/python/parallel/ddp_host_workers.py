"""Worker processes for the DDP host-work test (spawned: importable by name): one rank steps the
model alone, then every rank steps it under DDP; rank 0 saves both forecasts' traces."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from c10d_workers import WORLD_ENV

WORLD = 2  # the test's; c10d_workers.start(world=...) sets another
LAYERS = 8
FEATURES = 512  # 16 parameter tensors, 8.4 MB of fp32 gradients: DDP's 1 MiB first bucket, then one more
STEPS = 5       # DDP rebuilds its buckets after the first step; the latest is a steady-state step


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(FEATURES, FEATURES), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def _capture(net: torch.nn.Module, x: torch.Tensor, path: Path | None) -> None:
    import habitat

    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    predictor = habitat.predict_on(["H100", "A100"])
    for _ in range(STEPS):
        with predictor:
            net(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
    predictor.close()
    if path is not None:
        predictor.forecast.save(path)


def worker(rank: int, store_dir: str, out_dir: str) -> None:
    world = int(os.environ.get(WORLD_ENV, WORLD))
    dist.init_process_group("gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=world)
    result: dict = {}
    try:
        torch.manual_seed(100 + rank)
        x = torch.randn(32, FEATURES)
        if rank == 0:
            _capture(model(), x, Path(out_dir, "one_rank.json"))
        _capture(torch.nn.parallel.DistributedDataParallel(model()), x,
                 Path(out_dir, "ddp.json") if rank == 0 else None)
        result["ok"] = True
    finally:
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()
