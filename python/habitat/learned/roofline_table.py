"""Measured roofline efficiencies for the ops no learned family covers (batch norm, losses, pooling,
copies, optimizer updates, ...), from the recorded Hopper steps. Embedding, row gathers and
nll_loss are not among them (roofline_sample.LAUNCH_STRUCTURE_OPS).

    python -m habitat.learned.roofline_table --traces benchmarks/results --out weights [--lowo]

For every op of the recorded H100/H200 training steps (habitat.learned.traces.RUNS) that launched
kernels and has no learned part, one sample: its roofline on the trace's own GPU (the engine's
FLOPs and bytes for the op, at the op's precision's peak and the DRAM bandwidth) and its measured
kernel time (CUPTI, the op's kernels and those below it). An op's time is modelled as a fixed
part and a bandwidth part, time = t0 + roofline / e (Hockney's latency-bandwidth form: the small
ops of a training step are launch- and tail-bound, the large ones stream), with t0 and e fitted by
least squares in log time per op name, element width and layout (channels-last or not), per op
name and element width, per op name (at least MIN_SAMPLES samples each) and per op class (at least
MIN_CLASS_OPS ops). The engine uses the most specific entry it finds
(csrc/src/learned/roofline_table.cpp), else its class's built-in efficiency
(csrc/src/predict/shape_efficiency.cpp). Written as `roofline.json` beside the learned models.

--lowo prints the held-out error: for each of the four traced workloads, the table fitted on the
other three forecasts its ops (the kernel-sum benchmark runs these same workloads, so only this
figure is held out for them).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from habitat.learned.devices import default_table
from habitat.learned.fitting import summary
from habitat.learned.roofline_sample import (
    COLLECTION,
    LAUNCH_STRUCTURE_OPS,
    Sample,
    channels_last,
    elem_bytes,
    roofline_us,
    sm_roofline_us,
)

FORMAT = "habitat-roofline-efficiency"
FORMAT_VERSION = 1
MIN_SAMPLES = 2
# A class entry stands for ops the steps never ran, so it must rest on several ops (an op and its
# backward are one): one op's
# constants (6 samples of max_pool2d_with_indices_backward made the "reduction" class 200 us
# per kernel) would be given to every fused reduction of a compiled step.
MIN_CLASS_OPS = 2
# Classes given no class entry: the conv samples are depthwise convolutions only (the learned
# conv model takes the others), whose constants would misstate a dense conv3d or conv1d.
NO_CLASS_ENTRY = ("conv",)
# Efficiencies are kept within these bounds: a roofline is never beaten, and an op measured
# below a hundredth of its roofline is launch-bound, which the engine's per-kernel floor states.
EFFICIENCY_RANGE = (0.01, 1.0)


def samples(results: str | Path) -> list[Sample]:
    """Every roofline-forecast op of the recorded steps with its measured kernel time."""
    import json as _json

    from habitat import _engine
    from habitat.data.op_rows import OP_CLASSES, PRECISIONS
    from habitat.learned import traces as tr

    devices = default_table()
    out: list[Sample] = []
    for run in tr.RUNS:
        for path in sorted((Path(results) / run / "traces").glob("*.json.gz")):
            rec = tr.recorded_step(path, run)
            learned = {op_id for op_id, _cls, parts in _engine.learned_op_parts(_json.dumps(rec.cpu), -1) if parts}
            dev = devices.find(rec.gpu)
            for op, incl in zip(rec.ops, rec.measured_incl_us):
                if not op.get("kernels") or incl <= 0 or op["id"] in learned \
                        or op["name"].removeprefix("aten::") in LAUNCH_STRUCTURE_OPS:
                    continue
                r = rec.rows.get(op["id"])
                if r is None:
                    continue
                cls = OP_CLASSES[int(r["op_class"])]
                if cls in ("no_kernel", "unknown"):
                    continue
                precision, flops, nbytes = PRECISIONS[int(r["precision"])], float(r["flops"]), float(r["bytes"])
                roof = roofline_us(dev, precision, flops, nbytes)
                if roof <= 0:
                    continue
                out.append(Sample(rec.workload, rec.gpu, op["name"].removeprefix("aten::"), cls, elem_bytes(op),
                                  channels_last(op), roof, len(op["kernels"]), incl,
                                  sm_roofline_us(dev, precision, flops, nbytes)))
    return out


# The grid the two constants of an entry are fitted on.
FIXED_US_GRID = np.concatenate([[0.0], np.geomspace(0.5, 200.0, 60)])
SIZE_SPREAD = 2.0
LATENCY_BOUND_US = 20.0
EFFICIENCY_GRID = np.geomspace(EFFICIENCY_RANGE[0], EFFICIENCY_RANGE[1], 80)


# An entry is SM-bound only where its samples say so: GPUs that differ in bandwidth against SMs
# and clock among them, and the SM bound's log error under this share of the DRAM bound's.
SM_BOUND_GAIN = 0.8


def _fit_form(roof: np.ndarray, floor: np.ndarray, log_meas: np.ndarray, measured: np.ndarray) -> tuple:
    """(fixed_us, efficiency, mean squared log error) of time = max(t0 + roof / e, floor)."""
    # A fixed part is told apart from the efficiency only by samples of different sizes. One
    # problem (e.g. in two precisions) gets one of them: a kernel timed under
    # LATENCY_BOUND_US is launch- and latency-bound (its fixed part, at full efficiency), a
    # longer one streams (its efficiency, no fixed part).
    fixed, efficiency = FIXED_US_GRID, EFFICIENCY_GRID
    if roof.max() < SIZE_SPREAD * roof.min():
        if np.median(measured) < LATENCY_BOUND_US:
            efficiency = EFFICIENCY_GRID[-1:]
        else:
            fixed = FIXED_US_GRID[:1]
    time = np.maximum(fixed[:, None, None] + roof[None, None, :] / efficiency[None, :, None], floor[None, None, :])
    err = np.mean((np.log(time) - log_meas) ** 2, axis=2)
    i, j = np.unravel_index(np.argmin(err), err.shape)
    return float(fixed[i]), float(efficiency[j]), float(err[i, j])


def _bandwidth_regimes(s: list[Sample]) -> int:
    """How many distinct DRAM-to-SM-side ratios the samples' GPUs have (1: the two bounds differ
    only by a constant the efficiency absorbs)."""
    return len({round(x.roofline_us / x.sm_roofline_us, 3) for x in s if x.sm_roofline_us > 0})


def fit_entry(s: list[Sample]) -> dict:
    """The fixed time t0 (us) and the efficiency e of time = t0 + roofline / e that least
    squares the log error over the samples (a grid: both constants are positive). Where the
    samples span GPUs of different bandwidth per SM and clock, also of time = max(t0 +
    sm_roofline / e, roofline) ("bound": "sm"), kept when it fits clearly better."""
    roof = np.array([x.roofline_us for x in s])
    measured = np.array([x.measured_us for x in s])
    log_meas = np.log(measured)
    fixed, efficiency, err = _fit_form(roof, np.zeros_like(roof), log_meas, measured)
    out = {"fixed_us": round(fixed, 3), "efficiency": round(efficiency, 4), "samples": len(s)}
    if _bandwidth_regimes(s) > 1 and all(x.sm_roofline_us > 0 for x in s):
        sm = np.array([x.sm_roofline_us for x in s])
        sm_fixed, sm_eff, sm_err = _fit_form(sm, roof, log_meas, measured)
        if sm_err < SM_BOUND_GAIN * err:
            out.update(fixed_us=round(sm_fixed, 3), efficiency=round(sm_eff, 4), bound="sm")
    return out


def fit(data: list[Sample]) -> dict:
    """The table: per "op|elem_bytes", per op and per class, the constants of fit_entry."""
    ops: dict[str, dict] = {}
    groups: dict[str, list[Sample]] = {}
    for x in data:
        for key in keys(x):
            groups.setdefault(key, []).append(x)
    for key, s in sorted(groups.items()):
        if len(s) >= MIN_SAMPLES:
            ops[key] = {**fit_entry(s), "workloads": sorted({x.workload for x in s})}
    classes = {}
    for cls in sorted({x.op_class for x in data} - set(NO_CLASS_ENTRY)):
        s = [x for x in data if x.op_class == cls]
        if len({x.op.removesuffix("_backward") for x in s}) >= MIN_CLASS_OPS:
            classes[cls] = fit_entry(s)
    return {"ops": ops, "classes": classes}


def keys(x: Sample) -> tuple[str, ...]:
    """A sample's table keys, most specific first: op, element width and layout ("cl":
    channels-last, "" otherwise); op and element width; op; each first with the sample's variant
    (a depthwise convolution's filter size and stride: "depthwise_conv2d:k3s1|4|") where it has
    one."""
    names = ([f"{x.op}:{x.variant}"] if x.variant else []) + [x.op]
    layout = "cl" if x.channels_last else ""
    return tuple(k for n in names for k in (f"{n}|{x.elem_bytes}|{layout}", f"{n}|{x.elem_bytes}", n))


def entry(table: dict, x: Sample) -> dict | None:
    """The entry the engine would use for a sample (most specific first); None: none."""
    for key in keys(x):
        if key in table["ops"]:
            return table["ops"][key]
    return table["classes"].get(x.op_class)


def forecast_us(table: dict, x: Sample, fallback: float) -> float:
    """The engine's time for a sample: t0 + roofline / e of its entry (an SM-bound one: t0 +
    sm_roofline / e, never under the roofline; else the roofline over `fallback`), at least 2 us
    per kernel (kMinKernelUs)."""
    e = entry(table, x) or {"fixed_us": 0.0, "efficiency": fallback}
    if e.get("bound") == "sm":
        return max(e["fixed_us"] + x.sm_roofline_us / e["efficiency"], x.roofline_us, 2.0 * max(x.kernels, 1))
    return max(e["fixed_us"] + x.roofline_us / e["efficiency"], 2.0 * max(x.kernels, 1))


def lowo(data: list[Sample]) -> dict:
    """Per workload, the table fitted on the others against its ops: mean |error| % per class
    (ops of at least 5 us), and the class's kernel-sum error."""
    out: dict = {}
    for wl in sorted({x.workload for x in data} - {COLLECTION}):  # collections: family_kernels.py --holdout
        table = fit([x for x in data if x.workload != wl])
        mine = [x for x in data if x.workload == wl]
        for cls in sorted({x.op_class for x in mine}):
            s = [x for x in mine if x.op_class == cls]
            pred = np.array([forecast_us(table, x, 0.5) for x in s])
            meas = np.array([x.measured_us for x in s])
            big = meas >= 5.0
            out.setdefault(cls, {})[wl] = {"per_op_ge5us": summary(np.abs(pred[big] - meas[big]) / meas[big] * 100),
                                          "sum_error_pct": float((pred.sum() / meas.sum() - 1) * 100)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m habitat.learned.roofline_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--traces", required=True, help="benchmarks/results: holds <run>/traces/*.json.gz")
    p.add_argument("--out", default=None, help="write roofline.json here")
    p.add_argument("--lowo", action="store_true", help="print the leave-one-workload-out errors")
    p.add_argument("--collections", default=None,
                   help="comma-separated device-time kernel collections of the families no learned model covers "
                        "(habitat.learned.family_table), fitted with the traces' ops")
    p.add_argument("--collection-gpu", default=None,
                   help="the collections' GPU (device database name; default: each collection's Device column)")
    p.add_argument("--exclude-workloads", default=None,
                   help="comma-separated traced workloads whose ops are left out of the table")
    args = p.parse_args(argv)
    excluded = {w for w in (args.exclude_workloads or "").split(",") if w}
    data = [x for x in samples(args.traces) if x.workload not in excluded]
    for directory in (args.collections or "").split(","):
        if directory:
            from habitat.learned import family_table

            gpu = args.collection_gpu or family_table.collection_gpu(Path(directory))
            extra = family_table.samples(Path(directory), gpu)
            print(f"{directory}: {len(extra)} samples ({family_table.describe(extra)})", flush=True)
            data += extra
    table = fit(data)
    if args.lowo:
        for cls, per in lowo(data).items():
            for wl, e in per.items():
                s = e["per_op_ge5us"]
                print(f"{cls:12s} {wl:14s} per op >= 5 us: n {s.get('n', 0):4d} mean "
                      f"{s.get('mean', float('nan')):6.1f} %   class kernel sum {e['sum_error_pct']:+6.1f} %")
    if args.out:
        doc = {"format": FORMAT, "version": FORMAT_VERSION, **table,
               "source": "recorded Hopper training steps (habitat.learned.traces.RUNS) and the device-time "
                         "kernel collections given (habitat.learned.family_table): roofline / CUPTI kernel "
                         "time per op name, element width and layout, per op and width, per op, per class",
               "training_command": "python -m habitat.learned.roofline_table "
                                   + " ".join(argv if argv is not None else sys.argv[1:])}
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "roofline.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
