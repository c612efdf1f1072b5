"""A captured step's forecast on one GPU, read as the parallel step model's input (StepWork).

- Phases: forward, backward, optimizer and other time are the step's forecast on the target.
- Host: where the step has a timeline on the target, what the host takes to issue each phase
  (its launch cadence), and how far the step as seen is from its phases one after another, so
  that a one-GPU "cluster" is the step as seen.
- Gradients: when the step already ran data-parallel collectives (DDP's buckets, captured as
  c10d ops) those are the buckets, ready where they were issued in the backward pass, and the step
  holds what DDP adds on a rank; otherwise every gradient tensor where the backward pass made it
  (habitat.analysis.distributed_host), or, where none is seen, the gradient bytes of the step's
  memory estimate produced evenly over the backward pass; and what the framework adds on a rank
  (collective launches, DDP's reducer over those tensors) is forecast for the target.
- Tensor parallelism: matrix products, attention and softmax are the work Megatron-style tensor
  parallelism splits; the forward pass's top-level matrix products pair up as column- then
  row-parallel layers (two per transformer layer: attention and MLP), so a layer is two pairs
  and the hidden state all-reduced is the row-parallel product's output. A step without matrix
  products has no layers to split.
"""
from __future__ import annotations

from typing import Any

from habitat.analysis.collectives import ITEMSIZE, captured_collectives
from habitat.analysis.distributed_host import framework_work, gradient_tensors
from habitat.analysis.memory import estimate_step_memory
from habitat.analysis.parallel import StepWork
from habitat.analysis.step_shards import GEMM_OPS as _GEMM_OPS
from habitat.analysis.step_shards import SPLIT_CLASSES as _SPLIT
from habitat.analysis.step_shards import product_rows_and_width, sharded_split

_EVEN_PIECES = 100


def _out_bytes(op: Any) -> float:
    rows, width = product_rows_and_width(op)
    return rows * width * ITEMSIZE.get(op.dtypes[0] if op.dtypes else "float32", 4)


def step_work_from_step(step: Any, target: str, shards: tuple[int, ...] = (),
                        origin: dict[str, Any] | None = None) -> StepWork:
    """StepWork for `target` from a StepForecast recorded in detail (its ops and trace).
    `shards`: tensor-parallel degrees whose split work is forecast at its shard's shapes
    (habitat.analysis.step_shards; needs the trace's `origin`)."""
    phases = step.phase_ms.get(target) or {}
    fwd, bwd = phases.get("forward", 0.0) * 1e3, phases.get("backward", 0.0) * 1e3
    opt, other = phases.get("optimizer", 0.0) * 1e3, phases.get("other", 0.0) * 1e3
    ops = step.ops
    if not ops:
        raise ValueError("this step was not recorded in detail: use a step of forecast.steps with ops "
                         "(the first detail_steps steps are)")

    split_f = split_b = 0.0
    clock = 0.0  # position in the backward pass, us
    position: dict[int, float] = {}
    for op in ops:
        share = op.share_us(target)
        cls = (op.op_class or "").lower()
        if op.phase == "forward" and cls in _SPLIT:
            split_f += share
        elif op.phase == "backward":
            clock += share
            position[op.id] = clock
            if cls in _SPLIT:
                split_b += share

    trace = step.trace or {}
    gradients: list[tuple[float, float]] = []
    for c in captured_collectives(trace):
        if c.kind == "all_reduce" and c.phase == "backward":
            gradients.append((float(c.bytes), position.get(c.op_id, bwd)))
    captured_ddp = bool(gradients)
    framework = None
    if not captured_ddp:  # one device's step: the framework's work is not in it
        tensors = gradient_tensors(trace) if trace else []
        gradients = [(float(g.nbytes), position.get(g.ready_op, bwd)) for g in tensors]
        framework = framework_work(tensors, target)
    if not gradients:
        total = float(estimate_step_memory(trace).gradients) if trace else 0.0
        gradients = [(total / _EVEN_PIECES, bwd * (i + 1) / _EVEN_PIECES) for i in range(_EVEN_PIECES)] \
            if total > 0 else []

    host = _host_us(step, target)
    if captured_ddp:
        # its reducer's copies back after the backward pass wait on the device for the all-reduce
        # while the host issues them, as the optimizer's kernels do
        post_us, post_host_us = _after_backward(ops, target, host.get("other", 0.0))
        opt, other = opt + post_us, other - post_us
        if host:
            host["optimizer"] += post_host_us

    linears = [op for op in ops if op.phase == "forward" and op.depth == 0 and op.name in _GEMM_OPS]
    row_parallel = linears[1::2]
    layers = max(1, len(row_parallel) // 2) if row_parallel else 0
    activation = max((_out_bytes(op) for op in row_parallel), default=0.0)
    adjust = 0.0
    if host:
        phases_us = max(fwd, host["forward"]) + max(bwd, host["backward"]) + max(opt, host["optimizer"]) + other
        adjust = step.step_ms(target) * 1e3 - phases_us
    return StepWork(forward_us=fwd, backward_us=bwd, optimizer_us=opt, other_us=other,
                    gradients=gradients, layers=layers, tp_split_forward_us=split_f,
                    tp_split_backward_us=split_b, activation_bytes=activation,
                    tp_allreduces=len(row_parallel), host_forward_us=host.get("forward", 0.0),
                    host_backward_us=host.get("backward", 0.0), host_optimizer_us=host.get("optimizer", 0.0),
                    seen_adjust_us=adjust, framework=framework,
                    tp_sharded_us=sharded_split(step, target, shards, origin))


def _host_us(step: Any, target: str) -> dict[str, float]:
    """The host's time per phase (us) in the step's timeline on `target`; {} without one."""
    timeline = step.timeline.get(target)
    if not timeline or not timeline.get("valid"):
        return {}
    phases = timeline.get("phases") or {}
    return {name: float(phases.get(name, {}).get("host_ms", 0.0)) * 1e3
            for name in ("forward", "backward", "optimizer", "other")}


def _after_backward(ops: list[Any], target: str, host_other_us: float) -> tuple[float, float]:
    """(device us, host us) of the "other"-phase ops between the backward pass and the optimizer
    (DDP's copies of the reduced buckets): their forecast device time, and the other phase's host
    time in proportion to their share of its top-level ops (the timeline times phases, not ops)."""
    last_backward = max((i for i, op in enumerate(ops) if op.phase == "backward"), default=-1)
    first_optimizer = next((i for i, op in enumerate(ops) if op.phase == "optimizer"), len(ops))
    between = [op for op in ops[last_backward + 1:first_optimizer] if op.phase == "other"]
    top_level = sum(1 for op in ops if op.phase == "other" and op.depth == 0)
    after = sum(1 for op in between if op.depth == 0)
    host = host_other_us * after / top_level if top_level else 0.0
    return sum(op.share_us(target) for op in between), host
