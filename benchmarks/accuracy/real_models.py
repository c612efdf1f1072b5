"""Real-model accuracy: training steps traced on the CPU, forecast shape-based for H100 and
H200, against the kernel sums those GPUs measured.

    python benchmarks/accuracy/real_models.py trace [--cache DIR] [--models a,b,...] [--batches 2,3,4 | --full]
    python benchmarks/accuracy/real_models.py scale-check [--models a,b,...] [--batches 2,3,4] [--batch 8] [--smoke]
    python benchmarks/accuracy/real_models.py compare [--cache DIR] [--measured DIR ...] [--only NAME]
                                                      [--by-class] [--by-op] [--json OUT]

`trace` builds workloads of workloads.py on the CPU (fp32, and bf16 under
torch.autocast("cpu", dtype=torch.bfloat16), as the GPU runs use CUDA autocast), brings each
to steady state (optimiser state exists, as in a GPU trace of a later step) and records the
next step with habitat's capture into DIR/<model>_<precision>.json.gz (default
benchmarks/results/cpu-traces/, where the committed traces are). The trace is the workload's
real step, shapes and batch size included, but the step is run at batch sizes 2, 3 and 4 and
the trace at the workload's batch extrapolated from those (batch_scale.py: every number that
changes with the batch is affine in it; a step at batch 128 takes minutes on two shared
cores); `--full` traces at the batch itself. `scale-check` compares the two ways at a batch
both can run. The default is the networks built from configs; the four of
benchmarks/gpu/models.py were traced at their batch before (about half an hour on two cores)
and are traced again with `--models resnet50,...`.

`compare` forecasts every CPU trace of DIR for H100-SXM5-80GB and H200-SXM-141GB, with
whatever weights are installed, and puts the forecast kernel sum beside each GPU measurement of
the same workload and precision (measured.py: the summaries of `--measured` folders, by
default the committed runs of benchmarks/results/ and benchmarks/results/real-models-gpu/),
apart from the host-bound part of the step (measured step minus its kernel sum: launch gaps
and CPU work the GPU waited for, which a kernel forecast does not contain). A workload no GPU
has measured yet gets its forecast, "not measured", and its forecast per op class.
`--by-class` splits each measured row by op class (op_classes.py, the same classes on both
sides) and ranks the classes by their share of the error: where the next gap is; for
workloads two GPUs measured on the same day it also sets each class's measured speed-up from
one GPU to the other beside the forecast's. `--by-op`
lists each top-level call's measured kernels beside its forecast. Nothing is fitted here.
"""
from __future__ import annotations

import argparse
import gc
import gzip
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batch_scale  # noqa: E402  (benchmarks/accuracy/)
import measured  # noqa: E402
import op_classes  # noqa: E402
import report  # noqa: E402
from workloads import FROM_CONFIGS, GPU_BENCHMARK, PRECISIONS, steady  # noqa: E402
from workloads import load as load_workloads  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
GPUS = ("H100-SXM5-80GB", "H200-SXM-141GB")  # every trace is forecast for these
DEFAULT_CACHE = RESULTS / "cpu-traces"  # committed: traced on the 2-core CPU machine
load_json = measured.load_json


def default_measured() -> list[Path]:
    """The committed GPU runs: the four models.py workloads on an H100 and an H200, and what
    benchmarks/gpu/real_model_kernels.py measured (benchmarks/results/real-models-gpu/<gpu>/)."""
    runs = [RESULTS / "h100-sxm5-80gb", RESULTS / "h200-sxm-141gb"]
    return runs + sorted(p.parent for p in (RESULTS / "real-models-gpu").glob("*/summary.json"))


# ----- tracing on the CPU ----------------------------------------------------------------------

def trace_document(work: Any, precision: str, batch: int, smoke: bool = False) -> dict[str, Any]:
    """One steady-state training step of `work` at `batch` (its other sizes: the real ones, or
    the smoke ones), captured on the CPU."""
    import torch

    from habitat.capture.environment import trace_origin
    from habitat.capture.record import record_step
    from habitat.data import engine

    torch.manual_seed(0)
    step = work.step(torch.device("cpu"), smoke=smoke, batch=batch)
    autocast = precision == "bf16"
    steady(step, autocast)
    with record_step(0) as rec:
        step(autocast)
    doc = engine.trace_document(trace_origin("cpu"), [rec.step])
    del step, rec
    gc.collect()
    return doc


