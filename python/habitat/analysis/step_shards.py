"""A captured step's tensor-parallel split work at its shard's shapes (StepWork.tp_sharded_us).

For each op of the split classes (matrix products, attention, softmax) with a share of the step
on the target, the engine's learned parts of the op (`_engine.learned_op_parts`, what the
engine forecasts it from) are forecast whole and at one rank's shard
(habitat.analysis.tensor_shards) by the engine's learned models, and the op's share is scaled by
their ratio. An op without learned parts, or a part the rule does not describe, takes a t-th.
The layers' tokens and hidden size come from the forward pass's top-level matrix products, as
step_work pairs them (column-, then row-parallel).
"""
from __future__ import annotations

import json
import math
from typing import Any, Optional

from habitat.analysis.tensor_shards import shard_ratio

SPLIT_CLASSES = {"gemm", "attention", "softmax"}
GEMM_OPS = {"aten::linear", "aten::addmm", "aten::mm", "aten::matmul"}

def product_rows_and_width(op: Any) -> tuple[float, float]:
    """The rows a top-level matrix product reads (batch x sequence) and its output's width, from
    the op's operands: aten::linear (input, weight [out, in]), aten::addmm (bias, mat1, mat2),
    aten::mm (mat1, mat2), aten::matmul (input, other [..., in, out]); (0, 0) without shapes."""
    first = 1 if op.name == "aten::addmm" else 0
    shapes = op.input_shapes
    if len(shapes) < first + 2 or not shapes[first] or not shapes[first + 1]:
        return 0.0, 0.0
    x, w = shapes[first], shapes[first + 1]
    return float(math.prod(x[:-1])), float(w[0] if op.name == "aten::linear" else w[-1])


def _tokens_and_hidden(linears: list[Any]) -> tuple[float, float]:
    """The rows of the first top-level product and the row-parallel product's output width."""
    if len(linears) < 2:
        return 0.0, 0.0
    return product_rows_and_width(linears[0])[0], product_rows_and_width(linears[1])[1]


def sharded_split(step: Any, target: str, degrees: tuple[int, ...],
                  origin: dict[str, Any] | None) -> dict[int, tuple[float, float]]:
    """Per tensor-parallel degree (> 1) in `degrees`, the (forward, backward) time of the step's
    split work on one rank (us), by the installed weights' learned models on `target`. {} without
    the step's trace and origin or layers to split."""
    from habitat import _engine
    from habitat.data import engine

    degrees = tuple(t for t in degrees if t > 1)
    if not degrees or origin is None or step.trace is None or not step.ops:
        return {}
    linears = [op for op in step.ops if op.phase == "forward" and op.depth == 0 and op.name in GEMM_OPS]
    tokens, hidden = _tokens_and_hidden(linears[:2])
    if not tokens or not hidden:
        return {}
    models = _engine.load_learned_models(engine.weights_dir())
    if models is None:
        return {}

    def predict(family: str, shape: dict[str, float], precision: str) -> Optional[float]:
        return models.predict_kernel_us(family, shape, target, precision)

    doc = json.dumps(engine.trace_document(origin, [step.trace]))
    parts = {op_id: p for op_id, _cls, p in _engine.learned_op_parts(doc, 0)}
    out = {t: [0.0, 0.0] for t in degrees}
    for op in step.ops:
        share = op.share_us(target)
        if share <= 0 or (op.op_class or "").lower() not in SPLIT_CLASSES or op.phase not in ("forward", "backward"):
            continue
        forward = op.phase == "forward"
        for t, acc in out.items():
            ratio = shard_ratio(parts[op.id], t, tokens, hidden, forward, predict) if op.id in parts else 1.0 / t
            acc[0 if forward else 1] += share * ratio
    return {t: (f, b) for t, (f, b) in out.items()}
