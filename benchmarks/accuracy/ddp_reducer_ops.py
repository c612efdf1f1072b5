"""The aten ops DDP's reducer adds to a training step, counted from Habitat's own capture: the same
model (6 Linear layers, 12 parameter tensors) stepped with and without DistributedDataParallel on
2 gloo ranks on the CPU. The reducer runs the same ops with NCCL; what they cost on a GPU host
was not measured (issue 16: the parallel step model does not add them to a one-GPU step).

    PYTHONPATH=python python3 benchmarks/accuracy/ddp_reducer_ops.py
"""
from __future__ import annotations

import collections
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

LAYERS = 6


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(LAYERS)])


def _counts(wrap: bool) -> collections.Counter:
    import habitat

    model = _model()
    if wrap:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    predictor = habitat.predict_on(["H100"])
    for _ in range(3):  # DDP rebuilds its buckets after the first step; the last is counted
        with predictor:
            model(torch.randn(8, 64)).square().mean().backward()
            opt.step()
            opt.zero_grad()
    predictor.close()
    ops = predictor.forecast.latest.trace["ops"]
    return collections.Counter((o["name"], o.get("phase") or "-", o.get("depth", 0)) for o in ops)


def _rank(rank: int, world: int, port: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    plain, ddp = _counts(False), _counts(True)
    if rank == 0:
        queue.put((plain, ddp))
    dist.destroy_process_group()


def main() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, 2, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    plain, ddp = queue.get(timeout=600)
    for p in procs:
        p.join()
    params = 2 * LAYERS
    print(f"ops DDP adds per step, {params} parameter tensors, 2 gloo ranks (torch {torch.__version__}):")
    print("| op | phase | depth | without DDP | with DDP | added per parameter |")
    print("|---|---|---:|---:|---:|---:|")
    for key in sorted(set(plain) | set(ddp)):
        if plain[key] != ddp[key]:
            name, phase, depth = key
            added = ddp[key] - plain[key]
            print(f"| {name} | {phase} | {depth} | {plain[key]} | {ddp[key]} | {added / params:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
