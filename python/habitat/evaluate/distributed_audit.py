"""Where the per-rank compute forecast of the distributed evaluation stands, checked against what
was measured (habitat.evaluate.distributed; benchmarks/accuracy/neusight_distributed/README.md).

1. The forward and backward time per sample each data- or pipeline-parallel label implies: the
   label minus what the forecast adds to the single-GPU forward and backward (collectives,
   optimizer), over the samples a rank runs (dp: its own batch; pp: the global batch, every stage
   in turn). Tensor-parallel ranks run a share of the matrix products: no per-sample time.
2. NeuSight's own per-node measurements of the HF trace on the GPU that traced it against
   Habitat's shape-based forecast for that GPU, matrix products apart from the rest: which
   kernels the shape-based forecast over- or under-estimates.
3. The small-batch penalty per sample by kernel group, between the smallest and the largest
   traced batch: measured on the tracing GPU, forecast there, and forecast on the target.

Nothing here changes a forecast; it locates the error.
"""
from __future__ import annotations

from pathlib import Path

from habitat.evaluate import models as M
from habitat.evaluate import predictors as P
from habitat.evaluate.distributed_labels import Node, TraceChoice, trace_batches, trace_nodes
from habitat.evaluate.megatron_layer import megatron_gpt
from habitat.learned.devices import DeviceTable


def as_megatron(nodes: list[Node], origin) -> list[Node]:
    """The HF trace with Megatron's default fusions applied to its transformer layer."""
    hidden_node = next(n for n in nodes if n.work.repeat > 1 and n.work.parts.get("fw") and
                       n.work.parts["fw"][0].family == "layernorm")
    hidden = hidden_node.out_shape[-1]
    return [Node(w, nodes[k].out_shape) for w, k in megatron_gpt([n.work for n in nodes], hidden, origin)]


def compute_audit(results: dict, trace_folder: Path, model: str, seq: int, target: str,
                  models: P.ModelSet, devices: DeviceTable) -> dict:
    """The three checks above for the labels in `results` (habitat.evaluate.distributed.evaluate)
    and the traces of `model` at `seq` in `trace_folder`; `target` names the labels' GPU folder."""
    origin = devices.find(trace_folder.name)
    predict = M._model_predictor(models, origin, target)
    out: dict = {"trace_gpu": trace_folder.name, "implied_per_sample_ms": {}, "origin_kernels": {}}
    for stem, e in results["configs"].items():
        if e["parallelism"].startswith("TP"):
            continue  # a TP rank runs a share of the matrix products: no single-GPU per-sample time
        row = {"samples_per_rank": e["single_gpu_batch"]}
        for method in ("shape", "runtime"):
            r = e[method]
            added = r["predicted_ms"] - r["single_gpu_fwd_bwd_ms"]
            row[f"{method}_forecast"] = round(r["single_gpu_fwd_bwd_ms"] / row["samples_per_rank"], 1)
            row[f"implied_by_label_{method}_adds"] = round((e["measured_ms"] - added) / row["samples_per_rank"], 1)
        out["implied_per_sample_ms"][stem] = row
    batches = trace_batches(trace_folder, model, seq)
    for batch in batches:
        nodes = M.load_config(trace_folder / f"{model}-train-{seq}-{batch}.csv", training=True)
        sums = {k: [0.0, 0.0] for k in ("gemm", "other modelled", "not modelled")}
        for n in nodes:
            for phase in ("fw", "bw", "acc"):
                measured = n.repeat * n.measured.get(phase, 0.0)
                parts = n.parts.get(phase)
                if not parts:
                    sums["not modelled"][0] += measured
                    continue
                key = "gemm" if all(p.family == "gemm" for p in parts) else "other modelled"
                sums[key][0] += measured
                sums[key][1] += n.repeat * M._parts_time(parts, predict)
        out["origin_kernels"][f"batch {batch}"] = {
            k: {"measured_ms": round(m / 1e3, 1), "forecast_ms": round(f / 1e3, 1),
                "forecast_over_measured": round(f / m, 3) if m > 0 and f > 0 else None}
            for k, (m, f) in sums.items()}
    if len(batches) >= 2:
        out["batch_penalty_by_kernel"] = batch_penalty_by_kernel(
            trace_folder, model, seq, (batches[0], batches[-1]), target, models, devices)
    return out


