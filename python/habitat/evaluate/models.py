"""End-to-end accuracy on NeuSight's labels/: per-node shapes and measured latencies of real
models (one transformer layer traced, replicated num_layer times)."""
from __future__ import annotations

import ast
import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from habitat.evaluate import predictors as P
from habitat.learned.devices import DeviceSpec, DeviceTable

# Nodes of the first layer carry its module path; they repeat num_layer times.
_LAYER0 = re.compile(r"\.(layer|layers|h|block|blocks)\.0[.')]")
_CLASS = re.compile(r"<class '([^']+)'>")
_ELEMENTWISE_FN = {"add", "sub", "mul", "truediv", "pow", "where", "masked_fill", "gelu", "tanh", "relu",
                   "sigmoid", "neg", "exp", "rsqrt", "sqrt", "iadd", "floordiv", "baddbmm"}
_TRANSCENDENTAL = {"pow", "gelu", "tanh", "sigmoid", "exp", "rsqrt", "sqrt"}


@dataclass
class Part:
    family: str
    shape: dict[str, float]
    scale: float = 1.0


@dataclass
class NodeWork:
    name: str
    repeat: int
    measured: dict[str, float]  # fw, bw, acc in microseconds
    parts: dict[str, list[Part]] = field(default_factory=dict)  # fw/bw/acc -> parts


def _prod(xs) -> float:
    return float(np.prod(xs)) if len(xs) else 1.0


def _gemm(b, m, n, k) -> Part:
    return Part("gemm", {"b": b, "m": m, "n": n, "k": k, "elem_bytes": 4.0})


def _elem(n: float, inputs: float, trans: bool = False) -> Part:
    return Part("elementwise", {"n": n, "inputs": inputs, "transcendental": float(trans), "elem_bytes": 4.0})


def _fn_name(target: str) -> str:
    m = re.search(r"(?:function|method) ([A-Za-z_]+)", target)
    return m.group(1) if m else target.split(".")[-1]


def _row_parts(family: str, rows: float, cols: float) -> tuple[Part, Part]:
    """A layer norm's or softmax's forward and backward: the models have a `backward` column
    (the engine forecasts the backward kernel through it too)."""
    shape = {"rows": rows, "cols": cols, "elem_bytes": 4.0}
    return Part(family, {**shape, "backward": 0.0}), Part(family, {**shape, "backward": 1.0})


_BINARY_EXTREMUM = {"max", "min", "maximum", "minimum"}  # with two tensors: element-wise


def _extremum(n: float, full_inputs: float) -> dict[str, list[Part]]:
    """torch.max(a, b) (OPT's attention clamp against a one-element tensor) and its gradient as
    ATen's derivatives.yaml writes it for maximum/minimum: at::where(self == other, grad / 2,
    grad).masked_fill_(self < other, 0), five element-wise kernels."""
    compare = _elem(n, full_inputs)
    return {"fw": [_elem(n, full_inputs)],
            "bw": [compare, _elem(n, 1), _elem(n, 3), compare, _elem(n, 2)]}


def _dropout(n: float, training: bool) -> dict[str, list[Part]]:
    return {"fw": [_elem(n, 1)], "bw": [_elem(n, 2)]} if training else {}


def _module_parts(cls: str, x: list, out: list, n_out: float, training: bool) -> dict[str, list[Part]]:
    """An nn.Module node's work (x: its first input's shape)."""
    if cls == "Linear":
        k, n = float(x[-1]), float(out[-1])
        m = _prod(x[:-1])
        return {"fw": [_gemm(1, m, n, k)], "bw": [_gemm(1, m, k, n), _gemm(1, n, k, m)],
                "acc": [_elem(n * k + n, 2)]}
    if cls == "LayerNorm":
        cols = float(out[-1])
        fw, bw = _row_parts("layernorm", n_out / cols, cols)
        return {"fw": [fw], "bw": [bw], "acc": [_elem(2 * cols, 2)]}
    if cls == "Dropout":
        return _dropout(n_out, training)
    if cls == "Embedding":
        return {"fw": [_elem(n_out, 1)], "bw": [_elem(n_out, 1)]}
    if cls in ("GELU", "GELUActivation", "Tanh", "ReLU", "NewGELUActivation"):
        return {"fw": [_elem(n_out, 1, cls != "ReLU")], "bw": [_elem(n_out, 2)]}
    if cls == "Softmax":
        cols = float(out[-1])
        fw, bw = _row_parts("softmax", n_out / cols, cols)
        return {"fw": [fw], "bw": [bw]}
    return {}