def trace_all(cache: Path, names: list[str], small_batches: list[int] | None) -> None:
    """Each workload's step in fp32 and bf16 into cache/<name>_<precision>.json.gz, at the
    workload's batch size: extrapolated from traces at `small_batches` (batch_scale.py) when
    given and smaller, else traced at that batch."""
    workloads = load_workloads("cpu")
    unknown = [n for n in names if n not in workloads]
    if unknown:
        raise SystemExit(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(workloads)}")
    cache.mkdir(parents=True, exist_ok=True)
    for name in names:
        work = workloads[name]
        for precision in PRECISIONS:
            out = cache / f"{name}_{precision}.json.gz"
            t0 = time.perf_counter()
            if small_batches and work.batch > max(small_batches):
                doc = batch_scale.extrapolate({b: trace_document(work, precision, b) for b in small_batches},
                                              work.batch)
                how = f"batch {work.batch} from batches {', '.join(map(str, small_batches))}"
            else:
                doc = trace_document(work, precision, work.batch)
                how = f"batch {work.batch}"
            with gzip.open(out, "wt", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"))
            print(f"{out.name}: {len(doc['steps'][0]['ops'])} ops, {how}, {time.perf_counter() - t0:.0f} s",
                  flush=True)


def scale_check(names: list[str], small_batches: list[int], batch: int, smoke: bool) -> int:
    """Each workload traced at `batch` against its extrapolation from `small_batches`: the
    fields that differ and the two H100 forecasts (batch_scale.py's claim, checked)."""
    from habitat.data import engine

    workloads = load_workloads("cpu")
    print("| workload | precision | batch | extrapolated from | ops | differing fields | H100 forecast traced ms "
          "| extrapolated ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for precision in PRECISIONS:
            docs = {b: trace_document(workloads[name], precision, b, smoke) for b in small_batches}
            traced = trace_document(workloads[name], precision, batch, smoke)
            scaled = batch_scale.extrapolate(docs, batch)
            diff = batch_scale.differences(scaled, traced)
            ms = [engine.forecast_step(d["origin"], d["steps"][0], [GPUS[0]])["totals"][0]["total_ms"]
                  for d in (traced, scaled)]
            fields = "; ".join(f"{w.split('.', 3)[-1]}: {a} vs {b}" for w, a, b in diff[:3])
            print(f"| {name} | {precision} | {batch} | {','.join(map(str, small_batches))} "
                  f"| {len(traced['steps'][0]['ops'])} | {len(diff)}{': ' + fields if diff else ''} "
                  f"| {ms[0]:.4f} | {ms[1]:.4f} |", flush=True)
    return 0


# ----- comparison ------------------------------------------------------------------------------

def classify(origin: dict[str, Any], step: dict[str, Any], targets: list[str],
             learned: bool = True) -> dict[str, Any]:
    """The engine's forecast; learned=False turns the learned models off (roofline alone), to
    tell the op-list mechanisms from the learned models' own error."""
    import os

    from habitat.data import engine

    saved = os.environ.get("HABITAT_WEIGHTS")
    if not learned:
        os.environ["HABITAT_WEIGHTS"] = ""
    try:
        return engine.forecast_step(origin, step, targets)
    finally:
        if saved is None:
            os.environ.pop("HABITAT_WEIGHTS", None)
        else:
            os.environ["HABITAT_WEIGHTS"] = saved


def by_root_op(cpu_step: dict[str, Any], forecast: dict[str, Any], t: int,
               gpu_step: dict[str, Any]) -> dict[tuple[str, str], tuple[float, float]]:
    """(phase, top-level op) -> (measured kernel us on the GPU, forecast us from the CPU trace).
    The two sides name some calls differently (the CPU's per-tensor optimizer ops and oneDNN
    RNN layers, CUDA's foreach and cuDNN ops), so read them side by side."""
    out: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    key = op_classes.root_key(gpu_step["ops"])
    for op in gpu_step["ops"]:
        out[key(op)][0] += op_classes.kernel_us(op)
    share = op_classes.forecast_us(forecast, t)
    key = op_classes.root_key(cpu_step["ops"])
    for op in cpu_step["ops"]:
        out[key(op)][1] += share.get(op["id"], 0.0)
    return {k: (v[0], v[1]) for k, v in out.items()}


def _trace_names(cache: Path, only: str | None) -> list[str]:
    """The workloads with a CPU trace in cache, workloads.py's order first, then any other."""
    found = {p.name.removesuffix(".json.gz").rsplit("_", 1)[0] for p in cache.glob("*_*.json.gz")}
    known = [n for n in GPU_BENCHMARK + FROM_CONFIGS if n in found]
    names = known + sorted(found - set(known))
    return [n for n in names if not only or n == only]


def compare_rows(cache: Path, runs: list[measured.Measurement], only: str | None = None,
                 by_op: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per CPU trace and GPU measurement of the same workload and precision, one entry
    per CPU trace no GPU measured)."""
    rows, unmeasured = [], []
    for model in _trace_names(cache, only):
        for precision in PRECISIONS:
            path = cache / f"{model}_{precision}.json.gz"
            if not path.exists():
                continue
            doc = load_json(path)
            step = doc["steps"][0]
            mine = [m for m in runs if m.model == model and m.precision == precision]
            targets = list(GPUS) + sorted({m.gpu for m in mine} - set(GPUS))
            forecast = classify(doc["origin"], step, targets)
            roofline = classify(doc["origin"], step, targets, learned=False)
            classes = op_classes.classify_step(step["ops"], op_classes.engine_classes(forecast))
            by_class = [op_classes.sum_by_class(classes, op_classes.forecast_us(forecast, t))
                        for t in range(len(targets))]
            if not mine:
                unmeasured.append({"model": model, "precision": precision,
                                   "forecast_kernel_ms": {g: forecast["totals"][t]["total_ms"]
                                                          for t, g in enumerate(targets)},
                                   "forecast_by_class_ms": dict(zip(targets, by_class))})
            for m in mine:
                t = targets.index(m.gpu)
                forecast_ms, roofline_ms = forecast["totals"][t]["total_ms"], roofline["totals"][t]["total_ms"]
                row = {"model": model, "precision": precision, "gpu": m.gpu, "run": m.run,
                       "measured_step_ms": m.step_ms, "measured_kernel_ms": m.device_ms,
                       "host_bound_ms": max(0.0, m.step_ms - m.device_ms),
                       "forecast_kernel_ms": forecast_ms,
                       "kernel_error_pct": 100 * (forecast_ms / m.device_ms - 1),
                       "roofline_kernel_ms": roofline_ms,
                       "roofline_error_pct": 100 * (roofline_ms / m.device_ms - 1),
                       "forecast_by_class_ms": by_class[t], "measurement": m}
                if by_op and m.trace is not None:
                    row["by_op_us"] = by_root_op(step, forecast, t, m.gpu_step()[1])
                rows.append(row)
    return rows, unmeasured


def compare(cache: Path, by_class: bool, json_out: Path | None, only: str | None = None,
            by_op: bool = False, measured_dirs: list[Path] | None = None) -> int:
    runs = measured.read_all(measured_dirs if measured_dirs is not None else default_measured())
    rows, unmeasured = compare_rows(cache, runs, only, by_op)
    if not rows and not unmeasured:
        print(f"no CPU traces in {cache} (run `trace` first)", file=sys.stderr)
        return 1
    if by_class:
        for r in rows:
            r["gpu_by_class_ms"] = r["measurement"].by_class_ms
    report.print_rows(rows)
    report.print_unmeasured(unmeasured, GPUS[0])
    if by_class:
        report.print_class_breakdowns(rows)
        report.print_class_summary(rows)
        report.print_matrix_vs_rest(rows)
        report.print_gpu_ratios(rows)
    if by_op:
        report.print_by_op(rows)
    if json_out:
        doc = {"measured": [{k: v for k, v in r.items() if k != "measurement"} for r in rows],
               "not_measured": unmeasured}
        for r in doc["measured"]:
            if "by_op_us" in r:
                r["by_op_us"] = {f"{ph} {name}": v for (ph, name), v in r["by_op_us"].items()}
        json_out.write_text(json.dumps(doc, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    t.add_argument("--models", default=",".join(FROM_CONFIGS),
                   help="comma-separated workload names (default: the networks built from configs)")
    t.add_argument("--batches", default="2,3,4",
                   help="small batch sizes the step is traced at, extrapolated to its batch (batch_scale.py)")
    t.add_argument("--full", action="store_true", help="trace at the workload's batch size itself (slow)")
    s = sub.add_parser("scale-check", help="extrapolated traces against traces at the batch itself")
    s.add_argument("--models", default=",".join(FROM_CONFIGS))
    s.add_argument("--batches", default="2,3,4")
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--smoke", action="store_true", help="the workloads' tiny sizes besides the batch")
    c = sub.add_parser("compare")
    c.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    c.add_argument("--measured", type=Path, action="append",
                   help="a GPU benchmark output folder holding summary.json (repeat; default: the committed runs)")
    c.add_argument("--by-class", action="store_true", help="each measured row split by op class")
    c.add_argument("--json", type=Path)
    c.add_argument("--only", help="one workload")
    c.add_argument("--by-op", action="store_true",
                   help="each top-level op's measured kernels next to its forecast")
    args = p.parse_args(argv)
    if args.cmd == "trace":
        small = None if args.full else [int(b) for b in args.batches.split(",")]
        trace_all(args.cache, args.models.split(","), small)
        return 0
    if args.cmd == "scale-check":
        return scale_check(args.models.split(","), [int(b) for b in args.batches.split(",")], args.batch,
                           args.smoke)
    return compare(args.cache, args.by_class, args.json, args.only, args.by_op, args.measured)


if __name__ == "__main__":
    sys.exit(main())