def _kernel_group(node: Node, phase: str) -> str | None:
    parts = node.work.parts.get(phase) or []
    if not parts:
        return None
    if parts[0].family != "gemm":
        return parts[0].family
    if node.work.name.startswith("matmul"):
        return "attention bmm"
    return "LM head GEMM" if node.work.name == "lm_head" else "linear GEMMs"


def batch_penalty_by_kernel(trace_folder: Path, model: str, seq: int, batches: tuple[int, int], target: str,
                            models: P.ModelSet, devices: DeviceTable) -> dict:
    """Per kernel group, the forward and backward per sample at the small and the large batch
    (ms): NeuSight's measured HF nodes on the tracing card, the shape-based forecast for that
    card, and the shape-based Megatron forecast for the target. Where the forecast's small-batch
    penalty comes from, and whether the card with per-kernel measurements shows it."""
    origin, dev = devices.find(trace_folder.name), devices.find(target)
    po, pt = M._model_predictor(models, origin, target), M._model_predictor(models, dev, target)
    sums: dict[str, dict[str, list[float]]] = {}
    for i, batch in enumerate(batches):
        hf = trace_nodes(TraceChoice(trace_folder, batch, batch), model, seq, po)
        for source, nodes, predict in (("origin_measured", hf, None), ("origin_forecast", hf, po),
                                       ("target_forecast", as_megatron(hf, po), pt)):
            for n in nodes:
                for phase in ("fw", "bw", "acc"):
                    group = _kernel_group(n, phase)
                    if group is None:
                        continue
                    t = n.work.measured.get(phase, 0.0) if predict is None else M._parts_time(n.work.parts[phase], predict)
                    row = sums.setdefault(group, {}).setdefault(source, [0.0, 0.0])
                    row[i] += n.work.repeat * t / batch / 1e3
    total: dict[str, list[float]] = {}
    for row in sums.values():
        for source, (small, large) in row.items():
            acc = total.setdefault(source, [0.0, 0.0])
            acc[0], acc[1] = acc[0] + small, acc[1] + large
    sums["all modelled"] = total
    return {"batches": list(batches), "groups": {
        group: {source: {"small_batch_ms": round(s, 1), "large_batch_per_sample_ms": round(b, 1),
                         "penalty_pct": round((s - b) / b * 100, 1) if b > 0 else None}
                for source, (s, b) in row.items()} for group, row in sums.items()}}


def print_audit(audit: dict) -> None:
    print("\n== Per-rank compute: forward + backward per sample (ms)")
    print(f"{'label':34s} {'samples':>7s} | {'shape fc':>8s} {'label-implied':>13s} | "
          f"{'runtime fc':>10s} {'label-implied':>13s}")
    for stem, r in audit["implied_per_sample_ms"].items():
        print(f"{stem:34s} {r['samples_per_rank']:7d} | {r['shape_forecast']:8.1f} "
              f"{r['implied_by_label_shape_adds']:13.1f} | {r['runtime_forecast']:10.1f} "
              f"{r['implied_by_label_runtime_adds']:13.1f}")
    penalty = audit.get("batch_penalty_by_kernel")
    if penalty:
        small, large = penalty["batches"]
        print(f"\n== Batch-{small} penalty per sample by kernel group (ms per sample, batch {small} / batch {large})")
        for group, row in penalty["groups"].items():
            cells = "  ".join(f"{src}: {r['small_batch_ms']:6.1f}/{r['large_batch_per_sample_ms']:6.1f} "
                              f"{r['penalty_pct']:+5.1f}%" for src, r in row.items())
            print(f"{group:14s} {cells}")
    print(f"\n== NeuSight's measured HF nodes on the {audit['trace_gpu']} vs Habitat's shape-based forecast there (ms)")
    for batch, groups in audit["origin_kernels"].items():
        for k, g in groups.items():
            ratio = f"{g['forecast_over_measured']:.3f}" if g["forecast_over_measured"] else "-"
            print(f"{batch:8s} {k:15s} measured {g['measured_ms']:8.1f}  forecast {g['forecast_ms']:8.1f}  "
                  f"forecast/measured {ratio}")
