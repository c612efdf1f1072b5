"""Op classes for reading a step's kernel time the way the next gap shows: finer than the
engine's cost classes (convolutions split into depthwise/grouped, 1x1 and the rest; batch and
layer norm apart; activations, dropout, pooling and the loss out of "element-wise"), and the
same on a CPU trace and a GPU trace of one training step, whose op lists differ (the CPU's
per-tensor AdamW ops against CUDA's `_foreach_` ops, oneDNN's RNN layers against cuDNN's,
log_softmax backward with no loss above it, CUDA's softmax backward with a `mul` of its own),
so that a class's measured and forecast times
are the same work.

An op's class comes from the engine's class for it (`forecast_step(...)["ops"][i]["class"]`),
its phase, its own name and those of the ops that called it (its chain), first match wins
(`classify_step`). Pure functions on trace dicts: no torch, no engine.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

#: Display order; every class `op_class` returns is here.
CLASSES = ("conv", "conv depthwise/grouped", "conv 1x1", "gemm", "attention", "rnn", "batch norm",
           "layer norm", "norm (other)", "softmax", "activation", "dropout", "elementwise", "pooling",
           "reduction", "embedding", "loss", "optimizer", "copy", "other")
#: The classes the learned matrix models (GEMM, conv, attention) serve, and cuDNN's RNNs.
MATRIX_CLASSES = ("conv", "conv depthwise/grouped", "conv 1x1", "gemm", "attention", "rnn")

ACTIVATIONS = {"relu", "relu6", "gelu", "silu", "hardswish", "hardsigmoid", "hardtanh", "sigmoid", "tanh",
               "leaky_relu", "elu", "softplus", "mish", "threshold", "glu", "prelu", "log_sigmoid"}
LOSSES = ("nll_loss", "log_softmax", "cross_entropy", "binary_cross_entropy", "mse_loss", "smooth_l1_loss",
          "kl_div", "ctc_loss")


def base_name(name: str) -> str:
    """aten::hardswish_backward -> hardswish; aten::relu_ -> relu; aten::_log_softmax -> log_softmax."""
    base = name.rsplit("::", 1)[-1].strip("_")
    for suffix in ("_backward_data", "_backward_input", "_backward", "_forward"):
        base = base.removesuffix(suffix)
    return base.strip("_")


def _arg(op: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((a for a in op.get("args", []) if a.get("name") == name), None)


def conv_kind(chain: list[dict[str, Any]]) -> str:
    """A convolution's class from the first op of its chain that names its groups or weight."""
    for op in chain:
        if "depthwise" in op["name"]:
            return "conv depthwise/grouped"
        groups, weight = _arg(op, "groups"), _arg(op, "weight")
        if groups is None and weight is None:
            continue
        if groups is not None and groups.get("int", 1) > 1:
            return "conv depthwise/grouped"
        shape = (weight or {}).get("tensor", {}).get("shape", [])
        if len(shape) > 2 and all(d == 1 for d in shape[2:]):
            return "conv 1x1"
        return "conv"
    return "conv"


def op_class(chain: list[dict[str, Any]], engine_class: str) -> str:
    """The class of chain[0] (the op that carries the time), given its callers chain[1:]."""
    op = chain[0]
    names = [base_name(o["name"]) for o in chain]
    joined = " ".join(names)
    if op.get("phase") == "optimizer" or engine_class == "optimizer":
        return "optimizer"  # per-tensor and foreach AdamW alike, and gradient clipping
    if any(n in ("lstm", "gru", "rnn_tanh", "rnn_relu") or "rnn" in n for n in names):
        return "rnn"  # oneDNN's layers are GEMMs to the engine, cuDNN's are unknown
    if any(n.startswith("embedding") for n in names):
        return "embedding"  # its gather/index_select (a copy to the engine) and its backward
    if engine_class == "copy":
        return "copy"  # autocast casts, contiguous, cat: wherever they are called from
    if engine_class == "loss" or any(n.startswith(LOSSES) for n in names):
        return "loss"  # log_softmax too: its backward has no loss op above it
    if engine_class == "conv" or "conv" in joined:
        return conv_kind(chain)
    if engine_class in ("gemm", "attention"):
        return engine_class
    if "softmax" in names:
        return "softmax"  # CUDA's backward multiplies the gradient by the output first (a mul child)
    if "batch_norm" in joined:
        return "batch norm"
    if "layer_norm" in joined:
        return "layer norm"
    if engine_class == "norm":
        return "norm (other)"
    if "dropout" in joined or names[0] == "bernoulli":
        return "dropout"
    if any(n in ACTIVATIONS for n in names):
        return "activation"  # relu's clamp_min, threshold_backward, hardswish ...
    if "pool" in joined:
        return "pooling"
    if engine_class in ("softmax", "elementwise", "reduction"):
        return engine_class
    return "other"


