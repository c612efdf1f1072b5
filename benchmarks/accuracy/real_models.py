"""Real-model accuracy: the benchmark workloads traced on the CPU, forecast for H100 and H200,
against what those GPUs measured (benchmarks/results/<gpu>/summary.json and traces/).

    python benchmarks/accuracy/real_models.py trace [--cache DIR] [--only NAME] [--extra]
    python benchmarks/accuracy/real_models.py compare [--cache DIR] [--by-class] [--by-op] [--json OUT]

`trace` builds every workload of benchmarks/gpu/models.py on the CPU (fp32, and bf16 under
torch.autocast("cpu", dtype=torch.bfloat16), as the GPU runs used CUDA autocast), runs one
warm-up step (so optimiser state exists, as in the GPU trace, which was a later step), and
records the next step with habitat.capture.record_step into DIR/<model>_<precision>.json.gz
(default benchmarks/results/cpu-traces/, where the traces of the committed table are; tracing
all eight takes about half an hour on two cores).

`compare` forecasts each CPU trace shape-based for H100-SXM5-80GB and H200-SXM-141GB and
compares the forecast kernel sum with the recorded GPU step's kernel sum (the sum of every
kernel CUPTI attributed to the step's ops), separately from the host-bound part of the measured
step (measured step time minus its kernel sum: launch gaps and CPU work the GPU waited for,
which a kernel forecast does not contain). `--by-class` splits both sides by the engine's op
class (the GPU trace's ops are classed by the same cost model), which is how mechanisms are
found: the per-op comparison, never a fit to these labels.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
GPUS = {"H100-SXM5-80GB": "h100-sxm5-80gb", "H200-SXM-141GB": "h200-sxm-141gb"}
PRECISIONS = ("fp32", "bf16")
CONFIG_MODELS = ("vit_b16", "bert_base_mlm")  # config_models.py: traced with `trace --extra`
DEFAULT_CACHE = RESULTS / "cpu-traces"  # committed: traced on the 2-core CPU machine


def _load_json(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        return json.load(f)


# ----- tracing on the CPU ----------------------------------------------------------------------

def trace_all(cache: Path, only: str | None, extra: bool = False) -> None:
    import torch

    sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import config_models  # noqa: E402  (benchmarks/accuracy/config_models.py)
    import models  # noqa: E402  (benchmarks/gpu/models.py)

    from habitat.capture.predict import _origin, record_step
    from habitat.data import engine

    # The GPU runs used CUDA autocast; on the CPU the same step uses CPU autocast.
    models._autocast = lambda enabled: torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)
    cache.mkdir(parents=True, exist_ok=True)
    builders = [(w.name, w.build) for w in models.WORKLOADS]
    if extra:
        builders += [(name, build) for name, (build, _) in config_models.CONFIG_WORKLOADS.items()]
    for name, build in builders:
        if only and name != only:
            continue
        for precision in PRECISIONS:
            out = cache / f"{name}_{precision}.json.gz"
            torch.manual_seed(0)
            step = build(torch.device("cpu"))
            autocast = precision == "bf16"
            t0 = time.perf_counter()
            step(autocast)  # warm-up: optimiser state, autocast weight cache
            with record_step(0) as rec:
                step(autocast)
            origin = _origin("cpu")
            doc = engine.trace_document(origin, [rec.step])
            with gzip.open(out, "wt", encoding="utf-8") as f:
                json.dump(doc, f, separators=(",", ":"))
            print(f"{out.name}: {len(rec.step['ops'])} ops, {time.perf_counter() - t0:.0f} s",
                  flush=True)


# ----- comparison ------------------------------------------------------------------------------

def _kernel_us(op: dict[str, Any]) -> float:
    return sum(k.get("duration_us", 0.0) for k in op.get("kernels", []))


def gpu_record(gpu_dir: str, model: str, precision: str) -> dict[str, Any]:
    summary = _load_json(RESULTS / gpu_dir / "summary.json")
    for r in summary["results"]:
        if r["model"] == model and r["precision"] == precision:
            return r
    raise KeyError(f"{gpu_dir}: no recorded {model} {precision}")


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


def gpu_kernels_by_class(gpu_dir: str, model: str, precision: str, gpu: str) -> dict[str, float]:
    """The recorded GPU step's kernel time (us) per op class of the op that launched it."""
    doc = _load_json(RESULTS / gpu_dir / "traces" / f"{model}_{precision}.json.gz")
    step = doc["steps"][0]
    forecast = classify(doc["origin"], step, [gpu])
    cls = {o["id"]: o["class"] for o in forecast["ops"]}
    out: dict[str, float] = defaultdict(float)
    for op in step["ops"]:
        us = _kernel_us(op)
        if us:
            out[cls.get(op["id"], "?")] += us
    return out


