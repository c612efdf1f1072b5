"""Multi-GPU accuracy on NeuSight's distributed labels: GPT-2-large training with data, tensor and
pipeline parallelism on 4 GPUs, forecast from a single-GPU step, for any GPU whose labels folder
holds them (``<model>-train-<seq>-<B>-{dp4,tp4,pp4_1}.json``: habitat.evaluate.distributed_labels).

    python -m habitat.evaluate distributed [--data DIR] [--target GPU_DIR] [--json OUT]

What each label measured (NeuSight @6945927, scripts/asplos/run_label_distributed.py and
collect_label_distributed.py; accelerate 1.0.0 with Megatron-LM core_r0.5.0 per
scripts/asplos/install_megatron.sh), written down in benchmarks/accuracy/neusight_distributed/README.md:

- GPT-2-large (36 layers, hidden 1280, 20 heads, vocabulary 50257), sequence 1024, global batch B,
  FP32 (``--mixed_precision=no``; torch 2.1 leaves TF32 off for matmuls), no sequence parallelism,
  no activation recomputation, no distributed optimizer, gradient clipping 1.0, AdamW.
- The timed region is ``model(**batch)`` and ``accelerator.backward(loss)``; with the Megatron-LM
  plugin ``model(**batch)`` runs Megatron's whole ``train_step`` (forward and backward over the
  micro-batches, gradient all-reduce, optimizer step), so the step includes the optimizer.
  Mean of the 10 fastest of 50 steps.
- ``dp4``: 4 replicas of batch B/4; Megatron's DDP with ``overlap_grad_reduce`` off (its default)
  all-reduces every gradient after the backward pass, in one bucket.
- ``tp4``: one batch of B split over 4 tensor-parallel ranks (Megatron's column/row-parallel layers).
- ``pp4_1``: 4 pipeline stages of 9 layers, one micro-batch of B: no overlap between stages.

The single-GPU step is NeuSight's own per-node trace of the same model (``<model>-train-<seq>-<b>.csv``,
from the target's folder or the A100 80GB PCIe's: habitat.evaluate.distributed_labels):
**shape-based**, Habitat forecasts every node on the target from its shapes alone;
**runtime-based**, it scales the node times measured on the tracing GPU to the target, as Habitat
does with a user's own step. That trace is HuggingFace's GPT-2; it is first rewritten into the
kernels Megatron's GPT runs (habitat.evaluate.megatron_layer: its default fusions). The parallel
step model (habitat.analysis.parallel) and the collective model then add what the cluster does.
Nothing here is fitted to any label.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from habitat.analysis.cluster import Cluster
from habitat.analysis.parallel import StepWork, parallel_step
from habitat.analysis.tensor_shards import shard_ratio
from habitat.data.checkout import checkout_path
from habitat.evaluate import models as M
from habitat.evaluate import predictors as P
from habitat.evaluate.distributed_audit import as_megatron, compute_audit, print_audit
from habitat.evaluate.distributed_labels import Node, choose_trace, find_labels, trace_nodes
from habitat.learned.devices import DeviceTable

#: The repository's copy of the labels this evaluation needs (NeuSight's LICENSE beside them).
DATA_IN_REPO = Path("benchmarks") / "accuracy" / "neusight_distributed"
#: The labels CI evaluates: NeuSight's 4x A100-SXM4-40GB.
DEFAULT_TARGET = "NVIDIA_A100-SXM4-40GB"
#: NeuSight's own errors on its labels, as issue #16 quotes them (the A100 ones only).
NEUSIGHT_ERRORS = {DEFAULT_TARGET: {"gpt2_large-train-1024-4-dp4": 12.9, "gpt2_large-train-1024-4-tp4": 8.4,
                                    "gpt2_large-train-1024-4-pp4_1": 10.3}}

#: Does gradient clipping rescale the gradients in the timed steps? No: NeuSight's labels train on
#: a constant batch (collect_label_distributed.py ``DummyDataset``: every input id 1; accelerate's
#: GPT step appends the EOD token and shifts, so every label is 1 but the last), at lr 5e-5 with
#: Adam, no warm-up, and the label is the mean of the 10 fastest of 50 steps. A constant target is
#: fitted within the first steps, the loss and with it the gradient norm collapse, and
#: ``clip_grad_norm_fp32`` (core_r0.5.0 ``clip_grads.py``) only scales when the norm exceeds 1.0.
#: An inference from the script and Megatron's code, not a measurement: the labels record no norm.
CLIP_SCALE_RUNS = False


def default_data() -> Path:
    """The repository's copy (see habitat.data.checkout)."""
    return checkout_path(DATA_IN_REPO)


