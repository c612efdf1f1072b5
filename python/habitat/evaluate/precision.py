"""Per-op accuracy on a device-time kernel collection (benchmarks/gpu/collect_kernels.py, `Kernel
Latency`: CUPTI durations, no harness): each row forecast as the engine forecasts that op on the
collection's GPU, against the kernels measured.

    python -m habitat.evaluate precision [--data DIR] [--all-rows] [--json OUT]

By default the rows are the held-out problems of the models' own split (the first device-time
collection they trained on, TEST_FRACTION of its problems with the recorded seed: metadata
"split"), recomputed here, so the figure can be checked from the repository alone. `--all-rows`
scores every row of DIR instead: for a collection the models never saw (the shapes a collection's
owner kept aside).

How each row is forecast (csrc/src/learned/learned_model.cpp LearnedModels::predict_us):
- GEMM in fp32 (TF32 off): the FP32 SIMT forecast; TF32: a batched one (bmm) the faster of the
  TF32 and the FP32 SIMT forecasts (cuBLAS picks), an unbatched one (linear) the TF32 forecast;
  bf16, fp16: their own.
- Convolution: channels-last, the tensor-core pass; NCHW in a 16-bit precision, the pass plus
  cuDNN's layout transforms (habitat.learned.conv_layout); NCHW TF32, the faster of that and the
  FP32 SIMT pass; fp32, the FP32 SIMT pass. An NCHW 1x1 stride-1 pass in a 16-bit precision or
  TF32 may also run as a GEMM on the tensors as they lie (a weight gradient: per-image partials
  and their sum over the batch): the faster of that too. Against
  `Kernel Latency` (transforms included).
- SDPA: each fused backend's forward against its device time. The backward's device time was not
  collected (the collection's README): it is scored against fwd+bwd's per-call time less the
  forward's device time, through the harness model (one floor per backend and precision, the
  median fitted one), and reported apart.
- Layer norm and softmax, forward and backward: against their device time.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from habitat.data.checkout import checkout_path
from habitat.learned import conv_layout, harness
from habitat.learned.devices import DeviceTable
from habitat.learned.fitting import ape, summary
from habitat.learned.model import EfficiencyMLP
from habitat.learned.neusight import (
    CONV_GRAD,
    ELEM_BYTES,
    OP_FAMILY,
    SDPA_BACKENDS,
    is_depthwise,
    load_sdpa,
    row_shape,
)
from habitat.learned.train import TEST_FRACTION, leave_shapes_out

DEFAULT_DATA = Path("benchmarks") / "results" / "kernels" / "H100-SXM5-80GB-2026-11-26"  # in the checkout
FAMILIES = ("gemm", "conv", "attention", "layernorm", "softmax")
SIXTEEN_BIT = ("bf16", "fp16")


def default_data() -> Path:
    """The committed H100 device-time collection (see habitat.data.checkout)."""
    return checkout_path(DEFAULT_DATA)


def read_rows(data: Path, family: str) -> list[dict]:
    """The collection's rows of `family` with their nominal precision, layout, shape and device
    time (us); SDPA through load_sdpa (its backward per call where the collection lost its kernels)."""
    out: list[dict] = []
    if family == "attention":
        for path in sorted(data.glob("sdpa*.csv")):
            rows = load_sdpa(path, "kernel")
            for i in range(len(rows)):
                shape = {c: float(v[i]) for c, v in rows.shapes.items()}
                backend = next(b for b, v in SDPA_BACKENDS.items() if v == shape["backend"])
                out.append({"op": f"{rows.op[i]}:{backend}", "precision": str(rows.precision[i]), "layout": "",
                            "device": str(rows.device[i]), "shape": shape, "us": float(rows.latency_us[i]),
                            "timing": str(rows.timing[i])})
        return out
    for path in sorted(data.glob("*.csv")):
        if path.stem.startswith("sdpa"):
            continue
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                phase = r.get("Phase") or "fwd"
                op = r["OPName"] if phase == "fwd" else f"{r['OPName']}_{phase}"
                if OP_FAMILY.get(op) != family or "Kernel Latency" not in r or is_depthwise(r):
                    continue
                if family == "conv" and phase != "fwd" and phase not in CONV_GRAD:
                    continue
                us = float(r["Kernel Latency"]) * 1e3
                if not us > 0:
                    continue
                out.append({"op": op, "precision": r["Precision"], "layout": r.get("Layout") or "",
                            "device": r["Device"], "shape": row_shape(op, r, ELEM_BYTES[r["Precision"]]),
                            "us": us, "timing": "device"})
    return out


def _predict(model: EfficiencyMLP, rows: list[dict], precision: str, devices: DeviceTable) -> np.ndarray:
    out = np.zeros(len(rows))
    for dev in sorted({r["device"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["device"] == dev]
        shapes = {c: np.array([rows[i]["shape"][c] for i in idx]) for c in rows[idx[0]]["shape"]}
        out[idx] = model.predict(shapes, devices.find(dev), precision)
    return out


def pointwise_gemm_shape(conv: dict[str, float]) -> dict[str, float] | None:
    """An NCHW 1x1 stride-1 unpadded convolution pass as the GEMM cuDNN runs on the tensors as
    they lie, one per image (csrc/src/learned/learned_model.cpp nchw_pointwise_gemm_us); None for
    other passes. A weight gradient's GEMM writes per-image partials (pointwise_reduce_shape)."""
    if conv["kernel"] != 1 or conv["stride"] != 1 or conv["padding"] != 0:
        return None
    pixels = conv["size"] ** 2
    batch, cin, cout = _per_group(conv)
    if conv["grad"] == 2:
        return {"b": batch, "m": cout, "k": pixels, "n": cin, "elem_bytes": conv["elem_bytes"]}
    m, k = (cin, cout) if conv["grad"] == 1 else (cout, cin)
    return {"b": batch, "m": m, "k": k, "n": pixels, "elem_bytes": conv["elem_bytes"]}


