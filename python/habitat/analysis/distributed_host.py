"""The work a distributed framework adds on every rank to a step that one GPU (or the CPU) ran.

A step captured on one device holds none of what DDP, tensor parallelism or FSDP issue around
it; every rank of a cluster does, and on a host-bound step that host time is the step. What each
issues per rank and step (torch 2.x; DDP counted from Habitat's own capture on gloo ranks,
benchmarks/results/ddp-reducer-ops.md, and checked against it in
tests/python/parallel/test_ddp_host_work.py):

- **DDP's reducer** (gradients not bucket views, DDP's default; ``reducer.cpp``), per parameter
  tensor: when its gradient is ready, a top-level ``mul.out`` writing it, scaled by 1/world, into
  its bucket (with a ``to`` -> ``_to_copy`` -> ``empty_strided`` + ``copy_`` of the 0-dim scale
  beneath it); one ``c10d::allreduce_`` per bucket as it fills; after the backward pass, per
  parameter an ``as_strided`` view of its reduced bucket and a ``copy_`` of it into the gradient.
- **Tensor parallelism**: one collective launch per all-reduce of the hidden state.
- **FSDP**: one collective launch per unit for its forward gather, its backward gather and its
  gradients' reduce-scatter.

These ops are written as trace steps (docs/trace-format.md) and forecast by the engine like any
captured step: host time from the host model (habitat/data/host_model.json: each top-level op's
inclusive price, the prices a step captured under DDP gets), device time from the cost model.
The host model also puts its Python gap between consecutive top-level ops; DDP's reducer and its
bucket all-reduces are issued from C++ (``reducer.cpp``), so they are priced without it, while
tensor parallelism's and FSDP's collectives, called from Python, keep it. The parallel step
model (habitat.analysis.parallel) places the result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from habitat.analysis.collectives import ITEMSIZE
from habitat.analysis.parallel import FrameworkWork


@dataclass(frozen=True)
class GradientTensor:
    """One parameter's gradient in a captured step: its shape, dtype and the backward-pass op
    that produced it."""

    shape: tuple[int, ...]
    dtype: str
    ready_op: int   # id of the backward op that created it

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE.get(self.dtype, 4)


def _tensors(op: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for arg in op.get("args", []):
        if "tensor" in arg:
            yield arg["tensor"]
        yield from arg.get("tensors", [])


def gradient_tensors(step: dict[str, Any]) -> list[GradientTensor]:
    """The gradients of a captured step (a trace step dict), in the order the backward pass made
    them: storages the backward pass created (first seen as an op's output there, not as an
    input: views of a parameter are not gradients) that the optimizer reads. A gradient
    accumulated into a storage that outlives the step (no ``zero_grad(set_to_none=True)``) is
    not seen: [] then, and the caller falls back to the step's gradient bytes."""
    created: dict[int, tuple[int, list[int], str, int]] = {}  # storage -> (numel, shape, dtype, op id)
    seen: set[int] = set()
    read_by_optimizer: set[int] = set()
    for op in step.get("ops", []):
        phase = op.get("phase", "other")
        inputs = {int(t.get("storage", 0) or 0) for t in _tensors(op)}
        seen.update(inputs)
        if phase == "optimizer":
            read_by_optimizer.update(inputs)
        for t in op.get("outputs", []):
            storage = int(t.get("storage", 0) or 0)
            if not storage or storage in seen:
                continue
            seen.add(storage)
            if phase == "backward":
                shape = [int(d) for d in t.get("shape", [])]
                numel = 1
                for d in shape:
                    numel *= d
                created[storage] = (numel, shape, t.get("dtype", "float32"), int(op.get("id", 0)))
    grads = [GradientTensor(tuple(shape), dtype, op_id) for storage, (numel, shape, dtype, op_id) in created.items()
             if storage in read_by_optimizer and numel > 0]
    return sorted(grads, key=lambda g: g.ready_op)