def _function_parts(fn: str, ins: list, out: list, n_out: float, training: bool) -> dict[str, list[Part]]:
    """A call_function / call_method node's work."""
    if fn in ("matmul", "bmm") and len(ins) >= 2 and len(ins[0]) >= 2:
        a, b = ins[0], ins[1]
        m, k, n = float(a[-2]), float(a[-1]), float(b[-1])
        batch = n_out / (m * n)
        return {"fw": [_gemm(batch, m, n, k)], "bw": [_gemm(batch, m, k, n), _gemm(batch, k, n, m)]}
    if fn == "addmm" and len(ins) == 3:
        m, k, n = float(ins[1][0]), float(ins[1][1]), float(ins[2][1])
        return {"fw": [_gemm(1, m, n, k)], "bw": [_gemm(1, m, k, n), _gemm(1, k, n, m)],
                "acc": [_elem(k * n + n, 2)]}
    if fn == "softmax":
        cols = float(out[-1])
        fw, bw = _row_parts("softmax", n_out / cols, cols)
        return {"fw": [fw], "bw": [bw]}
    if fn == "contiguous":
        return {"fw": [_elem(n_out, 1)]}
    if fn == "dropout":  # F.dropout: as the Dropout module
        return _dropout(n_out, training)
    full_inputs = float(sum(1 for s in ins if _prod(s) == n_out))
    if fn in _BINARY_EXTREMUM and len(ins) == 2:
        return _extremum(n_out, full_inputs)
    if fn in _ELEMENTWISE_FN and n_out > 1:
        inputs = max(1.0, full_inputs)
        fw = [_elem(n_out, inputs, fn in _TRANSCENDENTAL)]
        if fn in ("add", "sub", "iadd"):
            return {"fw": fw}  # gradients pass through
        return {"fw": fw, "bw": [_elem(n_out, 2) for _ in range(int(inputs))]}
    return {}


def node_parts(row: dict[str, str], training: bool) -> dict[str, list[Part]]:
    """fw/bw/acc work of an fx node as learned-family parts (empty: no device work modelled)."""
    try:
        ins = ast.literal_eval(row["input_shapes"]) if row["input_shapes"] else []
        out = list(ast.literal_eval(row["output_shape"])) if row["output_shape"].startswith("(") else []
    except (ValueError, SyntaxError):
        return {}
    if row["dtype"] != "torch.float32" or not out:
        return {}
    n_out = _prod(out)
    classes = _CLASS.findall(row["meta"])
    if row["op"] == "call_module" and classes:
        return _module_parts(classes[-1].split(".")[-1], ins[0] if ins else out, out, n_out, training)
    if row["op"] in ("call_function", "call_method"):
        return _function_parts(_fn_name(row["target"]), ins, out, n_out, training)
    return {}


def load_config(csv_path: Path, training: bool) -> list[NodeWork]:
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    with open(csv_path, newline="") as f:
        return [node_work(row, int(meta["num_layer"]), training) for row in csv.DictReader(f)]


def node_work(row: dict[str, str], layers: int, training: bool) -> NodeWork:
    """One fx node of a trace CSV: its work, measured times (us) and repeat (`layers` for the
    nodes of the traced layer)."""
    repeat = layers if _LAYER0.search(row["meta"]) else 1
    measured = {k: float(row[f"{k}_latency"] or 0) * 1000.0 for k in ("fw", "bw", "acc")}
    parts = node_parts(row, training)
    if not training:
        parts = {"fw": parts.get("fw", [])} if parts else {}
        measured["bw"] = measured["acc"] = 0.0
    return NodeWork(row["Name"], repeat, measured, parts)


