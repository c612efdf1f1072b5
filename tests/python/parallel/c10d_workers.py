"""Worker processes for the c10d capture tests (spawned: they must be importable by name)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

WORLD = 4
FEATURES = 256  # two Linear(256, 256) layers: 128 KiB of fp32 gradients each


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, FEATURES), torch.nn.ReLU(),
                               torch.nn.Linear(FEATURES, FEATURES), torch.nn.ReLU(),
                               torch.nn.Linear(FEATURES, 8))


def _ddp_step(with_habitat: bool, rank: int) -> tuple[list[torch.Tensor], list[int], dict | None]:
    """One DDP step; returns the parameters after it, the bucket sizes DDP sent (bytes, from a
    comm hook that then runs DDP's own all-reduce) and, with habitat, the captured trace step."""
    import habitat
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    sent: list[int] = []

    def recording_hook(state, bucket):
        buf = bucket.buffer()
        sent.append(buf.numel() * buf.element_size())
        return default_hooks.allreduce_hook(state, bucket)

    # Small buckets so that the step sends several: DDP's first bucket holds 1 MB by default.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 64 * 1024
    ddp = torch.nn.parallel.DistributedDataParallel(_model(), bucket_cap_mb=0.1)
    ddp.register_comm_hook(None, recording_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    x = torch.randn(16, FEATURES)
    trace = None
    if with_habitat:
        with habitat.predict_on(["A100", "H100"]) as forecast:
            ddp(x).square().mean().backward()
            opt.step()
        trace = forecast.latest.trace
    else:
        ddp(x).square().mean().backward()
        opt.step()
    return [p.detach().clone() for p in ddp.parameters()], sent, trace


def ddp_worker(rank: int, store_dir: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=WORLD)
    try:
        plain, sent_plain, _ = _ddp_step(False, rank)
        watched, sent, trace = _ddp_step(True, rank)
        same = all(torch.equal(a, b) for a, b in zip(plain, watched))
        from habitat.analysis.collectives import captured_collectives
        captured = [c.to_dict() for c in captured_collectives(trace)]
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(
            {"bitwise_equal": same, "sent": sent, "sent_without_habitat": sent_plain,
             "captured": captured}))
    finally:
        dist.destroy_process_group()


def fsdp_worker(rank: int, store_dir: str, out_dir: str) -> None:
    """FSDP2 (fully_shard) on CPU, as far as the gloo backend runs it."""
    dist.init_process_group("gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=WORLD)
    result: dict = {}
    try:
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
            result = {"unsupported": f"{type(exc).__name__}: {exc}"[:400]}
        else:
            result = {"captured": [c.to_dict() for c in captured_collectives(forecast.latest.trace)]}
    finally:
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()


def start(worker, tmp: Path, timeout_s: float = 90.0) -> list[dict]:
    """Runs `worker` on WORLD processes (a FileStore rendezvous: no ports), returns each rank's
    JSON; kills them all and fails after timeout_s."""
    import torch.multiprocessing as mp

    store, out = tmp / "store_dir", tmp / "out"
    store.mkdir()
    out.mkdir()
    ctx = mp.start_processes(worker, args=(str(store), str(out)), nprocs=WORLD, join=False,
                             start_method="spawn")
    import time
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise TimeoutError(f"{worker.__name__} did not finish in {timeout_s:.0f} s")
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


if __name__ == "__main__":  # pragma: no cover
    print(os.getpid())
