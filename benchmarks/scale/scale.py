"""The forecast pipeline at scale (issue 14): every target of the issue, measured vs target.

    PYTHONPATH=python python3 benchmarks/scale/scale.py [--quick] [--only PARTS] [--out FILE]

Traces are synthetic: the golden trace's first step (a real capture of a small MLP training
step, tests/python/fixtures/golden_trace.json) repeated with fresh op ids until it has the
wanted number of ops, so shapes repeat as they do in real training steps. Rows:

- engine, captured step: ``_engine.forecast_captured`` of a step held as C++ structs (what
  predict_on hands the engine), the per-op memo cold (a fresh origin each run): forecast,
  totals and per-op rows;
- engine, trace text: ``_engine.forecast_step_parts`` (parse + forecast + totals + rows);
- from_trace: ``Forecast.from_trace(document in memory)`` and the totals read; again for a step
  of real ops: the recorded H100 steps of gpt2_small_bf16, gpt2_small_fp32 and resnet50_bf16
  (benchmarks/results/h100-sxm5-80gb/traces) concatenated into one step of 11,362 ops, ids and
  parents offset by 1e6 per source trace; beside it (interleaved) the same step sent as JSON text
  (json.dumps + the engine's parse: how documents reached the engine before it read dicts);
- repeated step: the same captured step forecast again (memo warm) and appended to a Forecast;
- load: ``Forecast.load`` of a ~25 MB trace file (targets given);
- CLI compare: ``python -m habitat compare TRACE`` of a 200k-op trace in a subprocess (every
  GPU; wall time and the child's peak RSS);
- 1.5M-op step: ``predict_on`` around a step of 1.5M small ops in a subprocess: the time from
  the step's end to its totals, and the memory the step added at its peak;
- long run: 100k steps of a small MLP under ``predict_on(..., log_dir=...)`` in a subprocess:
  RSS growth after warm-up and the TensorBoard event file;
- TensorBoard: event-file bytes per step (scalars every step, detail every ``detail_every``).

Times are the median of several runs; memory is the resident set size (a child's peak is
its VmHWM: ru_maxrss would start at the parent's; all in MiB, printed "MB"). --quick shrinks
the subprocess workloads (the rows then say what was run) and the repeats; --only runs some
parts (engine, load, cli, big, long, tensorboard), e.g. ``--only cli,big``.
"""
from __future__ import annotations

import argparse
import copy
import gzip
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

from habitat import _engine  # noqa: E402
from habitat.data.devices import devices  # noqa: E402
from habitat.data.engine import forecast_trace, trace_document, weights_dir  # noqa: E402
from habitat.data.forecast import Forecast  # noqa: E402
from habitat.data.trace import save_trace  # noqa: E402

GOLDEN = REPO / "tests" / "python" / "fixtures" / "golden_trace.json"
# Recorded H100 steps whose ops make the real-ops row's step (11,362 ops, kernels and args).
REAL_TRACES = [REPO / "benchmarks" / "results" / "h100-sxm5-80gb" / "traces" / f"{name}.json.gz"
               for name in ("gpt2_small_bf16", "gpt2_small_fp32", "resnet50_bf16")]


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