def resolve_data(data: Path, target: str | None) -> tuple[Path, Path]:
    """(the folder holding the GPU folders, the target's folder). `data` may be NeuSight's data
    root (with labels/) or the labels folder itself; `target` a folder name in it or a path."""
    data = Path(data)
    if not data.is_dir():
        raise FileNotFoundError(f"--data {data}: no such directory (NeuSight's labels/ folder, or the "
                                f"repository's copy {DATA_IN_REPO})")
    if (data / "labels").is_dir() and not (data / (target or DEFAULT_TARGET)).is_dir():
        data = data / "labels"
    target_dir = Path(target) if target and Path(target).is_dir() else data / (target or DEFAULT_TARGET)
    if not target_dir.is_dir():
        folders = sorted(p.name for p in data.iterdir() if p.is_dir())
        raise FileNotFoundError(f"--target {target or DEFAULT_TARGET}: no such GPU folder in {data} "
                                f"(it has: {', '.join(folders) or 'none'})")
    return data, target_dir


PhaseTimes = Callable[[M.NodeWork, str], float]  # node, phase -> us on the target


def _shape_times(models: P.ModelSet, dev, gpu: str) -> PhaseTimes:
    predict = M._model_predictor(models, dev, gpu)

    def times(node: M.NodeWork, phase: str) -> float:
        parts = node.parts.get(phase)
        return M._parts_time(parts, predict) if parts else 0.0
    return times


def _runtime_times(models: P.ModelSet, target, origin, gpu: str) -> PhaseTimes:
    """Node times measured on the origin, scaled to the target by the kernel models' ratio.

    Nodes with no device work (view, size, getitem, getattr, permute, split, ...: host-side
    operations with no kernel) add nothing: NeuSight timed every node on its own, so such a
    node's time is the host's dispatch and timing gap (~10 us each, 26 ms per step at batch 1 and
    at batch 4 alike: no dependence on the data), and in the step as it runs the host queues
    these while the GPU executes the kernels already launched (a rank's GPU work is >= 400 ms
    here), so they are hidden. host_only_us() reports what was left out."""
    pt, po = M._model_predictor(models, target, gpu), M._model_predictor(models, origin, gpu)

    def times(node: M.NodeWork, phase: str) -> float:
        parts = node.parts.get(phase)
        if not parts:
            return 0.0  # host-side only: hidden behind the GPU's queued work (above)
        measured = node.measured.get(phase, 0.0)
        o = M._parts_time(parts, po)
        return measured * M._parts_time(parts, pt) / o if o > 0 else 0.0  # 0: work fused away
    return times


def host_only_us(nodes: list[Node]) -> float:
    """NeuSight's measured time of the nodes with no device work (what _runtime_times leaves out)."""
    return sum(n.work.repeat * n.work.measured.get(phase, 0.0)
               for n in nodes for phase in ("fw", "bw", "acc") if not n.work.parts.get(phase))


def _split_by_tp(node: Node, part: M.Part, hidden: int) -> bool:
    """Does Megatron's tensor parallelism split this work? Matrix products (column/row-parallel,
    attention heads, the vocabulary-parallel head) and softmax yes; element-wise work on the
    hidden state (layer norm, residual adds, dropout after the row-parallel layers) no."""
    if part.family in ("gemm", "softmax"):
        return True
    if part.family == "elementwise" and node.out_shape:
        return len(node.out_shape) >= 4 or node.out_shape[-1] != hidden
    return False


def _tensor_split(nodes: list[Node], hidden: int, times: PhaseTimes, shards: tuple[int, ...],
                  predict: Callable[[M.Part], float] | None) -> tuple[float, float, dict[int, tuple[float, float]]]:
    """The forward and backward time tensor parallelism splits, and per degree in `shards` one
    rank's share of it at its shard's shapes (see step_work)."""
    tokens = next((p.shape["m"] for n in nodes if n.work.repeat > 1 for p in n.work.parts.get("fw") or []
                   if p.family == "gemm" and p.shape.get("b", 1) == 1), 0.0)
    split_f = split_b = 0.0
    sharded = {t: [0.0, 0.0] for t in shards if t > 1}
    for n in nodes:
        for phase, parts in n.work.parts.items():
            total = sum(p.scale for p in parts or [])
            if total <= 0:
                continue  # no work, or work fused into another kernel (no time)
            split = [p for p in parts if _split_by_tp(n, p, hidden)]
            time = n.work.repeat * times(n.work, phase) * sum(p.scale for p in split) / total
            if phase == "fw":
                split_f += time
            else:
                split_b += time
            if not (sharded and split and predict is not None):
                continue
            engine_parts = [(p.family, p.shape, None, p.scale) for p in split]
            for degree, acc in sharded.items():
                acc[phase != "fw"] += time * shard_ratio(engine_parts, degree, tokens, hidden, phase == "fw",
                                                         lambda family, shape, _: predict(M.Part(family, shape)))
    return split_f, split_b, {d: (f, b) for d, (f, b) in sharded.items()}