def _root_key(ops: list[dict[str, Any]]) -> Any:
    """op -> (phase, name) of its outermost ancestor: the call the program made."""
    by_id = {op["id"]: op for op in ops}

    def key(op: dict[str, Any]) -> tuple[str, str]:
        while "parent" in op and op["parent"] in by_id:
            op = by_id[op["parent"]]
        return op.get("phase", "?"), op["name"]
    return key


def by_root_op(cpu_step: dict[str, Any], forecast: dict[str, Any], t: int, gpu_dir: str, model: str,
               precision: str) -> dict[tuple[str, str], tuple[float, float]]:
    """(phase, top-level op) -> (measured kernel us on the GPU, forecast us from the CPU trace).
    The two sides name some calls differently (the CPU's per-tensor optimizer ops and oneDNN
    RNN layers, CUDA's foreach and cuDNN ops), so read them side by side."""
    gpu_step = _load_json(RESULTS / gpu_dir / "traces" / f"{model}_{precision}.json.gz")["steps"][0]
    out: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    key = _root_key(gpu_step["ops"])
    for op in gpu_step["ops"]:
        out[key(op)][0] += _kernel_us(op)
    share = {o["id"]: o["predictions"][t][2] for o in forecast["ops"]}
    key = _root_key(cpu_step["ops"])
    for op in cpu_step["ops"]:
        out[key(op)][1] += share.get(op["id"], 0.0)
    return {k: (v[0], v[1]) for k, v in out.items()}


# The classes whose time comes from the learned matrix models (GEMM, conv, attention; the GPU
# side's cuDNN RNN ops are "unknown" to the cost model, their CPU forecast is GEMMs).
MATRIX_CLASSES = ("conv", "gemm", "attention", "unknown")


def forecast_by_class(forecast: dict[str, Any], t: int) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for o in forecast["ops"]:
        share = o["predictions"][t][2]
        if share:
            out[o["class"]] += share
    return out