def real_ops_document() -> dict[str, Any]:
    """One step made of the ops of the recorded H100 traces in REAL_TRACES (their last step
    each), in that order: the ids (and parents) of the k-th trace offset by k * 1e6 so they
    stay unique. Real ops carry kernels and many arguments, unlike the synthetic step's."""
    docs = [json.loads(gzip.decompress(path.read_bytes())) for path in REAL_TRACES]
    ops: list[dict[str, Any]] = []
    for k, doc in enumerate(docs):
        offset = k * 1_000_000
        for op in doc["steps"][-1]["ops"]:
            new = dict(op)
            new["id"] = op["id"] + offset
            if op.get("parent") is not None:
                new["parent"] = op["parent"] + offset
            ops.append(new)
    step = {"index": 0, "wall_ms": sum(d["steps"][-1]["wall_ms"] for d in docs), "ops": ops}
    return {**{k: v for k, v in docs[0].items() if k != "steps"}, "steps": [step]}


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
    parser.add_argument("--only", metavar="PARTS",
                        help="run only these parts, comma-separated: " + ", ".join(PARTS))
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else set(PARTS)
    if not only <= set(PARTS):
        parser.error(f"--only: unknown part(s) {', '.join(sorted(only - set(PARTS)))}; "
                     f"choose from {', '.join(PARTS)}")
    repeat = 3 if args.quick else 5
    gpus = [d.name for d in devices()][:20]
    rows: list[tuple[str, str, str, str]] = []

    def row(what: str, value: str, target: str, ok: bool | None) -> None:
        verdict = "-" if ok is None else ("ok" if ok else "MISSED")
        rows.append((what, value, target, verdict))
        print(f"{what:<58} {value:>14} {target:>12} {verdict:>7}", flush=True)

    print(f"{'measure':<58} {'value':>14} {'target':>12} {'':>7}")
    origin, step = synthetic_step(10_000)
    if "engine" in only:
        engine_rows(row, origin, step, gpus, repeat)
    with tempfile.TemporaryDirectory() as tmp:
        if "load" in only:
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
            save_trace(trace_document(origin, steps), big)
            mb = big.stat().st_size / 1e6
            ms = timed(lambda: Forecast.load(big, targets=["A100"]), max(1, repeat // 2))
            row(f"Forecast.load of a {mb:.1f} MB trace ({len(steps)} steps), 1 GPU", f"{ms / 1e3:.2f} s",
                "<= 1 s", ms <= 1000)

        if "cli" in only:
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
                    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
                    "sys.stderr.write(f'@@ {time.perf_counter() - start:.3f} '\n"
                    "                 f'{int(hwm.split()[1]) / 1024:.0f}\\n')\n"
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

        if "big" in only:
            n_big = 150_000 if args.quick else 1_500_000
            big_step = subprocess_json(BIG_STEP, str(n_big))
            if big_step is not None:
                row(f"{n_big / 1e6:g}M-op step: totals read after the step", f"{big_step['totals_s']:.2f} s",
                    "<= 5 s", big_step["totals_s"] <= 5)
                row(f"{n_big / 1e6:g}M-op step: memory added at peak", f"{big_step['peak_added_mb']:.0f} MB",
                    "<= 2048 MB", big_step["peak_added_mb"] <= 2048)
                row("  capture of the step (torch + recording)", f"{big_step['capture_s']:.1f} s", "-", None)
                row("  process peak RSS (torch included)", f"{big_step['peak_mb']:.0f} MB", "-", None)

        if "long" in only:
            n_long = 10_000 if args.quick else 100_000
            long_run = subprocess_json(LONG_RUN, str(n_long), str(Path(tmp) / "long"))
            if long_run is not None:
                row(f"{n_long // 1000}k steps with log_dir: RSS growth after warm-up",
                    f"{long_run['growth_mb']:.1f} MB", "<= 50 MB", long_run["growth_mb"] <= 50)
                counts = long_run["counts"]
                # Every forecast step writes its scalars, coalesced ones too (only their per-op
                # table, forecast.json and on_step are coalesced).
                logged = counts["detailed"] + counts["reused"]
                mb = long_run["event_bytes"] / 1e6
                row(f"{n_long // 1000}k steps with log_dir: TensorBoard event file", f"{mb:.0f} MB", "-", None)
                # Steps the forecast thread could not keep up with are skipped (counted, not
                # logged): the file size per logged step, for 100k logged steps.
                per_100k = long_run["event_bytes"] / max(1, logged) * 100_000 / 1e6
                row("  => 100k logged steps (bytes per logged step x 100k)", f"{per_100k:.0f} MB",
                    "<= 500 MB", per_100k <= 500)
                row("  steps detailed / reused (coalesced) / skipped",
                    f"{counts['detailed']}/{counts['reused']} ({counts.get('coalesced', 0)})/"
                    f"{counts['skipped']}", "-", None)
                row("  run time (model + habitat)", f"{long_run['seconds']:.0f} s", "-", None)
                row("  forecast.json / steps.jsonl", f"{long_run['forecast_json'] / 1e6:.1f} / "
                    f"{long_run['history'] / 1e6:.0f} MB", "-", None)

        if "tensorboard" in only:
            tb = tensorboard_bytes(Path(tmp) / "tb", origin)
            if tb is not None:
                per_step, detail = tb
                row("TensorBoard: bytes per step, 3 GPUs (scalars)", f"{per_step:.0f} B", "-", None)
                row("TensorBoard: bytes of one detail step (table, hist.)", f"{detail / 1e3:.1f} KB", "-", None)
                row("  => 100k steps, detail every 100 steps", f"{(per_step * 1e5 + detail * 1e3) / 1e6:.0f} MB",
                    "<= 500 MB", (per_step * 1e5 + detail * 1e3) <= 500e6)
    row("peak RSS of this benchmark process", f"{peak_rss_mb():.0f} MB", "-", None)
    if args.out:
        Path(args.out).write_text("\n".join(f"{a:<58} {b:>14} {c:>12} {d:>7}" for a, b, c, d in rows) + "\n")
    return 0


def engine_rows(row: Callable[..., None], origin: dict[str, Any], step: dict[str, Any],
                gpus: list[str], repeat: int) -> None:
    """The engine, Python API and repeated-step rows (10k ops x 20 GPUs)."""
    text = json.dumps(trace_document(origin, [step]), separators=(",", ":"))
    wdir = weights_dir()
    g = len(gpus)
    _, parsed = _engine.forecast_trace(text, gpus[:1], wdir)
    capsule = parsed[0][0]
    runs = iter(range(10**6))

    def cold() -> None:  # a fresh origin: a memo of its own, nothing cached
        origin_doc = json.dumps(trace_document({**origin, "host": f"bench-{next(runs)}"}, []))
        _engine.forecast_captured(capsule, origin_doc, gpus, wdir)
    ms = timed(cold, repeat)
    row(f"engine: captured step, 10k ops x {g} GPUs (memo cold)", f"{ms:.1f} ms", "<= 50 ms", ms <= 50)
    ms = timed(lambda: _engine.forecast_step_parts(text, gpus, wdir), repeat)
    row(f"engine: 10k-op trace text x {g} GPUs (parse+forecast)", f"{ms:.1f} ms", "<= 50 ms", ms <= 50)
    parse = timed(lambda: _engine.validate_trace_json(text), repeat)
    row("  parse + re-encode the trace alone (validate_trace_json)", f"{parse:.1f} ms", "-", None)
    memo_off = memo_off_ms(text, gpus, wdir, repeat)
    if memo_off is not None:
        row("  trace text with the per-op memo off (HABITAT_OP_MEMO=0)", f"{memo_off:.1f} ms", "-", None)
    full = timed(lambda: _engine.forecast_step(text, gpus, 0, wdir), repeat)
    row("  the whole forecast as JSON, per op too (forecast_step)", f"{full:.1f} ms", "-", None)

    doc = trace_document(origin, [step])
    def from_trace() -> None:
        f = Forecast.from_trace(doc, gpus)
        _ = [f.time_ms(g) for g in gpus]
    ms = timed(from_trace, repeat)
    row(f"Python API: from_trace 10k ops x {len(gpus)} GPUs, totals", f"{ms:.1f} ms", "<= 150 ms", ms <= 150)
    real = real_ops_document()
    n_real = len(real["steps"][0]["ops"])

    def from_trace_real() -> None:
        f = Forecast.from_trace(real, gpus)
        _ = [f.time_ms(g) for g in gpus]
    def from_text_real() -> None:  # the route before the engine read dicts: JSON text between
        text = json.dumps(real, allow_nan=False, separators=(",", ":"))
        _, steps = forecast_trace(text, gpus)
        _ = [s[3]["totals"] for s in steps]
    # Interleaved, so that both see the same machine load.
    dict_ms: list[float] = []
    text_ms: list[float] = []
    for _ in range(max(repeat, 7)):
        dict_ms.append(timed(from_trace_real, 1))
        text_ms.append(timed(from_text_real, 1))
    ms = statistics.median(dict_ms)
    row(f"Python API: from_trace {n_real / 1000:.1f}k real ops x {len(gpus)} GPUs, totals",
        f"{ms:.1f} ms", "<= 150 ms", ms <= 150)
    row("  the same step as JSON text (json.dumps, engine parse)", f"{statistics.median(text_ms):.1f} ms",
        "-", None)

    from habitat.data.engine import forecast_captured
    forecast = Forecast(gpus, origin)
    forecast_captured(capsule, origin, gpus)  # the memo of this origin now knows the step

    def repeated() -> None:
        summary, op_rows = forecast_captured(capsule, origin, gpus)
        forecast._add_forecast(0, 1.0, summary, lambda: (None, op_rows), op_rows)
        forecast.time_ms(gpus[0])
    ms = timed(repeated, repeat)
    row(f"repeated step: captured 10k ops x {g} GPUs, totals", f"{ms:.1f} ms", "<= 5 ms", ms <= 5)
    summary, op_rows = forecast_captured(capsule, origin, gpus)

    def reused() -> None:  # what predict_on's worker does for a step whose fingerprint it knows
        forecast._add_forecast(0, 1.0, summary, lambda: (None, op_rows), op_rows)
        forecast.time_ms(gpus[0])
    ms = timed(reused, max(repeat, 100))
    row("  in predict_on: fingerprint known, forecast reused", f"{ms:.3f} ms", "<= 5 ms", ms <= 5)
    forecast.add_step(step)
    ms = timed(lambda: forecast.add_step(step), repeat)
    row("  the same step as a trace dict again (add_step)", f"{ms:.1f} ms", "-", None)


PARTS = ("engine", "load", "cli", "big", "long", "tensorboard")

BIG_STEP = """
import json, resource, sys, time
import torch
import habitat
torch.set_num_threads(1)

def rss_mb():  # MiB, as VmHWM below (the base was once in MB: the row read 11 MB low)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

n = int(sys.argv[1])
x = torch.ones(4)
predictor = habitat.predict_on(["A100", "H100", "L4"], max_ops_per_step=n + 1000)
base = rss_mb()
start = time.perf_counter()
with predictor as forecast:
    for _ in range(n):
        x.add_(1)
end = time.perf_counter()
totals = [forecast.time_ms(t) for t in forecast.targets]
done = time.perf_counter()
# VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's (kept across exec)
peak = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) / 1024
assert len(forecast.latest.op_table) >= n
print(json.dumps({"capture_s": end - start, "totals_s": done - end, "peak_mb": peak,
                  "peak_added_mb": peak - base}))
"""

LONG_RUN = """
import json, sys, time
from pathlib import Path
import torch
import habitat
torch.set_num_threads(1)

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6

n, log_dir = int(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(8, 16)
predictor = habitat.predict_on(["A100", "H100", "L4"], log_dir=log_dir)
start = time.perf_counter()
warm = None
for i in range(n):
    with predictor:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    if i == min(2000, n // 10):
        predictor.wait()
        warm = rss_mb()
predictor.close()
end = rss_mb()
print(json.dumps({"growth_mb": end - warm, "seconds": time.perf_counter() - start,
                  "event_bytes": sum(p.stat().st_size for p in log_dir.rglob("events.out.tfevents.*")),
                  "forecast_json": (log_dir / "forecast.json").stat().st_size,
                  "history": (log_dir / "steps.jsonl").stat().st_size,
                  "counts": predictor.step_counts}))
"""


def subprocess_json(code: str, *argv: str) -> dict[str, Any] | None:
    """Runs `code` in a fresh Python (its own peak memory) and returns its JSON line."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    out = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def memo_off_ms(text: str, gpus: list[str], wdir: str, repeat: int) -> float | None:
    """forecast_step_parts in a child process with the memo off (the switch is read once)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(text)
    code = ("import json, statistics, sys, time\n"
            "from habitat import _engine\n"
            "text = open(sys.argv[1]).read(); gpus = json.loads(sys.argv[2])\n"
            "ts = []\n"
            f"for _ in range({repeat}):\n"
            "    t = time.perf_counter(); _engine.forecast_step_parts(text, gpus, sys.argv[3])\n"
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