def _gradients(nodes: list[Node], last: int, times: PhaseTimes) -> tuple[list[tuple[float, float]], float]:
    """Gradients in the order the backward pass produces them (last node first), and the tied
    embedding's bytes (the head after the layers holds the word embedding's weight)."""
    gradients: list[tuple[float, float]] = []
    clock = 0.0
    unrolled = [n for n in nodes for _ in range(n.work.repeat)]
    for n in reversed(unrolled):
        clock += times(n.work, "bw") + times(n.work, "acc")
        acc = n.work.parts.get("acc") or []
        nbytes = 4.0 * sum(p.shape["n"] for p in acc)
        if nbytes:
            gradients.append((nbytes, clock))
    tied = max((4.0 * sum(p.shape["n"] for p in nodes[i].work.parts.get("acc") or [])
                for i in range(last + 1, len(nodes))), default=0.0)
    return gradients, tied


def step_work(nodes: list[Node], layers: int, times: PhaseTimes, optimizer_us: float,
              shards: tuple[int, ...] = (), predict: Callable[[M.Part], float] | None = None) -> StepWork:
    """The single-GPU step as habitat.analysis.parallel needs it. `shards`: tensor-parallel
    degrees whose per-rank split work is forecast at its shard's shapes (habitat.analysis.
    tensor_shards), each node's split time scaled by `predict`'s (the target's kernel models)
    ratio of the shard's time to the whole's; without them the split work divides by the degree."""
    layer_idx = [i for i, n in enumerate(nodes) if n.work.repeat > 1]
    if not layer_idx:
        raise ValueError("no repeated layer found in the trace")
    first, last = layer_idx[0], layer_idx[-1]
    hidden_node = next(n for n in nodes[first:] if n.work.parts.get("fw") and
                       n.work.parts["fw"][0].family == "layernorm")
    hidden = hidden_node.out_shape[-1]

    fwd = bwd = pro_f = pro_b = epi_f = epi_b = 0.0
    for i, n in enumerate(nodes):
        f = times(n.work, "fw")
        b = times(n.work, "bw") + times(n.work, "acc")
        fwd += n.work.repeat * f
        bwd += n.work.repeat * b
        if i < first:
            pro_f, pro_b = pro_f + f, pro_b + b
        elif i > last:
            epi_f, epi_b = epi_f + f, epi_b + b
    split_f, split_b, sharded = _tensor_split(nodes, hidden, times, shards, predict)
    gradients, tied = _gradients(nodes, last, times)
    return StepWork(forward_us=fwd, backward_us=bwd, optimizer_us=optimizer_us, gradients=gradients,
                    layers=layers, tp_split_forward_us=split_f, tp_split_backward_us=split_b,
                    activation_bytes=4.0 * M._prod(hidden_node.out_shape), prologue_forward_us=pro_f,
                    prologue_backward_us=pro_b, epilogue_forward_us=epi_f, epilogue_backward_us=epi_b,
                    tied_embedding_bytes=tied, tp_sharded_us=sharded)


def optimizer_us(params: float, predict: Callable[[M.Part], float], clip_scale: bool = True) -> float:
    """Megatron's FP32 step on one rank's `params`, every pass memory-bound over the FP32 state
    (core_r0.5.0): apex ``FusedAdam`` (reads parameter, gradient and two moments, writes three:
    7 streams); gradient clipping, ``multi_tensor_l2norm`` (reads every gradient: 1 stream) and
    ``multi_tensor_scale`` (reads and writes it: 2; ``clip_grads.py`` runs it only when the norm
    exceeds the clip value, so only with ``clip_scale``: see CLIP_SCALE_RUNS);
    and the upkeep of the contiguous gradient buffer: ``zero_grad_buffer`` clears it every step
    (training.py ``train_step``: 1 stream) and ``Bucket.start_grad_sync`` divides it by the
    data-parallel size before the all-reduce (``grad_buffer.py``: 2). Every rank divides, a
    data-parallel size of 1 included: Megatron wraps every model in its DDP and
    ``finish_grad_sync`` (overlap off) always calls ``start_grad_sync``.
    One stream = a write-only pass over the buffer, so the L2 norm's read is timed as one."""
    one_stream = predict(M.Part("elementwise", M._elem(params, 0).shape, 1.0))
    two_streams = predict(M._elem(params, 1))
    adam = predict(M._elem(params, 6))
    l2norm, zero, divide = one_stream, one_stream, two_streams
    scale = two_streams if clip_scale else 0.0
    return adam + l2norm + scale + zero + divide