def _per_group(conv: dict[str, float]) -> tuple[float, float, float]:
    """Images x groups, and one group's input and output channels."""
    g = conv.get("groups", 1.0)
    return conv["batch"] * g, conv["cin"] / g, conv["cout"] / g


def pointwise_reduce_shape(conv: dict[str, float]) -> dict[str, float]:
    """The sum of a weight gradient's per-image fp32 partials over the batch (cuDNN's
    reduce_wgrad_nchw_helper), as a reduction part."""
    batch, cin, cout = _per_group(conv)
    return {"rows": cout * cin, "cols": batch, "elem_bytes": 4.0, "strided": 1.0}


def forecast(model: EfficiencyMLP, rows: list[dict], devices: DeviceTable,
             gemm: EfficiencyMLP | None = None, reduction: EfficiencyMLP | None = None) -> np.ndarray:
    """Each row's forecast as the engine makes it (see the module docstring); `gemm` and
    `reduction`: the models of the NCHW 1x1 convolutions cuDNN runs as GEMMs (a weight gradient
    then sums its per-image partials)."""
    out = np.zeros(len(rows))
    for p in sorted({r["precision"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["precision"] == p]
        sub = [rows[i] for i in idx]
        own = _predict(model, sub, p, devices)
        if model.family == "conv":
            _add_transforms(own, sub, p, devices)
        if p == "tf32" and model.family in ("gemm", "conv"):
            simt = np.array([model.family == "conv" or r["shape"]["b"] > 1 for r in sub])
            if simt.any():
                own[simt] = np.minimum(own[simt], _predict(model, [r for r, s in zip(sub, simt) if s], "fp32", devices))
        if p in SIXTEEN_BIT and model.family == "conv":
            _take_simt_forward(own, sub, model, devices)
        if model.family == "conv" and gemm is not None and reduction is not None \
                and p in conv_layout.TRANSFORM_PRECISIONS:
            _take_pointwise_gemm(own, sub, p, devices, gemm, reduction)
        if model.family == "attention":
            calls = np.array([r["timing"] == "call" for r in sub])
            if calls.any():
                own = np.where(calls, harness.harness_time("attention", backward_floor_us(model, p), own), own)
        out[idx] = own
    return out


def _add_transforms(own: np.ndarray, rows: list[dict], precision: str, devices: DeviceTable) -> None:
    """cuDNN's layout transforms around each NCHW conv row's tensor-core pass (`own`, in place)."""
    if precision not in conv_layout.TRANSFORM_PRECISIONS:
        return
    for j, r in enumerate(rows):
        if r["layout"] in ("nchw", ""):
            own[j] += float(conv_layout.transform_us(
                {c: np.array([v]) for c, v in r["shape"].items()}, devices.find(r["device"]))[0])


def _take_simt_forward(own: np.ndarray, rows: list[dict], model: EfficiencyMLP, devices: DeviceTable) -> None:
    """Each 16-bit NCHW 2-D forward conv row's forecast (`own`, in place): the faster of its
    pass and its FP32 twin's, as cuDNN's SIMT kernels run some (learned_model.cpp
    nchw_simt_forward_us)."""
    simt = np.array([r["layout"] in ("nchw", "") and r["shape"]["grad"] == 0
                     and not r["op"].startswith("conv3d") for r in rows])
    if simt.any():
        fp32 = [{**r, "shape": {**r["shape"], "elem_bytes": 4.0}} for r, s in zip(rows, simt) if s]
        own[simt] = np.minimum(own[simt], _predict(model, fp32, "fp32", devices))


def _take_pointwise_gemm(own: np.ndarray, rows: list[dict], precision: str, devices: DeviceTable,
                         gemm: EfficiencyMLP, reduction: EfficiencyMLP) -> None:
    """Each NCHW 1x1 stride-1 conv row's forecast (`own`, in place): the faster of its pass and
    the GEMMs cuDNN runs on the tensors as they lie (a weight gradient's with its partials' sum)."""
    as_gemm = {j: g for j, r in enumerate(rows)
               if r["layout"] in ("nchw", "") and (g := pointwise_gemm_shape(r["shape"])) is not None}
    if not as_gemm:
        return
    t = _predict(gemm, [{**rows[j], "shape": g} for j, g in as_gemm.items()], precision, devices)
    wgrad = [i for i, j in enumerate(as_gemm) if rows[j]["shape"]["grad"] == 2]
    if wgrad:
        t[wgrad] += _predict(reduction, [{**rows[j], "shape": pointwise_reduce_shape(rows[j]["shape"])}
                                         for j in np.array(list(as_gemm))[wgrad]], "fp32", devices)
    own[list(as_gemm)] = np.minimum(own[list(as_gemm)], t)


def backward_floor_us(model: EfficiencyMLP, precision: str) -> float:
    """The harness floor fitted under the collections' per-call SDPA backward rows of
    `precision` (their median over the collections; over every precision if none has it)."""
    floors = model.metadata.get("fitted_floors_us", {})
    mine = [v for k, v in floors.items() if k.endswith(f"|sdpa_bwd|{precision}")]
    every = [v for k, v in floors.items() if "|sdpa_bwd|" in k]
    return float(np.median(mine or every)) if (mine or every) else 0.0


def _arrays(rows: list[dict], family: str):
    from habitat.learned.neusight import KernelTable
    table = KernelTable(family)
    for r in rows:
        table.add(r["op"].split(":")[0], r["device"], r["us"], 0.0, r["shape"], 0, r["precision"])
    return table.arrays()


def held_out(rows: list[dict], model: EfficiencyMLP, siblings: Path | None = None) -> np.ndarray:
    """The rows of the model's held-out problems (its metadata's split, recomputed). Training
    holds a problem out of every collection when any split collection's fifth holds it
    (habitat.learned.train.train_family): with `siblings`, the folder holding the split's
    collections, so does this."""
    split = model.metadata.get("split", {})
    fraction, seed = split.get("test_fraction", TEST_FRACTION), split.get("seed", 0)
    arrays = _arrays(rows, model.family)
    mask = leave_shapes_out(arrays, fraction, seed)
    if siblings is None:
        return mask
    keys = [arrays.problem_keys()[mask]]
    for name in sorted(split_collections(split)):
        other = siblings / name
        if other.is_dir() and (other_rows := read_rows(other, model.family)):
            other_arrays = _arrays(other_rows, model.family)
            keys.append(other_arrays.problem_keys()[leave_shapes_out(other_arrays, fraction, seed)])
    return np.isin(arrays.problem_keys(), np.concatenate(keys))


def split_collections(split: dict) -> set[str]:
    """The collections a model's held-out problems were drawn from (each its own fifth; older
    weights name only the first, `collection`)."""
    names = split.get("collections") or [split.get("collection", "")]
    return {n.removeprefix("collection:") for n in names}


def _group(r: dict) -> str:
    return f"{r['op']}{'/' + r['layout'] if r['layout'] else ''}"


def evaluate(data: Path, weights: Path, devices: DeviceTable, all_rows: bool = False,
             families: tuple[str, ...] = FAMILIES) -> dict:
    out: dict = {"data": str(data), "rows": "all" if all_rows else "held-out problems of the models' split"}
    unsplit: list[str] = []
    for family in families:
        if not (weights / f"{family}.safetensors").is_file():
            continue
        model = EfficiencyMLP.load(weights, family)
        rows = read_rows(data, family)
        if not rows:
            continue
        if not all_rows:
            # A model trained without this collection has no held-out problems in it (a model
            # retrained on a new GPU's rows may sit beside others that were not).
            if data.name not in split_collections(model.metadata.get("split", {})):
                unsplit.append(family)
                continue
            mask = held_out(rows, model, siblings=data.parent)
            rows = [r for r, m in zip(rows, mask) if m]
        gemm, reduction = (EfficiencyMLP.load(weights, f) if family == "conv" and (weights / f"{f}.safetensors").is_file()
                           else None for f in ("gemm", "reduction"))
        pred = forecast(model, rows, devices, gemm, reduction)
        meas = np.array([r["us"] for r in rows])
        err = ape(pred, meas)
        per: dict = {}
        for p in sorted({r["precision"] for r in rows}):
            for g in sorted({_group(r) for r in rows if r["precision"] == p}):
                sel = np.array([r["precision"] == p and _group(r) == g for r in rows])
                per.setdefault(p, {})[g] = {**summary(err[sel]),
                                            "signed_mean": float(np.mean((pred[sel] - meas[sel]) / meas[sel]) * 100)}
            sel = np.array([r["precision"] == p for r in rows])
            per[p]["all"] = summary(err[sel])
        out[family] = per
    if unsplit:
        if not any(isinstance(v, dict) for v in out.values()):
            raise ValueError(f"no model in {weights} was split on {data.name}: pass --all-rows to score every row of "
                             "a collection the models never saw")
        out["not_split_on_it"] = unsplit
    return out


def print_report(results: dict) -> None:
    print(f"\n== Per op on {results['data']} ({results['rows']}): forecast vs device time, mean / median / p90 "
          "absolute % error, signed mean %")
    if results.get("not_split_on_it"):
        print(f"(not trained on this collection, so no held-out rows in it: {', '.join(results['not_split_on_it'])}; "
              "--all-rows scores every row)")
    for family, per in results.items():
        if not isinstance(per, dict):
            continue
        print(f"\n-- {family}")
        print(f"{'precision':9s} {'op (layout)':28s} | {'n':>5s} {'mean':>7s} {'median':>7s} {'p90':>7s} {'signed':>7s}")
        for p, groups in per.items():
            for g, s in groups.items():
                if g == "all" or not s.get("n"):
                    continue
                print(f"{p:9s} {g:28s} | {s['n']:5d} {s['mean']:7.1f} {s['median']:7.1f} {s['p90']:7.1f} "
                      f"{s['signed_mean']:+7.1f}")
