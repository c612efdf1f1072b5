"""Leave-shapes-out accuracy of the GEMM, conv and attention models on measured multi-precision kernels
(benchmarks/results/kernels/<GPU>/, collect_kernels.py): the shapes the shipped model never
saw, recomputed from the split recorded in its metadata (seed and fraction), so the figure can
be checked from the repository alone (tests/python/evaluate/test_precision_eval.py).

    python -m habitat.evaluate precision [--data benchmarks/results/kernels/H100-SXM5-80GB]

Each row's measured time includes the collection harness's per-call floor (CUDA events around
one op call: 22-38 us on the H100 VM); the model's kernel time is merged with the floor of the
row's own (op, GPU), measured on the training rows (metadata harness_floor_us). Rows whose
roofline is under KERNEL_BOUND_US are mostly that floor and its jitter (on the H100 data the
same op re-measured in another 16-bit type differs by 5-9 % mean), so the report splits them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from habitat.evaluate.checkout import checkout_path
from habitat.learned import conv_layout
from habitat.learned.devices import DeviceTable
from habitat.learned.model import EfficiencyMLP, harness_time
from habitat.learned.neusight import load_attention, load_precision_kernels
from habitat.learned.train import ape, design, row_floors, summary
from habitat.learned.train_precision import (
    errors_by_precision,
    harness_prediction,
    leave_shapes_out,
    measured_sharpness,
    row_add_shares,
)

DEFAULT_DATA = Path("benchmarks") / "results" / "kernels" / "H100-SXM5-80GB"  # in the checkout


def default_data() -> Path:
    """The committed H100 kernel measurements (see habitat.evaluate.checkout)."""
    return checkout_path(DEFAULT_DATA)
KERNEL_BOUND_US = 10.0


def evaluate(data: Path, weights: Path, devices: DeviceTable, families=("gemm", "conv", "attention")) -> dict:
    measured = load_precision_kernels(data)
    attention = load_attention(data)
    if attention is not None:
        measured["attention"] = attention
    out: dict = {}
    for family in families:
        if family not in measured or not (weights / f"{family}.safetensors").is_file():
            continue
        model = EfficiencyMLP.load(weights, family)
        split = model.metadata.get("split")
        if not split:
            raise ValueError(f"{weights}/{family}.json has no 'split': these weights were not trained on "
                             "measured precision data (python -m habitat.learned.train --precision-data ...)")
        rows = measured[family]
        test = leave_shapes_out(rows, split["test_fraction"], split["seed"])
        as_measured = rows.take(test)
        layout = "nchw_transforms" in model.metadata
        if layout:  # trained on the rows less their layout transforms: measured on that basis too
            rows, _ = conv_layout.without_transforms(rows, devices)
        held = rows.take(test)
        floors = model.metadata["harness_floor_us"]["per_gpu"]
        pred = harness_prediction(model, held, devices, floors)
        _, t_roof = design(held, devices)
        bound = t_roof >= KERNEL_BOUND_US
        served = _served_fp32(weights, family, held, devices, floors, model, pred)
        out[family] = {"rows": int(len(held)), "all_rows": errors_by_precision(pred, held),
                       f"roofline_at_least_{KERNEL_BOUND_US:g}us": errors_by_precision(pred[bound], held.take(bound)),
                       "signed_mean_pct": {p: float(np.mean((pred - held.latency_us)[held.precision == p]
                                                            / held.latency_us[held.precision == p]) * 100)
                                           for p in sorted(set(held.precision.tolist()))},
                       "overall": summary(ape(pred, held.latency_us))}
        if layout:
            # The engine's forecast of the rows as measured (NCHW): the transforms added back.
            with_t = pred + conv_layout.transforms_of_rows(as_measured, devices)
            out[family]["all_rows_as_measured"] = errors_by_precision(with_t, as_measured)
        if family == "gemm":  # a conv's tiny rows run 1-4 kernels (layout transforms): no one constant
            out[family]["harness_noise_training_rows"] = harness_noise(rows, devices, test)
        if served is not None:
            fp32 = held.precision == "fp32"
            out[family]["fp32_as_served"] = {
                "note": f"fp32 rows forecast as the engine serves them: {family}_fp32 where its from_roofline_us "
                        f"allows (weights/README.md 'Which model serves what'), {family} elsewhere",
                "all_rows": errors_by_precision(served[fp32], held.take(fp32)),
                f"roofline_at_least_{KERNEL_BOUND_US:g}us": errors_by_precision(served[fp32 & bound],
                                                                              held.take(fp32 & bound))}
    return out


# Rows with less work than this (roofline, us) are the harness floor plus a kernel of a few us.
NEAR_FLOOR_US = 0.3


def harness_noise(rows, devices: DeviceTable, test: np.ndarray) -> dict:
    """How far the collection's near-floor rows are predictable at all, from the training
    problems only (`test` rows are skipped): per op and precision, the rows whose roofline is
    under NEAR_FLOOR_US (a few us of kernel behind a 22-38 us floor), the least mean absolute %
    error any one constant reaches on them (a bound for every shape-based forecast of those
    rows, up to their small kernel differences), and the correlation of their excess time
    (log time less the median) between rows measured one after the other (file order: other
    shapes, measured next in time). A positive lag-1 correlation with ~0 at lag 50 means the
    excess is host-side noise that comes in bursts, not a property of the shape."""
    _, t_roof = design(rows, devices)
    out: dict = {}
    for op in sorted(set(rows.op.tolist())):
        for p in sorted(set(rows.precision.tolist())):
            mine = np.nonzero((rows.op == op) & (rows.precision == p))[0]  # file order
            near = mine[(t_roof[mine] < NEAR_FLOOR_US) & ~test[mine]]
            if len(near) < 10:
                continue
            y = rows.latency_us[near]
            grid = np.linspace(y.min(), np.percentile(y, 90), 400)
            best = min(float(np.mean(np.abs(c - y) / y)) for c in grid) * 100.0
            excess = dict(zip(near.tolist(), (np.log(y) - np.median(np.log(y))).tolist()))
            position = {int(i): j for j, i in enumerate(mine)}

            def lag_corr(lag: int) -> float | None:
                a = [(excess[i], excess[int(mine[position[i] + lag])]) for i in excess
                     if position[i] + lag < len(mine) and int(mine[position[i] + lag]) in excess]
                return float(np.corrcoef(np.array(a).T)[0, 1]) if len(a) >= 10 else None
            out.setdefault(p, {})[op] = {"rows": int(len(near)), "best_constant_mean_pct": best,
                                         "excess_corr_lag1": lag_corr(1), "excess_corr_lag50": lag_corr(50)}
    return out


def _served_fp32(weights: Path, family: str, held, devices: DeviceTable, floors, model: EfficiencyMLP,
                 pred: np.ndarray) -> np.ndarray | None:
    """`pred` with the fp32 rows that the FP32 SIMT model serves forecast by it (None: no such model).
    That model was trained on NeuSight's GPUs only, so every H100 row is unseen by it."""
    if not (weights / f"{family}_fp32.safetensors").is_file():
        return None
    fp32_model = EfficiencyMLP.load(weights, family, f"{family}_fp32")
    x, t_roof = design(held, devices)
    use = (held.precision == "fp32") & (t_roof >= float(fp32_model.metadata.get("from_roofline_us", 0.0)))
    floor = row_floors(held, floors)
    served = pred.copy()
    served[use] = harness_time(floor[use], fp32_model.kernel_from_features(x[use], t_roof[use]),
                               measured_sharpness(model), row_add_shares(model, held)[use])
    return served


