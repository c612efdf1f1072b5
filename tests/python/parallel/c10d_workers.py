"""Worker processes for the c10d capture tests (spawned: they must be importable by name)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

WORLD = 4
WORLD_ENV = "HABITAT_TEST_WORLD"
FEATURES = 256  # two Linear(256, 256) layers: 128 KiB of fp32 gradients each


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, FEATURES), torch.nn.ReLU(),
                               torch.nn.Linear(FEATURES, FEATURES), torch.nn.ReLU(),
                               torch.nn.Linear(FEATURES, 8))


def _ddp_steps(with_habitat: bool, rank: int) -> tuple[list[torch.Tensor], list[int], dict | None]:
    """Two DDP steps (DDP rebuilds its buckets in gradient-ready order after the first); returns
    the parameters after them, the bucket sizes DDP sent in the second (bytes, from a comm hook
    that then runs DDP's own all-reduce) and, with habitat, the second step as captured."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    import habitat

    sent: list[int] = []

    def recording_hook(state, bucket):
        buf = bucket.buffer()
        sent.append(buf.numel() * buf.element_size())
        return default_hooks.allreduce_hook(state, bucket)

    ddp = torch.nn.parallel.DistributedDataParallel(_model(), bucket_cap_mb=0.1)  # several buckets
    ddp.register_comm_hook(None, recording_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    batches = [torch.randn(16, FEATURES) for _ in range(2)]
    predictor = habitat.predict_on(["A100", "H100"]) if with_habitat else None
    for x in batches:
        sent.clear()
        if predictor is not None:
            with predictor:
                ddp(x).square().mean().backward()
                opt.step()
                opt.zero_grad()
        else:
            ddp(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
    trace = None
    if predictor is not None:
        predictor.close()
        trace = predictor.forecast.latest.trace
    return [p.detach().clone() for p in ddp.parameters()], list(sent), trace


def _fsdp_step(rank: int) -> dict:
    """FSDP2 (fully_shard) on CPU, as far as the gloo backend runs it."""
    import habitat
    from habitat.analysis.collectives import captured_collectives
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    model = _model()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    x = torch.randn(16, FEATURES)
    try:
        with habitat.predict_on(["A100"]) as forecast:
            model(x).square().mean().backward()
            opt.step()
    except Exception as exc:  # gloo lacks a collective FSDP needs on this torch
        return {"unsupported": f"{type(exc).__name__}: {exc}"[:400]}
    return {"captured": [c.to_dict() for c in captured_collectives(forecast.latest.trace)]}


def worker(rank: int, store_dir: str, out_dir: str) -> None:
    """DDP, then FSDP, in one process group (one spawn: the processes' start-up dominates)."""
    dist.init_process_group("gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=WORLD)
    result: dict = {}
    try:
        from habitat.analysis.collectives import captured_collectives
        plain, sent_plain, _ = _ddp_steps(False, rank)
        watched, sent, trace = _ddp_steps(True, rank)
        result["ddp"] = {"bitwise_equal": all(torch.equal(a, b) for a, b in zip(plain, watched)),
                         "sent": sent, "sent_without_habitat": sent_plain,
                         "captured": [c.to_dict() for c in captured_collectives(trace)]}
        result["fsdp"] = _fsdp_step(rank)
    finally:
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()


def start(worker, tmp: Path, timeout_s: float = 90.0, world: int = WORLD) -> list[dict]:
    """Runs `worker` on `world` processes (a FileStore rendezvous: no ports), returns each rank's
    JSON; kills them all and fails after timeout_s."""
    import torch.multiprocessing as mp

    store, out = tmp / "store_dir", tmp / "out"
    store.mkdir()
    out.mkdir()
    os.environ[WORLD_ENV] = str(world)  # the spawned workers read their world size here
    ctx = mp.start_processes(worker, args=(str(store), str(out)), nprocs=world, join=False,
                             start_method="spawn")
    import time
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise TimeoutError(f"{worker.__name__} did not finish in {timeout_s:.0f} s")
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]

