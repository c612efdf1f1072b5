"""Cross-GPU forecast error from the benchmark results of two GPUs.

    python benchmarks/gpu/compare_results.py benchmarks/results/<gpu-a> benchmarks/results/<gpu-b> \
        [--recorded] [--against measured|kernels] [--out report.md]

For every workload (model, precision) measured on both GPUs, the trace recorded on A is
forecast for B and compared with B's measured iteration time, and B's trace for A likewise.
By default the traces are re-forecast with the engine installed now (so an improved engine
is measured on the same traces); --recorded uses the forecasts stored at capture time.
Error = (forecast - measured) / measured. With --against kernels, "measured" is B's own kernel
time in its traced step (the sum of the kernels CUPTI recorded) instead of its iteration time:
how well the kernels are scaled across GPUs, apart from host-bound gaps no kernel sum shows.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def load_results(directory: Path) -> tuple[str, dict[tuple[str, str], dict[str, Any]]]:
    summary = json.loads((directory / "summary.json").read_text())
    gpu = summary["environment"]["gpu"]
    runs = {(r["model"], r["precision"]): r for r in summary["results"] if "error" not in r}
    return gpu, runs


def forecast_ms(directory: Path, run: dict[str, Any], target: str, recorded: bool) -> float:
    if recorded:
        if target not in run["forecast_ms"]:
            raise KeyError(f"{target} was not a forecast target when {directory} was recorded")
        return float(run["forecast_ms"][target])
    from habitat.data.forecast import Forecast

    with gzip.open(directory / run["trace"], "rt", encoding="utf-8") as f:
        document = json.load(f)
    return Forecast.from_trace(document, [target]).time_ms(target)


def measured_ms(run: dict[str, Any], against: str) -> float:
    if against == "kernels":
        return float(run["coverage"]["kernel_sum_ms"])
    return float(run["measured"]["median_ms"])


def compare(dir_a: Path, dir_b: Path, recorded: bool,
            against: str = "measured") -> tuple[str, list[dict[str, Any]]]:
    gpu_a, runs_a = load_results(dir_a)
    gpu_b, runs_b = load_results(dir_b)
    rows = []
    for key in sorted(runs_a.keys() & runs_b.keys()):
        a, b = runs_a[key], runs_b[key]
        row: dict[str, Any] = {"model": key[0], "precision": key[1]}
        for src_dir, src, dst_gpu, dst, tag in ((dir_a, a, gpu_b, b, "a_to_b"),
                                                (dir_b, b, gpu_a, a, "b_to_a")):
            predicted = forecast_ms(src_dir, src, dst_gpu, recorded)
            measured = measured_ms(dst, against)
            row[tag] = {"forecast_ms": predicted, "measured_ms": measured,
                        "error": (predicted - measured) / measured}
        rows.append(row)
    header = f"{gpu_a} (A) and {gpu_b} (B)"
    return header, rows


def report(header: str, rows: list[dict[str, Any]], recorded: bool, against: str = "measured") -> str:
    what = ("the sum of the kernel times CUPTI recorded in the target's traced step"
            if against == "kernels" else "median CUDA-event iteration time")
    col = "kernel sum ms" if against == "kernels" else "measured ms"
    lines = [f"# Cross-GPU forecast error: {header}", "",
             f"Forecasts {'recorded at capture time' if recorded else 're-computed from the traces'}; "
             f"measured = {what}. Error = (forecast - measured) / measured.", "",
             f"| model | precision | A->B forecast ms | B {col} | error | B->A forecast ms "
             f"| A {col} | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ab, ba = r["a_to_b"], r["b_to_a"]
        lines.append(f"| {r['model']} | {r['precision']} | {ab['forecast_ms']:.2f} | "
                     f"{ab['measured_ms']:.2f} | {100 * ab['error']:+.1f}% | {ba['forecast_ms']:.2f} | "
                     f"{ba['measured_ms']:.2f} | {100 * ba['error']:+.1f}% |")
    errors = [abs(r[d]["error"]) for r in rows for d in ("a_to_b", "b_to_a")]
    if errors:
        lines += ["", f"Mean absolute error over {len(errors)} forecasts: "
                      f"{100 * statistics.fmean(errors):.1f}% (max {100 * max(errors):.1f}%)."]
        for precision in sorted({r["precision"] for r in rows}):
            sub = [abs(r[d]["error"]) for r in rows if r["precision"] == precision
                   for d in ("a_to_b", "b_to_a")]
            lines.append(f"- {precision}: {100 * statistics.fmean(sub):.1f}% over {len(sub)}")
        for direction, label in (("a_to_b", "A->B"), ("b_to_a", "B->A")):
            signed = [r[direction]["error"] for r in rows]
            lines.append(f"- {label}: {100 * statistics.fmean(abs(e) for e in signed):.1f}% over {len(signed)} "
                         f"(mean signed {100 * statistics.fmean(signed):+.1f}%)")
    else:
        lines += ["", "No workload was measured on both GPUs."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gpu_a", type=Path, help="results directory of GPU A (has summary.json)")
    parser.add_argument("gpu_b", type=Path, help="results directory of GPU B")
    parser.add_argument("--recorded", action="store_true",
                        help="use the forecasts stored at capture time instead of re-forecasting")
    parser.add_argument("--against", choices=("measured", "kernels"), default="measured",
                        help="compare with the target's iteration time (default) or its kernel sum")
    parser.add_argument("--out", type=Path, help="also write the report (and a .json beside it)")
    args = parser.parse_args(argv)
    header, rows = compare(args.gpu_a, args.gpu_b, args.recorded, args.against)
    text = report(header, rows, args.recorded, args.against)
    print(text)
    if args.out:
        # The report carries the command that made it, so a committed copy can be reproduced.
        command = " ".join(["python", "benchmarks/gpu/compare_results.py", *(argv or sys.argv[1:])])
        title, rest = text.split("\n", 1)
        args.out.write_text(f"{title}\n\nProduced from the repository root (prefix `PYTHONPATH=python` "
                            f"to use the tree's `python/` with its built extensions):\n\n"
                            f"```bash\n{command}\n```\n{rest}")
        args.out.with_suffix(".json").write_text(json.dumps({"pair": header, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
