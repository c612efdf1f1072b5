"""The printed tables of real_models.py compare (markdown, so a run can be committed as is)."""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from op_classes import CLASSES, MATRIX_CLASSES

Row = dict[str, Any]


def _pct(forecast: float, measured: float) -> str:
    return f"{100 * (forecast / measured - 1):+.1f}%" if measured else "-"


def print_rows(rows: list[Row]) -> None:
    if not rows:
        return
    print("| workload | precision | GPU | run | measured step ms | measured kernels ms | host-bound ms "
          "| forecast kernels ms | kernel error | roofline-only kernels ms | roofline-only error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['precision']} | {r['gpu']} | {r['run']} | {r['measured_step_ms']:.2f} "
              f"| {r['measured_kernel_ms']:.2f} | {r['host_bound_ms']:.2f} "
              f"| {r['forecast_kernel_ms']:.2f} | {r['kernel_error_pct']:+.1f}% "
              f"| {r['roofline_kernel_ms']:.2f} | {r['roofline_error_pct']:+.1f}% |")
    print()
    print("| precision | GPU | run | rows | mean abs kernel error | mean signed | roofline-only mean abs |")
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r["precision"], r["gpu"], r["run"])].append(r)
    for (precision, gpu, run), sel in sorted(groups.items(), key=lambda kv: (kv[0][0] != "fp32", kv[0][1:])):
        errs = [r["kernel_error_pct"] for r in sel]
        print(f"| {precision} | {gpu} | {run} | {len(sel)} | {statistics.fmean(abs(e) for e in errs):.1f}% "
              f"| {statistics.fmean(errs):+.1f}% | {statistics.fmean(abs(r['roofline_error_pct']) for r in sel):.1f}% |")
    errs = [abs(r["kernel_error_pct"]) for r in rows]
    print(f"\nall {len(errs)} workload x GPU rows: mean abs kernel error {statistics.fmean(errs):.1f}% "
          f"(roofline-only {statistics.fmean(abs(r['roofline_error_pct']) for r in rows):.1f}%)")
    for field in ("gpu", "precision"):
        print(f"by {field}: " + "; ".join(_mean_abs_by(rows, field)))


