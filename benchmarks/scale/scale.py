"""The forecast pipeline at scale (issue 14): times and peak memory against the issue's targets.

    PYTHONPATH=python python3 benchmarks/scale/scale.py [--quick] [--out FILE]

Traces are synthetic: the golden trace's first step (a real capture of a small MLP training
step, tests/python/fixtures/golden_trace.json) repeated with fresh op ids until it has the
wanted number of ops, so shapes repeat as they do in real training steps. Rows:

- engine: one ``_engine.forecast_step`` call on the trace text (C++ parse + forecast + encode);
- from_trace: ``Forecast.from_trace(document in memory)`` and the totals read;
- repeated step: ``forecast.add_step(step)`` again for a step seen before;
- load: ``Forecast.load`` of a ~25 MB trace file (targets given);
- CLI compare: ``python -m habitat compare TRACE`` of a 200k-op trace in a subprocess (every
  GPU; wall time and the child's peak RSS);
- TensorBoard: event-file bytes per step with ``log_dir`` (scalars every step, detail every
  ``detail_every`` steps).

Times are the median of several runs; memory is the peak resident set size.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from habitat import _engine  # noqa: E402
from habitat.data.devices import devices  # noqa: E402
from habitat.data.engine import trace_document, weights_dir  # noqa: E402
from habitat.data.forecast import Forecast  # noqa: E402

GOLDEN = REPO / "tests" / "python" / "fixtures" / "golden_trace.json"


def synthetic_step(n_ops: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(origin, a step of `n_ops` ops): the golden step's ops repeated with fresh ids."""
    doc = json.loads(GOLDEN.read_text())
    base = doc["steps"][0]
    ops: list[dict[str, Any]] = []
    offset = 0
    block = base["ops"]
    top = max(op["id"] for op in block) + 1
    while len(ops) < n_ops:
        for op in block:
            if len(ops) >= n_ops:
                break
            new = copy.deepcopy(op)
            new["id"] = op["id"] + offset
            if new.get("parent") is not None:
                new["parent"] = op["parent"] + offset
            ops.append(new)
        offset += top
    ids = {op["id"] for op in ops}
    for op in ops:  # a block cut short may leave children whose parent is missing
        if op.get("parent") is not None and op["parent"] not in ids:
            op.pop("parent")
            op["depth"] = 0
    step = {k: v for k, v in base.items() if k != "ops"}
    step["ops"] = ops
    return doc["origin"], step


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall time of `fn` in ms."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller CLI trace, fewer repeats")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    repeat = 3 if args.quick else 5
    gpus = [d.name for d in devices()][:20]
    rows: list[tuple[str, str, str, str]] = []

    def row(what: str, value: str, target: str, ok: bool | None) -> None:
        verdict = "-" if ok is None else ("ok" if ok else "MISSED")
        rows.append((what, value, target, verdict))
        print(f"{what:<52} {value:>14} {target:>12} {verdict:>7}", flush=True)

    print(f"{'measure':<52} {'value':>14} {'target':>12} {'':>7}")
    origin, step = synthetic_step(10_000)
    text = json.dumps(trace_document(origin, [step]), separators=(",", ":"))
    wdir = weights_dir()
    ms = timed(lambda: _engine.forecast_step(text, gpus, 0, wdir), repeat)
    row(f"engine: 10k ops x {len(gpus)} GPUs (parse+forecast+encode)", f"{ms:.1f} ms", "<= 50 ms", ms <= 50)
    parse = timed(lambda: _engine.validate_trace_json(text), repeat)
    row("  of which parsing + re-encoding the trace (no forecast)", f"{parse:.1f} ms", "-", None)
    parts = timed(lambda: _engine.forecast_step_parts(text, gpus, wdir), repeat)
    row("  engine, totals and ops apart (forecast_step_parts)", f"{parts:.1f} ms", "-", None)
    memo_off = memo_off_ms(text, gpus, wdir, repeat)
    if memo_off is not None:
        row("  the same with the per-op memo off (HABITAT_OP_MEMO=0)", f"{memo_off:.1f} ms", "-", None)

    doc = trace_document(origin, [step])
    def from_trace() -> None:
        f = Forecast.from_trace(doc, gpus)
        _ = [f.time_ms(g) for g in gpus]
    ms = timed(from_trace, repeat)
    row(f"Python API: from_trace 10k ops x {len(gpus)} GPUs, totals", f"{ms:.1f} ms", "<= 150 ms", ms <= 150)

    forecast = Forecast(gpus, origin)
    forecast.add_step(step)
    ms = timed(lambda: forecast.add_step(step), repeat)
    row(f"repeated step: add_step again, 10k ops x {len(gpus)} GPUs", f"{ms:.1f} ms", "<= 5 ms", ms <= 5)

    with tempfile.TemporaryDirectory() as tmp:
        # ~25 MB: 10k-op steps until the file is that large
        big = Path(tmp) / "trace25.json"
        steps = []
        size = 0
        while size < 25e6:
            s = copy.deepcopy(step)
            s["index"] = len(steps)
            steps.append(s)
            size = len(json.dumps(trace_document(origin, steps)))
        Forecast(["A100"], origin)  # warm
        from habitat.data.trace import save_trace

        save_trace(trace_document(origin, steps), big)
        mb = big.stat().st_size / 1e6
        ms = timed(lambda: Forecast.load(big, targets=["A100"]), max(1, repeat // 2))
        row(f"Forecast.load of a {mb:.1f} MB trace ({len(steps)} steps), 1 GPU", f"{ms / 1e3:.2f} s",
            "<= 1 s", ms <= 1000)

        n_cli = 50_000 if args.quick else 200_000
        _, cli_step = synthetic_step(n_cli)
        cli_trace = Path(tmp) / "trace200k.json"
        save_trace(trace_document(origin, [cli_step]), cli_trace)
        del cli_step
        env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
        code = ("import resource, sys, time\n"
                "from habitat.cli import main\n"
                "start = time.perf_counter()\n"
                "rc = main(['compare', sys.argv[1]])\n"
                "sys.stderr.write(f'@@ {time.perf_counter() - start:.3f} '\n"
                "                 f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}\\n')\n"
                "sys.exit(rc)\n")
        out = subprocess.run([sys.executable, "-c", code, str(cli_trace)], env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-2000:], file=sys.stderr)
            return 1
        secs, rss = (float(x) for x in out.stderr.rsplit("@@", 1)[1].split())
        row(f"CLI compare of a {n_cli // 1000}k-op trace ({len(devices())} GPUs): time",
            f"{secs:.1f} s", "<= 10 s", secs <= 10)
        row(f"CLI compare of a {n_cli // 1000}k-op trace: peak RSS", f"{rss:.0f} MB", "<= 1024 MB",
            rss <= 1024)

        tb = tensorboard_bytes(Path(tmp) / "tb", origin)
        if tb is not None:
            per_step, detail = tb
            row("TensorBoard: bytes per step, 3 GPUs (scalars)", f"{per_step:.0f} B", "-", None)
            row("TensorBoard: bytes of one detail step (table, hist.)", f"{detail / 1e3:.1f} KB", "-", None)
            row("  => 100k steps, detail every 100 steps", f"{(per_step * 1e5 + detail * 1e3) / 1e6:.0f} MB",
                "<= 500 MB", (per_step * 1e5 + detail * 1e3) <= 500e6)
    row("peak RSS of this benchmark process", f"{peak_rss_mb():.0f} MB", "-", None)
    if args.out:
        Path(args.out).write_text("\n".join(f"{a:<52} {b:>14} {c:>12} {d:>7}" for a, b, c, d in rows) + "\n")
    return 0


def memo_off_ms(text: str, gpus: list[str], wdir: str, repeat: int) -> float | None:
    """forecast_step in a child process with the memo off (the switch is read once)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(text)
    code = ("import json, statistics, sys, time\n"
            "from habitat import _engine\n"
            "text = open(sys.argv[1]).read(); gpus = json.loads(sys.argv[2])\n"
            "ts = []\n"
            f"for _ in range({repeat}):\n"
            "    t = time.perf_counter(); _engine.forecast_step(text, gpus, 0, sys.argv[3])\n"
            "    ts.append((time.perf_counter() - t) * 1e3)\n"
            "print(statistics.median(ts))\n")
    env = {**os.environ, "HABITAT_OP_MEMO": "0", "PYTHONPATH": str(REPO / "python")}
    out = subprocess.run([sys.executable, "-c", code, f.name, json.dumps(gpus), wdir],
                         capture_output=True, text=True, env=env)
    os.unlink(f.name)
    return float(out.stdout.strip()) if out.returncode == 0 else None


def tensorboard_bytes(log_dir: Path, origin: dict[str, Any]) -> tuple[float, float] | None:
    """(bytes per scalar-only step, bytes of a detail step) of the golden step, 3 GPUs."""
    try:
        from habitat.present.tensorboard import TensorBoardLogger
        TensorBoardLogger(log_dir / "probe").close()
    except ImportError:
        return None
    doc = json.loads(GOLDEN.read_text())
    forecast = Forecast(["A100", "H100", "L4"], origin)
    fc = forecast.add_step(doc["steps"][0])

    def size() -> int:
        return sum(p.stat().st_size for p in (log_dir / "run").glob("events.out.tfevents.*"))

    logger = TensorBoardLogger(log_dir / "run", detail_every=1000)
    logger.log_step(forecast, fc)  # step 0: detail
    first = size()
    for i in range(1, 201):
        fc.index = i
        logger.log_step(forecast, fc)
    logger.close()
    per_step = (size() - first) / 200
    return per_step, first - per_step


if __name__ == "__main__":
    sys.exit(main())