def compare(cache: Path, by_class: bool, json_out: Path | None, only: str | None = None,
            by_op: bool = False) -> int:
    targets = list(GPUS)
    rows = []
    missing = []
    for model in ("resnet50", "gpt2_small", "lstm_seq2seq", "dcgan"):
        if only and model != only:
            continue
        for precision in PRECISIONS:
            path = cache / f"{model}_{precision}.json.gz"
            if not path.exists():
                missing.append(path.name)
                continue
            doc = _load_json(path)
            forecast = classify(doc["origin"], doc["steps"][0], targets)
            roofline = classify(doc["origin"], doc["steps"][0], targets, learned=False)
            for t, gpu in enumerate(targets):
                rec = gpu_record(GPUS[gpu], model, precision)
                measured_kernel = rec["coverage"]["kernel_sum_ms"]
                measured_step = rec["measured"]["median_ms"]
                forecast_ms = forecast["totals"][t]["total_ms"]
                row = {"model": model, "precision": precision, "gpu": gpu,
                       "measured_step_ms": measured_step, "measured_kernel_ms": measured_kernel,
                       "host_bound_ms": max(0.0, measured_step - measured_kernel),
                       "forecast_kernel_ms": forecast_ms,
                       "kernel_error_pct": 100 * (forecast_ms / measured_kernel - 1),
                       "roofline_kernel_ms": roofline["totals"][t]["total_ms"],
                       "roofline_error_pct": 100 * (roofline["totals"][t]["total_ms"] / measured_kernel - 1)}
                if by_op:
                    row["by_op_us"] = by_root_op(doc["steps"][0], forecast, t, GPUS[gpu], model, precision)
                if by_class:
                    row["gpu_by_class_ms"] = {k: v / 1e3 for k, v in sorted(
                        gpu_kernels_by_class(GPUS[gpu], model, precision, gpu).items())}
                    row["forecast_by_class_ms"] = {k: v / 1e3 for k, v in sorted(
                        forecast_by_class(forecast, t).items())}
                rows.append(row)
    if missing:
        print("missing CPU traces (run `trace` first): " + ", ".join(missing), file=sys.stderr)
    print("| workload | precision | GPU | measured step ms | measured kernels ms | host-bound ms "
          "| forecast kernels ms | kernel error | roofline-only kernels ms | roofline-only error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['precision']} | {r['gpu']} | {r['measured_step_ms']:.2f} "
              f"| {r['measured_kernel_ms']:.2f} | {r['host_bound_ms']:.2f} "
              f"| {r['forecast_kernel_ms']:.2f} | {r['kernel_error_pct']:+.1f}% "
              f"| {r['roofline_kernel_ms']:.2f} | {r['roofline_error_pct']:+.1f}% |")
    print()
    print("| precision | GPU | mean abs kernel error | mean signed | roofline-only mean abs |")
    print("|---|---|---|---|---|")
    for precision in PRECISIONS:
        for gpu in targets:
            sel = [r for r in rows if r["precision"] == precision and r["gpu"] == gpu]
            if sel:
                errs = [r["kernel_error_pct"] for r in sel]
                roof = [abs(r["roofline_error_pct"]) for r in sel]
                print(f"| {precision} | {gpu} | {statistics.fmean(abs(e) for e in errs):.1f}% "
                      f"| {statistics.fmean(errs):+.1f}% | {statistics.fmean(roof):.1f}% |")
    errs = [abs(r["kernel_error_pct"]) for r in rows]
    if errs:
        print(f"\nall {len(errs)} workload x GPU rows: mean abs kernel error {statistics.fmean(errs):.1f}% "
              f"(roofline-only {statistics.fmean(abs(r['roofline_error_pct']) for r in rows):.1f}%)")
    extra = [(name, precision) for name in CONFIG_MODELS for precision in PRECISIONS
             if (cache / f"{name}_{precision}.json.gz").exists() and (not only or name == only)]
    if extra:
        print("\nWorkloads built from configs (no recorded GPU run to compare with): forecast kernels ms")
        print("| workload | precision | " + " | ".join(targets) + " |")
        print("|---|---|" + "---|" * len(targets))
        for name, precision in extra:
            doc = _load_json(cache / f"{name}_{precision}.json.gz")
            f = classify(doc["origin"], doc["steps"][0], targets)
            print(f"| {name} | {precision} | " + " | ".join(f"{t['total_ms']:.2f}" for t in f["totals"]) + " |")
    if by_class:
        for r in rows:
            print(f"\n{r['model']} {r['precision']} {r['gpu']}: class  measured ms  forecast ms")
            for k in sorted(set(r["gpu_by_class_ms"]) | set(r["forecast_by_class_ms"])):
                print(f"  {k:<12} {r['gpu_by_class_ms'].get(k, 0):9.3f} {r['forecast_by_class_ms'].get(k, 0):9.3f}")
    if by_class and rows:
        print("\nMatrix classes (learned GEMM/conv/attention models; cuDNN RNN ops) vs the rest, in points "
              "of each row's kernel error (rest = the error left if the matrix classes were exact)")
        cf = []
        for r in rows:
            g, f, meas = r["gpu_by_class_ms"], r["forecast_by_class_ms"], r["measured_kernel_ms"]
            matrix = sum(f.get(k, 0) - g.get(k, 0) for k in MATRIX_CLASSES) / meas * 100
            rest = r["kernel_error_pct"] - matrix
            cf.append((r["precision"], abs(rest)))
            print(f"  {r['model']:<13} {r['precision']} {r['gpu']:<15} {r['kernel_error_pct']:+6.1f}%  "
                  f"matrix {matrix:+6.1f}  rest {rest:+6.1f}")
        for precision in PRECISIONS:
            sel = [e for p, e in cf if p == precision]
            if sel:
                print(f"  {precision}: mean abs kernel error with the matrix classes as measured "
                      f"{statistics.fmean(sel):.1f}%")
    if by_op:
        for r in rows:
            print(f"\n{r['model']} {r['precision']} {r['gpu']}: phase, top-level op, measured us, forecast us")
            ops = sorted(r["by_op_us"].items(), key=lambda kv: -max(kv[1]))
            for (phase, name), (measured, forecast_us) in ops:
                if max(measured, forecast_us) >= 20:
                    print(f"  {phase:<10} {name:<50} {measured:10.1f} {forecast_us:10.1f}")
            r["by_op_us"] = {f"{ph} {name}": v for (ph, name), v in r["by_op_us"].items()}
    if json_out:
        json_out.write_text(json.dumps(rows, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    t.add_argument("--only")
    t.add_argument("--extra", action="store_true", help="also the config_models.py workloads")
    c = sub.add_parser("compare")
    c.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    c.add_argument("--by-class", action="store_true")
    c.add_argument("--json", type=Path)
    c.add_argument("--only")
    c.add_argument("--by-op", action="store_true",
                   help="each top-level op's measured kernels next to its forecast")
    args = p.parse_args(argv)
    if args.cmd == "trace":
        trace_all(args.cache, args.only, args.extra)
        return 0
    return compare(args.cache, args.by_class, args.json, args.only, args.by_op)


if __name__ == "__main__":
    sys.exit(main())