def _corr(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def print_report(results: dict) -> None:
    print("\n== Leave-shapes-out, measured multi-precision kernels: mean / median / p90 absolute % error")
    for family, r in results.items():
        if "harness_noise_training_rows" in r:
            print(f"\n-- {family}: training rows under {NEAR_FLOOR_US:g} us of roofline (harness floor + a tiny "
                  "kernel): best one-constant mean % error; excess-time correlation with the next-measured row "
                  "(lag 1, lag 50)")
            for p, per_op in r["harness_noise_training_rows"].items():
                for op, v in per_op.items():
                    r1, r50 = (_corr(v["excess_corr_lag1"]), _corr(v["excess_corr_lag50"]))
                    print(f"{p:9s} {op:16s} | {v['rows']:4d} rows {v['best_constant_mean_pct']:6.1f} % | "
                          f"r1 {r1:>5s}  r50 {r50:>5s}")
        print(f"\n-- {family} ({r['rows']} held-out rows) --")
        subset = next(k for k in r if k.startswith("roofline_at_least"))
        print(f"{'precision':9s} {'op':16s} | {'all rows: n, mean/med/p90':>30s} | {subset + ': n, mean':>34s}")
        for p, per_op in r["all_rows"].items():
            for op, s in per_op.items():
                b = r[subset].get(p, {}).get(op, {"n": 0})
                tail = f"{b['n']:5d} {b['mean']:7.1f}" if b.get("n") else f"{0:5d}       -"
                print(f"{p:9s} {op:16s} | {s['n']:5d} {s['mean']:7.1f} {s['median']:7.1f} {s['p90']:7.1f} | {tail:>34s}")
        if "all_rows_as_measured" in r:
            print("as measured (NCHW: the model's convolution plus its layout transforms, against the raw rows)")
            for p, per_op in r["all_rows_as_measured"].items():
                for op, s in per_op.items():
                    print(f"{p:9s} {op:16s} | {s['n']:5d} {s['mean']:7.1f} {s['median']:7.1f} {s['p90']:7.1f} |")
        if "fp32_as_served" in r:
            served = r["fp32_as_served"]
            bound = next(k for k in served if k.startswith("roofline_at_least"))
            for op, s in served["all_rows"].get("fp32", {}).items():
                b = served[bound].get("fp32", {}).get(op, {"n": 0})
                tail = f"{b['n']:5d} {b['mean']:7.1f}" if b.get("n") else f"{0:5d}       -"
                print(f"{'fp32 srv':9s} {op:16s} | {s['n']:5d} {s['mean']:7.1f} {s['median']:7.1f} {s['p90']:7.1f} | {tail:>34s}")
