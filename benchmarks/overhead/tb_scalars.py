"""Per-step cost of writing a step's TensorBoard scalars for every GPU of the device database:
the old path (SummaryWriter.add_scalar per tag, as TensorBoardLogger.log_step did) against the
new one (one event record encoded and framed in habitat._engine, EventFile.scalars), interleaved
in blocks of BLOCK steps, each block ending with a flush. CPU time is the whole process's
(SummaryWriter encodes and writes on its own thread, which holds the GIL too).

    PYTHONPATH=python python3 benchmarks/overhead/tb_scalars.py [rounds]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
BLOCK = 200


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 10
    from tools_fixtures import capture
    from torch.utils.tensorboard import SummaryWriter

    from habitat.present.tensorboard import EventFile, scalars

    names = [d["name"] for d in json.loads((ROOT / "python/habitat/data/devices.json").read_text())["devices"]]
    forecast = capture(names, steps=3)
    step = forecast.steps[-1]
    tags, values = scalars(step)
    with tempfile.TemporaryDirectory() as tmp:
        old = SummaryWriter(log_dir=os.path.join(tmp, "old"), max_queue=1000, flush_secs=5)
        new = EventFile(os.path.join(tmp, "new"))
        n = 0

        def old_block() -> None:
            nonlocal n
            for _ in range(BLOCK):
                for tag, value in zip(tags, values):
                    old.add_scalar(tag, value, n)
                n += 1
            old.flush()

        def new_block() -> None:
            nonlocal n
            for _ in range(BLOCK):
                new.scalars(n, tags, values)
                n += 1
            new.flush()

        def tags_block() -> None:  # building the tag list from the step (shared by both paths)
            for _ in range(BLOCK):
                scalars(step)

        results: dict[str, tuple[list[float], list[float]]] = {
            "add_scalar (old)": ([], []), "EventFile.scalars (new)": ([], []), "tags+values": ([], [])}
        blocks = [("add_scalar (old)", old_block), ("EventFile.scalars (new)", new_block),
                  ("tags+values", tags_block)]
        for _, fn in blocks:  # warm-up
            fn()
        for r in range(rounds):
            for name, fn in (blocks if r % 2 == 0 else blocks[::-1]):
                wall, cpu = time.perf_counter(), time.process_time()
                fn()
                results[name][0].append((time.perf_counter() - wall) / BLOCK * 1e6)
                results[name][1].append((time.process_time() - cpu) / BLOCK * 1e6)
        old.close()
        new.close()
        sizes = {d: sum(f.stat().st_size for f in Path(tmp, d).iterdir()) for d in ("old", "new")}
    print(f"{len(names)} targets, {len(tags)} scalars a step; {rounds} interleaved rounds of "
          f"{BLOCK} steps; load: {os.getloadavg()[0]:.2f}")
    print(f"{'path':<26}{'wall us/step (median)':>24}{'cpu us/step (median)':>24}")
    for name, (wall, cpu) in results.items():
        print(f"{name:<26}{statistics.median(wall):>24.1f}{statistics.median(cpu):>24.1f}")
    print(f"bytes on disk: old {sizes['old']}, new {sizes['new']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