def chains(ops: list[dict[str, Any]]) -> Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each op with its chain: itself, then its parent, grandparent... up to the call the
    program made."""
    by_id = {op["id"]: op for op in ops}
    for op in ops:
        chain = [op]
        while "parent" in chain[-1] and chain[-1]["parent"] in by_id:
            chain.append(by_id[chain[-1]["parent"]])
        yield op, chain


def root_key(ops: list[dict[str, Any]]) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """op -> (phase, name) of its outermost caller: the call the program made."""
    by_id = {op["id"]: op for op in ops}

    def key(op: dict[str, Any]) -> tuple[str, str]:
        while "parent" in op and op["parent"] in by_id:
            op = by_id[op["parent"]]
        return op.get("phase", "?"), op["name"]
    return key


def dropout_masks(ops: list[dict[str, Any]]) -> set[int]:
    """Storages of the noise a CPU trace's training-mode dropout draws (its bernoulli_'s tensor).
    The CPU's backward multiplies the gradient by that noise (a `mul` with no dropout above it);
    CUDA's is native_dropout_backward, classed "dropout" by name."""
    by_id = {op["id"]: op for op in ops}
    out = set()
    for op in ops:
        parent = by_id.get(op.get("parent"))
        if base_name(op["name"]) != "bernoulli" or parent is None or "dropout" not in parent["name"]:
            continue
        storage = ((_arg(op, "self") or {}).get("tensor") or {}).get("storage")
        if storage:
            out.add(storage)
    return out


def classify_step(ops: list[dict[str, Any]], engine_classes: dict[int, str]) -> dict[int, str]:
    """op id -> class for every op of a step (engine_classes: op id -> the engine's class)."""
    masks = dropout_masks(ops)

    def masked(op: dict[str, Any]) -> bool:
        return op.get("phase") == "backward" and base_name(op["name"]) == "mul" and any(
            (a.get("tensor") or {}).get("storage") in masks for a in op.get("args", []))

    return {op["id"]: "dropout" if masks and masked(op) else op_class(chain, engine_classes.get(op["id"], "unknown"))
            for op, chain in chains(ops)}


def engine_classes(forecast: dict[str, Any]) -> dict[int, str]:
    """op id -> the engine's class, from a forecast_step document."""
    return {o["id"]: o["class"] for o in forecast["ops"]}


def busy_us(kernels: list[dict[str, Any]]) -> float | None:
    """The union of the kernels' device intervals (us); None unless each has its device start
    time (trace format 2)."""
    if not kernels or any(k.get("device_start_us") is None for k in kernels):
        return None
    spans = sorted((k["device_start_us"], k["device_start_us"] + k.get("duration_us", 0.0)) for k in kernels)
    total, (start, end) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > end:
            total, start, end = total + end - start, s, e
        else:
            end = max(end, e)
    return total + end - start


def kernel_us(op: dict[str, Any]) -> float:
    """The device time of the kernels attributed to this op itself (not its children): the time
    they kept the device busy where the trace has their start times (cuDNN runs a stacked LSTM's
    layers on several streams at once, so their durations overlap), else their summed durations."""
    kernels = op.get("kernels", [])
    busy = busy_us(kernels)
    return busy if busy is not None else sum(k.get("duration_us", 0.0) for k in kernels)


def sum_by_class(classes: dict[int, str], time_us: dict[int, float]) -> dict[str, float]:
    """ms per class of the per-op times (us); classes with no time are left out."""
    out: dict[str, float] = {}
    for op_id, us in time_us.items():
        if us:
            cls = classes.get(op_id, "other")
            out[cls] = out.get(cls, 0.0) + us / 1e3
    return out


def measured_us(ops: list[dict[str, Any]]) -> dict[int, float]:
    """op id -> its kernels' time (us), on a GPU trace."""
    return {op["id"]: kernel_us(op) for op in ops}


def forecast_us(forecast: dict[str, Any], target: int) -> dict[int, float]:
    """op id -> what it adds to the step total on target `target` (us), from forecast_step."""
    return {o["id"]: o["predictions"][target][2] for o in forecast["ops"]}