def _parts_time(parts: list[Part], predict) -> float:
    return sum(p.scale * predict(p) for p in parts)


def predict_config(nodes: list[NodeWork], predict) -> float:
    """Shape-based: sum over nodes of predicted part times (ms)."""
    return sum(n.repeat * _parts_time(ps, predict) for n in nodes for ps in n.parts.values()) / 1000.0


def runtime_config(origin: list[NodeWork], ratio) -> float:
    """Runtime-based: origin's measured node times, scaled per phase by `ratio(parts)`;
    nodes without modelled work carry over unscaled (as Habitat carries CPU overhead)."""
    total = 0.0
    for n in origin:
        for phase, t in n.measured.items():
            parts = n.parts.get(phase)
            total += n.repeat * (t * ratio(parts) if parts else t)
    return total / 1000.0


def _model_predictor(models: P.ModelSet, dev: DeviceSpec, gpu: str):
    cache: dict[tuple, float] = {}

    def predict(p: Part) -> float:
        key = (p.family, tuple(sorted(p.shape.items())))
        if key not in cache:
            model, _ = models.for_target(p.family, gpu)
            shapes = {c: np.array([v]) for c, v in p.shape.items()}
            cache[key] = float(model.predict(shapes, dev)[0]) if model else float(
                P.roofline_us(p.family, shapes, dev)[0])
        return cache[key]
    return predict


def _roofline_predictor(dev: DeviceSpec):
    def predict(p: Part) -> float:
        return float(P.roofline_us(p.family, {c: np.array([v]) for c, v in p.shape.items()}, dev)[0])
    return predict


def evaluate(data: Path, models: P.ModelSet, devices: DeviceTable, quick: bool = False,
             origins: set[str] | None = None, targets: set[str] | None = None) -> dict:
    labels = data / "labels"
    if not labels.is_dir():
        raise FileNotFoundError(f"{labels} not found: expected NeuSight's labels/ directory")
    configs: dict[str, dict[str, Path]] = {}
    skipped = set()
    for gpu_dir in sorted(p for p in labels.iterdir() if p.is_dir()):
        gpu = gpu_dir.name
        if devices.try_find(gpu) is None:
            skipped.add(gpu)
            continue
        for csv_path in sorted(gpu_dir.glob("*.csv")):
            configs.setdefault(csv_path.stem, {})[gpu] = csv_path
    if quick:
        configs = dict(list(sorted(configs.items()))[:3])
    results = {"configs": {}, "skipped_gpus": sorted(skipped)}
    for config, per_gpu in sorted(configs.items()):
        training = "-train-" in config
        loaded = {g: load_config(p, training) for g, p in per_gpu.items()}
        for gpu, path in per_gpu.items():
            if targets and gpu not in targets:
                continue
            measured = json.loads(path.with_suffix(".json").read_text())["e2e_latency"]
            dev = devices.find(gpu)
            ours = predict_config(loaded[gpu], _model_predictor(models, dev, gpu))
            roof = predict_config(loaded[gpu], _roofline_predictor(dev))
            node_sum = sum(n.repeat * sum(n.measured.values()) for n in loaded[gpu]) / 1000.0
            entry = {"measured_ms": round(measured, 3), "node_sum_ms": round(node_sum, 3),
                     "shape_ours_ms": round(ours, 3), "shape_roofline_ms": round(roof, 3), "runtime": {}}
            for origin in per_gpu:
                if origin == gpu or (origins and origin not in origins):
                    continue
                do = devices.find(origin)
                pt, po = _model_predictor(models, dev, gpu), _model_predictor(models, do, gpu)
                rt, ro = _roofline_predictor(dev), _roofline_predictor(do)

                def ours_ratio(parts, pt=pt, po=po):
                    return _parts_time(parts, pt) / _parts_time(parts, po)

                def roof_ratio(parts, rt=rt, ro=ro):
                    return _parts_time(parts, rt) / _parts_time(parts, ro)

                def wave(parts, do=do, dev=dev, db=devices.path):
                    flops = sum(float(P.work(p.family, {c: np.array([v]) for c, v in p.shape.items()})[0][0]) for p in parts)
                    nbytes = sum(float(P.work(p.family, {c: np.array([v]) for c, v in p.shape.items()})[1][0]) for p in parts)
                    return float(P.habitat_wave_scaling(np.array([1.0]), np.array([flops]), np.array([nbytes]),
                                                        None, do, dev, devices_json=db)[0])
                bw = do.bandwidth_gbs / dev.bandwidth_gbs
                entry["runtime"][origin] = {
                    "ours_ms": round(runtime_config(loaded[origin], ours_ratio), 3),
                    "roofline_ratio_ms": round(runtime_config(loaded[origin], roof_ratio), 3),
                    "habitat_wave_ms": round(runtime_config(loaded[origin], wave), 3),
                    "habitat_bandwidth_ms": round(
                        sum(n.repeat * sum(n.measured.values()) for n in loaded[origin]) * bw / 1000.0, 3)}
            results["configs"].setdefault(config, {})[gpu] = entry
    return results


