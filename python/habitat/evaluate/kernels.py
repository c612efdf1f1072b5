"""Per-kernel accuracy on NeuSight-format CSVs: shape-based on GPUs the model never saw
(leave-one-GPU-out), and runtime-based for every ordered pair of GPUs with common shapes.

NeuSight timed each op call on its own, so every row includes a 25-60 us per-call harness
floor; "ours" is the model's floor-free kernel time merged with the harness floor measured on
the model's training GPUs (EfficiencyMLP.predict_harness), never the target's own floor."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from habitat.evaluate import predictors as P
from habitat.learned.devices import DeviceTable
from habitat.learned.neusight import ELEMENTWISE_OPS, KernelArrays, load_kernels

# Report groups: GEMMs split as NeuSight reports them (BMM vs FC).
GROUPS = {"bmm": ("gemm", {"bmm"}), "linear": ("gemm", {"linear"}), "conv": ("conv", {"conv"}),
          "elementwise": ("elementwise", None), "softmax": ("softmax", {"softmax"}), "ln": ("layernorm", {"ln"})}


def _subsample(rows: KernelArrays, limit: int, seed: int = 0) -> KernelArrays:
    """At most `limit` distinct shapes, kept on every GPU (so pairs still match)."""
    keys = rows.shape_keys()
    unique = np.unique(keys)
    if len(unique) <= limit:
        return rows
    keep = set(np.random.default_rng(seed).choice(unique, limit, replace=False).tolist())
    return rows.take(np.array([k in keep for k in keys]))


def _select(rows: KernelArrays, ops: set[str] | None) -> KernelArrays:
    return rows if ops is None else rows.take(np.isin(rows.op, sorted(ops)))


def _shape_based(rows: KernelArrays, models: P.ModelSet, devices: DeviceTable, targets: set[str] | None):
    out = {}
    for gpu in sorted(np.unique(rows.device)):
        dev = devices.try_find(gpu)
        if dev is None or (targets and gpu not in targets):
            continue
        sub = rows.take(rows.device == gpu)
        model, how = models.for_target(rows.family, gpu)
        if model is None:
            continue
        ours = model.predict_harness(sub.shapes, dev, sub.op)
        roof = P.roofline_us(rows.family, sub.shapes, dev)
        out[gpu] = {"model": how, "ours": P.stats(P.errors(ours, sub.latency_us)),
                    "roofline": P.stats(P.errors(roof, sub.latency_us))}
    return out


def _runtime_based(rows: KernelArrays, models: P.ModelSet, devices: DeviceTable,
                   origins: set[str] | None, targets: set[str] | None):
    keys = rows.shape_keys()
    gpus = [g for g in sorted(np.unique(rows.device)) if devices.try_find(g) is not None]
    index = {g: {k: i for i, k in enumerate(keys) if rows.device[i] == g} for g in gpus}
    flops, nbytes = P.work(rows.family, rows.shapes)
    out = {}
    for o in gpus:
        for t in gpus:
            if o == t or (origins and o not in origins) or (targets and t not in targets):
                continue
            common = sorted(set(index[o]) & set(index[t]))
            if not common:
                continue
            io = np.array([index[o][k] for k in common])
            it = np.array([index[t][k] for k in common])
            do, dt = devices.find(o), devices.find(t)
            model, how = models.for_target(rows.family, t)
            if model is None:
                continue
            shapes, ops = rows.take(io).shapes, rows.op[io]
            t_o, t_t = rows.latency_us[io], rows.latency_us[it]
            shape_t = model.predict_harness(shapes, dt, ops)
            ratio = t_o * shape_t / model.predict_harness(shapes, do, ops)
            roof = t_o * P.roofline_us(rows.family, shapes, dt) / P.roofline_us(rows.family, shapes, do)
            threads = None if rows.threads is None else rows.threads[io]
            wave = P.habitat_wave_scaling(t_o, flops[io], nbytes[io], rows.blocks[io], do, dt,
                                          threads=threads, devices_json=devices.path)
            bw = P.bandwidth_ratio(t_o, do, dt)
            out[f"{o} -> {t}"] = {
                "model": how, "ours_ratio": P.stats(P.errors(ratio, t_t)),
                "ours_shape": P.stats(P.errors(shape_t, t_t)),
                "ours_geomean": P.stats(P.errors(np.sqrt(ratio * shape_t), t_t)),
                "roofline_ratio": P.stats(P.errors(roof, t_t)),
                "habitat_wave_scaling": P.stats(P.errors(wave, t_t)),
                "habitat_bandwidth_ratio": P.stats(P.errors(bw, t_t))}
    return out


def evaluate(data: Path, models: P.ModelSet, devices: DeviceTable, quick: bool = False,
             origins: set[str] | None = None, targets: set[str] | None = None,
             groups: set[str] | None = None) -> dict:
    results: dict = {"shape_based": {}, "runtime_based": {}}
    for layout in ("kernels", "test"):
        if not (data / layout).is_dir():
            continue
        wanted = None if not groups else {op for g in groups for op in (GROUPS[g][1] or ELEMENTWISE_OPS)}
        tables = load_kernels(data, layout, wanted)
        for group, (family, ops) in GROUPS.items():
            if family not in tables or (groups and group not in groups):
                continue
            rows = _select(tables[family], ops)
            if len(rows) == 0:
                continue
            if quick:
                rows = _subsample(rows, 60)
            results["shape_based"].setdefault(layout, {})[group] = _shape_based(rows, models, devices, targets)
            results["runtime_based"].setdefault(layout, {})[group] = _runtime_based(
                rows, models, devices, origins, targets)
    return results


def _fmt(s: dict) -> str:
    return f"{s['mean']:7.1f} {s['median']:7.1f} {s['p90']:7.1f}" if s.get("n") else "      -       -       -"


def print_report(results: dict) -> None:
    print("\n== Shape-based, per GPU (target never in that model's training data unless marked 'seen')")
    print("   errors: mean / median / p90 absolute % error")
    for layout, groups in results["shape_based"].items():
        print(f"\n-- {layout}/ --")
        print(f"{'op':12s} {'GPU':24s} {'n':>6s} {'model':>18s} | {'ours mean/med/p90':>23s} | "
              f"{'roofline mean/med/p90':>23s} | anchor")
        for group, per_gpu in groups.items():
            for gpu, r in per_gpu.items():
                anchor = P.ANCHORS_KERNEL.get(group)
                print(f"{group:12s} {gpu:24s} {r['ours']['n']:6d} {r['model']:>18s} | {_fmt(r['ours'])} | "
                      f"{_fmt(r['roofline'])} | {anchor if anchor is not None else '-'}")
    print("\n== Runtime-based (measured on origin, predicted on target): mean absolute % error")
    for layout, groups in results["runtime_based"].items():
        print(f"\n-- {layout}/ --")
        print(f"{'op':12s} {'origin -> target':50s} {'n':>6s} | {'ours':>7s} {'shape':>7s} {'geo':>7s} {'roofRat':>7s} "
              f"{'habWave':>7s} {'habBW':>7s}")
        for group, pairs in groups.items():
            for pair, r in pairs.items():
                print(f"{group:12s} {pair:50s} {r['ours_ratio']['n']:6d} | {r['ours_ratio']['mean']:7.1f} "
                      f"{r['ours_shape']['mean']:7.1f} {r['ours_geomean']['mean']:7.1f} {r['roofline_ratio']['mean']:7.1f} "
                      f"{r['habitat_wave_scaling']['mean']:7.1f} {r['habitat_bandwidth_ratio']['mean']:7.1f}")
    print("\n== Summary: mean over GPUs (shape-based) / over pairs (runtime-based) of the mean % error")
    print(f"{'layout':8s} {'op':12s} | {'shape ours':>10s} {'roofline':>9s} | {'rt ours':>8s} {'rt shape':>8s} {'rt geo':>8s} "
          f"{'roofRat':>8s} {'habWave':>8s} {'habBW':>8s} | anchor")
    for layout in results["shape_based"]:
        for group in results["shape_based"][layout]:
            sb = results["shape_based"][layout][group]
            rb = results["runtime_based"].get(layout, {}).get(group, {})
            unseen = [r for r in sb.values() if r["model"] != "seen" and r["ours"].get("n")]

            def avg(items, key):
                vals = [x[key]["mean"] for x in items if x[key].get("n")]
                return f"{np.mean(vals):8.1f}" if vals else "       -"
            anchor = P.ANCHORS_KERNEL.get(group)
            print(f"{layout:8s} {group:12s} | {avg(unseen, 'ours'):>10s} {avg(unseen, 'roofline'):>9s} | "
                  f"{avg(rb.values(), 'ours_ratio')} {avg(rb.values(), 'ours_shape')} {avg(rb.values(), 'ours_geomean')} "
                  f"{avg(rb.values(), 'roofline_ratio')} {avg(rb.values(), 'habitat_wave_scaling')} "
                  f"{avg(rb.values(), 'habitat_bandwidth_ratio')} | {anchor if anchor is not None else '-'}")