def _mean_abs_by(rows: list[Row], field: str) -> list[str]:
    """'<value> <n> rows <mean abs kernel error>%' per value of `field`, in first-seen order."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        groups[r[field]].append(abs(r["kernel_error_pct"]))
    return [f"{k} {len(v)} rows {statistics.fmean(v):.1f}%" for k, v in groups.items()]


def print_unmeasured(entries: list[Row], gpu: str) -> None:
    """Workloads no GPU run measured: the forecast per target, then per op class on `gpu`."""
    if not entries:
        return
    targets = list(entries[0]["forecast_kernel_ms"])
    print("\nNot measured on any GPU yet (no summary holds them): forecast kernels ms")
    print("| workload | precision | " + " | ".join(targets) + " | measured |")
    print("|---|---|" + "---|" * len(targets) + "---|")
    for e in entries:
        print(f"| {e['model']} | {e['precision']} | "
              + " | ".join(f"{e['forecast_kernel_ms'][t]:.2f}" for t in targets) + " | not measured |")
    columns = [(e["model"], e["precision"], e["forecast_by_class_ms"][gpu]) for e in entries]
    used = [c for c in CLASSES if any(c in by for _, _, by in columns)]
    print(f"\nTheir forecast per op class on {gpu}, ms (share of the workload's kernel sum)")
    print("| class | " + " | ".join(f"{m} {p}" for m, p, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for c in used:
        cells = []
        for _, _, by in columns:
            total = sum(by.values())
            cells.append(f"{by[c]:.2f} ({100 * by[c] / total:.0f}%)" if c in by else "")
        print(f"| {c} | " + " | ".join(cells) + " |")


def _class_errors(r: Row) -> list[tuple[str, float, float, float]]:
    """(class, measured ms, forecast ms, points of the row's kernel error) for its classes."""
    g, f, total = r["gpu_by_class_ms"], r["forecast_by_class_ms"], r["measured_kernel_ms"]
    out = []
    for c in CLASSES:
        if c in g or c in f:
            m, fc = g.get(c, 0.0), f.get(c, 0.0)
            out.append((c, m, fc, 100 * (fc - m) / total))
    return out


def print_class_breakdowns(rows: list[Row]) -> None:
    for r in rows:
        print(f"\n{r['model']} {r['precision']} {r['gpu']} ({r['run']}): kernel sum {r['measured_kernel_ms']:.2f} ms "
              f"measured, {r['forecast_kernel_ms']:.2f} forecast ({r['kernel_error_pct']:+.1f}%)")
        print(f"  {'class':<24}{'measured ms':>12}{'forecast ms':>12}{'error':>9}{'points':>8}")
        for c, m, fc, points in _class_errors(r):
            print(f"  {c:<24}{m:12.3f}{fc:12.3f}{_pct(fc, m):>9}{points:+8.1f}")


def print_class_summary(rows: list[Row]) -> None:
    """Per class and precision over the measured rows: the sums, and how many points of each
    row's kernel error the class makes on average (signed and absolute), largest first."""
    print("\nPer op class over the measured rows (points: the class's forecast minus measured time, "
          "in % of the row's measured kernel sum; the row's error is the sum of its classes' points)")
    print("| class | precision | rows | measured ms | forecast ms | error of the sums | mean points | mean abs points |")
    print("|---|---|---|---|---|---|---|---|")
    table = []
    precisions = sorted({r["precision"] for r in rows}, key=lambda p: p != "fp32")
    for precision in precisions:
        per: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
        sel = [r for r in rows if r["precision"] == precision]
        for r in sel:
            for c, m, fc, points in _class_errors(r):
                per[c].append((m, fc, points))
        for c, vals in per.items():
            m, fc = sum(v[0] for v in vals), sum(v[1] for v in vals)
            mean = sum(v[2] for v in vals) / len(sel)  # a row without the class adds 0 points
            mean_abs = sum(abs(v[2]) for v in vals) / len(sel)
            table.append((precision, -mean_abs, c, len(vals), m, fc, mean, mean_abs))
    for precision, _, c, n, m, fc, mean, mean_abs in sorted(table, key=lambda t: (t[0] != "fp32", t[1])):
        print(f"| {c} | {precision} | {n} | {m:.2f} | {fc:.2f} | {_pct(fc, m)} | {mean:+.1f} | {mean_abs:.1f} |")


def print_matrix_vs_rest(rows: list[Row]) -> None:
    print("\nMatrix classes (learned GEMM/conv/attention models; cuDNN RNN ops) vs the rest, in points "
          "of each row's kernel error (rest = the error left if the matrix classes were exact)")
    rest_abs: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        matrix = sum(points for c, _, _, points in _class_errors(r) if c in MATRIX_CLASSES)
        rest = r["kernel_error_pct"] - matrix
        rest_abs[r["precision"]].append(abs(rest))
        print(f"  {r['model']:<19} {r['precision']} {r['gpu']:<15} {r['run']:<11} {r['kernel_error_pct']:+6.1f}%  "
              f"matrix {matrix:+6.1f}  rest {rest:+6.1f}")
    for precision, errs in rest_abs.items():
        print(f"  {precision}: mean abs kernel error with the matrix classes as measured {statistics.fmean(errs):.1f}%")


def print_gpu_ratios(rows: list[Row]) -> None:
    """Per pair of GPUs, class and precision, over the workloads both measured on the same day:
    how much faster the second GPU ran each class, measured and forecast (a forecast that
    moves a class between the GPUs by more than it moved shows here, whatever its level)."""
    by_key: dict[tuple[str, str, str], dict[str, Row]] = defaultdict(dict)
    for r in rows:
        by_key[(r["model"], r["precision"], r["run"])][r["gpu"]] = r
    sums: dict[tuple[str, str, str, str], list[float]] = defaultdict(lambda: [0.0] * 4)
    for (_, precision, _), per_gpu in by_key.items():
        gpus = sorted(per_gpu)
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                ra, rb = per_gpu[a], per_gpu[b]
                for c in set(ra["gpu_by_class_ms"]) | set(rb["gpu_by_class_ms"]):
                    s = sums[(a, b, c, precision)]
                    s[0] += ra["gpu_by_class_ms"].get(c, 0.0)
                    s[1] += rb["gpu_by_class_ms"].get(c, 0.0)
                    s[2] += ra["forecast_by_class_ms"].get(c, 0.0)
                    s[3] += rb["forecast_by_class_ms"].get(c, 0.0)
    if not sums:
        return
    print("\nPer op class, A over B time on the workloads both GPUs measured the same day "
          "(classes of 1 ms or more on A)")
    print("| A | B | class | precision | A measured ms | B measured ms | measured A/B | forecast A/B |")
    print("|---|---|---|---|---|---|---|---|")
    for (a, b, c, precision), (ma, mb, fa, fb) in sorted(sums.items(), key=lambda kv: (kv[0][:2], -kv[1][0])):
        if ma >= 1.0 and mb > 0 and fb > 0:
            print(f"| {a} | {b} | {c} | {precision} | {ma:.2f} | {mb:.2f} | {ma / mb:.2f} | {fa / fb:.2f} |")


def print_by_op(rows: list[Row]) -> None:
    for r in rows:
        if "by_op_us" not in r:
            continue
        print(f"\n{r['model']} {r['precision']} {r['gpu']} ({r['run']}): phase, top-level op, measured us, forecast us")
        ops = sorted(r["by_op_us"].items(), key=lambda kv: -max(kv[1]))
        for (phase, name), (measured_us, forecast_us) in ops:
            if max(measured_us, forecast_us) >= 20:
                print(f"  {phase:<10} {name:<50} {measured_us:10.1f} {forecast_us:10.1f}")