def evaluate(data: Path, models: P.ModelSet, devices: DeviceTable, target: str | None = None,
             megatron: bool = True) -> dict:
    """Forecast every distributed label of `target`'s folder in `data` (default: the A100-SXM4-40GB).
    ``megatron``: rewrite the HF trace into the kernels Megatron's GPT runs
    (habitat.evaluate.megatron_layer); False forecasts the HF model's kernels as traced."""
    data, target_dir = resolve_data(data, target)
    target_name = target_dir.name
    dev = devices.try_find(target_name)
    if dev is None:
        raise ValueError(f"--target {target_name}: not a GPU in the device table (habitat.learned.devices); "
                         "name the folder as NeuSight does, e.g. NVIDIA_H100_80GB_HBM3")
    labels = find_labels(target_dir)
    predict_target = M._model_predictor(models, dev, target_name)
    results: dict = {"target": target_name, "model": "megatron" if megatron else "hf", "configs": {}}
    for label in labels:
        choice = choose_trace(data, target_dir, label)
        measured_on = devices.find(choice.gpu)
        predict_origin = M._model_predictor(models, measured_on, target_name)
        hf = trace_nodes(choice, label.model, label.seq, predict_origin)
        nodes = as_megatron(hf, predict_origin) if megatron else hf
        layers = max(n.work.repeat for n in nodes)
        cluster = Cluster(target_name, label.parallelism.world_size)
        entry = {"measured_ms": round(label.measured_ms, 3), "cluster": cluster.label(),
                 "parallelism": label.parallelism.label(), "single_gpu_batch": label.trace_batch,
                 "trace": choice.to_dict(),
                 "neusight_error_pct": NEUSIGHT_ERRORS.get(target_name, {}).get(label.stem)}
        for method, times in (("shape", _shape_times(models, dev, target_name)),
                              ("runtime", _runtime_times(models, dev, measured_on, target_name))):
            work = step_work(nodes, layers, times, 0.0, (label.parallelism.tensor,), predict_target)
            params = work.gradient_bytes / 4.0
            work.optimizer_us = optimizer_us(params, predict_target, clip_scale=CLIP_SCALE_RUNS)
            fc = parallel_step(work, cluster, label.parallelism)
            entry[f"{method}_ms"] = round(fc.time_ms, 3)
            entry[method] = {"predicted_ms": round(fc.time_ms, 3),
                             "error_pct": round((fc.time_ms - label.measured_ms) / label.measured_ms * 100, 1),
                             "single_gpu_fwd_bwd_ms": round((work.forward_us + work.backward_us) / 1e3, 3),
                             "optimizer_ms": round(work.optimizer_us / 1e3, 3),
                             "breakdown": fc.to_dict()}
        entry["runtime"]["host_only_left_out_ms"] = round(host_only_us(nodes) / 1e3, 3)
        results["configs"][label.stem] = entry
    first = labels[0]
    results["compute_audit"] = compute_audit(results, choose_trace(data, target_dir, first).folder, first.model,
                                             first.seq, target_name, models, devices)
    return results


def print_report(results: dict) -> None:
    print(f"\n== Distributed training on the {results['target']} (NeuSight's labels; the {results['model']} kernels)")
    print(f"{'label':34s} {'parallelism':12s} {'measured':>9s} | {'shape':>8s} {'err':>6s} | "
          f"{'runtime':>8s} {'err':>6s} | trace (batch)             | NeuSight err")
    for stem, e in results["configs"].items():
        s, r, t = e["shape"], e["runtime"], e["trace"]
        traced = f"{t['gpu'][:14]} ({t['batch']}" + (f" from {t['traced_batch']})" if t["traced_batch"] != t["batch"] else ")")
        theirs = f"{e['neusight_error_pct']:.1f}%" if e["neusight_error_pct"] is not None else "-"
        print(f"{stem:34s} {e['parallelism']:12s} {e['measured_ms']:9.1f} | {s['predicted_ms']:8.1f} "
              f"{s['error_pct']:+5.1f}% | {r['predicted_ms']:8.1f} {r['error_pct']:+5.1f}% | {traced:25s} | {theirs}")
    print("shape: every node forecast from its shapes on the target; runtime: node times measured on the "
          "tracing GPU, scaled to it. Both add the collective and parallel models; nothing is fitted to a label.")
    if "compute_audit" in results:
        print_audit(results["compute_audit"])