class _Ops:
    """Trace ops written in order, with ids and parents."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def add(self, name: str, phase: str, args: list[dict[str, Any]], outputs: list[dict[str, Any]],
            overload: str = "", parent: dict[str, Any] | None = None) -> dict[str, Any]:
        op = {"id": len(self.ops) + 1, "name": name, "phase": phase, "args": args, "outputs": outputs}
        if overload:
            op["overload"] = overload
        if parent is not None:
            parent["has_children"] = True
            op["parent"], op["depth"] = parent["id"], parent.get("depth", 0) + 1
        self.ops.append(op)
        return op


def _tensor(shape: Iterable[int], dtype: str) -> dict[str, Any]:
    return {"shape": list(shape), "dtype": dtype, "device": "cpu"}


def _allreduce(ops: _Ops, phase: str, numel: int, dtype: str, world: int) -> None:
    flat = _tensor([numel], dtype)
    ops.add("c10d::allreduce_", phase, [{"name": "tensors", "tensors": [flat]},
                                         {"name": "process_group", "other": f"ProcessGroup(size={world}, rank=0)"}],
            [flat])


def reducer_ops(grads: list[GradientTensor], world: int) -> list[dict[str, Any]]:
    """DDP's reducer over `grads` (ready order) in one bucket, without its all-reduce: per tensor
    the backward pass's mul.out into the bucket and, after it, the as_strided view and copy_."""
    ops = _Ops()
    for g in grads:
        t, scale = _tensor(g.shape, g.dtype), _tensor([], g.dtype)
        mul = ops.add("aten::mul", "backward", [{"name": "self", "tensor": t}, {"name": "other", "tensor": scale},
                                                {"name": "out", "tensor": t}], [t], overload="out")
        mul["autograd_node"] = "torch::autograd::AccumulateGrad"
        to = ops.add("aten::to", "backward", [{"name": "self", "tensor": scale}], [scale], "dtype", mul)
        copy = ops.add("aten::_to_copy", "backward", [{"name": "self", "tensor": scale}], [scale], parent=to)
        ops.add("aten::empty_strided", "backward", [{"name": "size", "ints": []}], [scale], parent=copy)
        ops.add("aten::copy_", "backward", [{"name": "self", "tensor": scale}, {"name": "src", "tensor": scale}],
                [scale], parent=copy)
    bucket = _tensor([sum(g.numel for g in grads)], grads[0].dtype if grads else "float32")
    for g in grads:
        ops.add("aten::as_strided", "other", [{"name": "self", "tensor": bucket}], [_tensor(g.shape, g.dtype)])
    for g in grads:
        t = _tensor(g.shape, g.dtype)
        ops.add("aten::copy_", "other", [{"name": "self", "tensor": t}, {"name": "src", "tensor": t}], [t])
    return ops.ops


def launch_ops(world: int) -> list[dict[str, Any]]:
    """One collective launched in the forward pass and one in the backward pass."""
    ops = _Ops()
    _allreduce(ops, "forward", 1, "float32", world)
    _allreduce(ops, "backward", 1, "float32", world)
    return ops.ops


def _python_gap_us(phase: str) -> float:
    """The host model's Python time between two top-level ops in `phase` (0: no host model)."""
    import json

    from habitat.data.engine import host_model_json

    text = host_model_json()
    if not text:
        return 0.0
    model = json.loads(text)
    return float((model.get("phase_gap_us") or {}).get(phase, model.get("top_level_gap_us", 0.0)))


def framework_work(grads: list[GradientTensor], target: str, world: int = 2) -> FrameworkWork:
    """The host and device time on `target` of what the framework adds (module docstring): the
    engine forecasts the reducer's ops over `grads` and one collective launch per pass as a
    CPU-traced step, so the host model prices them as it prices a step captured on a rank."""
    from habitat.data.engine import trace_document
    from habitat.data.forecast import Forecast

    ops = reducer_ops(grads, world)
    steps = [{"index": 0, "wall_ms": 0.0, "ops": ops}, {"index": 1, "wall_ms": 0.0, "ops": launch_ops(world)}]
    forecast = Forecast.from_trace(trace_document({"device": "cpu"}, steps), [target])
    reducer, launches = forecast.steps
    gpu = forecast.targets[0]

    def host(step: Any, phase: str) -> float:
        timeline = step.timeline.get(gpu) or {}
        if not timeline.get("valid"):
            return 0.0
        return float((timeline.get("phases") or {}).get(phase, {}).get("host_ms", 0.0)) * 1e3

    def device(step: Any, phase: str) -> float:
        return float((step.phase_ms.get(gpu) or {}).get(phase, 0.0)) * 1e3

    def from_cpp(phase: str) -> float:  # the reducer's host time less the Python gaps the host model adds
        calls = sum(1 for op in ops if op["phase"] == phase and "parent" not in op)
        return max(0.0, host(reducer, phase) - calls * _python_gap_us(phase)) if calls else 0.0

    launch_backward = host(launches, "backward")
    return FrameworkWork(tensors=len(grads), reducer_host_backward_us=from_cpp("backward"),
                         reducer_backward_us=device(reducer, "backward") if grads else 0.0,
                         reducer_host_finalize_us=from_cpp("other"),
                         reducer_finalize_us=device(reducer, "other") if grads else 0.0,
                         launch_forward_us=host(launches, "forward"), launch_backward_us=launch_backward,
                         bucket_launch_us=max(0.0, launch_backward - _python_gap_us("backward")) if launch_backward else 0.0)