def _err(pred: float, meas: float) -> float:
    return abs(pred - meas) / meas * 100.0


def print_report(results: dict) -> dict:
    print("\n== End-to-end (labels/): predicted vs measured e2e latency, % error")
    if results["skipped_gpus"]:
        print("   skipped (not in the device database): " + ", ".join(results["skipped_gpus"]))
    print(f"{'config':28s} {'GPU':24s} {'meas ms':>9s} | {'nodeSum':>7s} {'shape':>7s} {'roof':>7s} | "
          f"{'rt ours':>7s} {'roofRat':>7s} {'habWave':>7s} {'habBW':>7s}  (runtime: mean over origins)")
    agg: dict[str, dict[str, list[float]]] = {"train": {}, "inf": {}}
    for config, per_gpu in results["configs"].items():
        mode = "train" if "-train-" in config else "inf"
        for gpu, e in per_gpu.items():
            m = e["measured_ms"]
            cols = {"node_sum": _err(e["node_sum_ms"], m), "shape_ours": _err(e["shape_ours_ms"], m),
                    "shape_roofline": _err(e["shape_roofline_ms"], m)}
            for key in ("ours_ms", "roofline_ratio_ms", "habitat_wave_ms", "habitat_bandwidth_ms"):
                vals = [_err(r[key], m) for r in e["runtime"].values()]
                cols["rt_" + key[:-3]] = float(np.mean(vals)) if vals else float("nan")
            for k, v in cols.items():
                if not np.isnan(v):
                    agg[mode].setdefault(k, []).append(v)

            def f(v):
                return f"{v:7.1f}" if not np.isnan(v) else "      -"
            print(f"{config:28s} {gpu:24s} {m:9.1f} | {f(cols['node_sum'])} {f(cols['shape_ours'])} "
                  f"{f(cols['shape_roofline'])} | {f(cols['rt_ours'])} {f(cols['rt_roofline_ratio'])} "
                  f"{f(cols['rt_habitat_wave'])} {f(cols['rt_habitat_bandwidth'])}")
    summary = {mode: {k: round(float(np.mean(v)), 2) for k, v in cols.items()} for mode, cols in agg.items()}
    print("\n== Mean % error over configs and GPUs (NVIDIA GPUs in the device database)")
    for mode, cols in summary.items():
        print(f"{mode:6s} " + "  ".join(f"{k} {v:.1f}" for k, v in cols.items())
              + f"   | NeuSight anchor {P.ANCHORS_E2E[mode]}")
    return summary
