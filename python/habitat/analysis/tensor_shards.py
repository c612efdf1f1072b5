"""The work one rank of Megatron's tensor parallelism runs: a learned part at its shard's shapes.

Megatron-LM core_r0.5.0 (``megatron/core/tensor_parallel/layers.py``) splits a linear layer's
weight [k_in, n_out] across the t ranks of a tensor-parallel group in one of two ways:

- column-parallel (attention QKV, MLP h->4h, the vocabulary-parallel head): each rank holds
  [k_in, n_out / t] and computes its n_out / t output columns from the whole input;
- row-parallel (attention projection, MLP 4h->h): each rank holds [k_in / t, n_out] and computes
  a partial sum over its k_in / t inputs, all-reduced afterwards.

Either way the weight dimension that is not the hidden size divides (the square attention
projection is row-parallel: its input dimension). A layer's GEMM parts are its forward (tokens,
n_out, k_in), its data gradient (tokens, k_in, n_out) and its weight gradient (n_out, k_in,
tokens) as b x (m x k) @ (k x n) products, so the part's token dimension and the hidden size
name the dimension to divide. Batched products (attention over heads), fused attention, softmax
and the element-wise work on attention scores split by heads: their batch, rows or elements
divide by t.

Forecasting each rank's work at these shapes, rather than the single-GPU time / t, keeps the
efficiency a GEMM loses when it is t times narrower.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

Shape = dict[str, float]
# A learned part as the engine lists it (_engine.learned_op_parts): family, shape, what else its
# forecast needs (the engine's precision), scale.
Part = tuple[str, Shape, Any, float]
Predict = Callable[[str, Shape, Any], Optional[float]]  # family, shape, that third field -> us


def _gemm_shard(shape: Shape, t: int, tokens: float, hidden: float, forward: bool) -> Optional[Shape]:
    s = dict(shape)
    if s.get("b", 1.0) > 1:
        s["b"] = s["b"] / t
        return s
    token = next((key for key in ("m", "k", "n") if s[key] == tokens), None)
    if token is None:
        return None
    weight = [key for key in ("m", "n", "k") if key != token]
    wide = [key for key in weight if s[key] != hidden]
    if len(wide) == 1:
        key = wide[0]
    elif not wide:  # a square [hidden, hidden] weight: row-parallel, its input dimension
        key = "k" if token == "m" and forward else "n"
    else:
        return None  # neither weight dimension is the hidden size: not a transformer layer's
    s[key] = s[key] / t
    return s


#: The dimension that divides for the families tensor parallelism splits by heads or rows.
_SPLIT_BY = {"attention": "batch_heads", "softmax": "rows", "elementwise": "n"}


def shard(family: str, shape: Shape, t: int, tokens: float, hidden: float, forward: bool) -> Optional[Shape]:
    """`shape` of a learned `family` part as one of t tensor-parallel ranks runs it, or None where
    the rule does not apply (a GEMM with no token dimension, or with no hidden-size weight
    dimension; another family). `tokens`: the rows of the layers' input (batch x sequence);
    `hidden`: the model's width; `forward`: the part is of the forward pass."""
    if family == "gemm":
        return _gemm_shard(shape, t, tokens, hidden, forward)
    key = _SPLIT_BY.get(family)
    if key is None or key not in shape:
        return None
    return {**shape, key: shape[key] / t}


def shard_ratio(parts: Sequence[Part], t: int, tokens: float, hidden: float, forward: bool,
                predict: Predict) -> float:
    """The time of an op's `parts` on one of t ranks over their whole time, both forecast by
    `predict`: each part at its shard's shapes, a part the rule does not describe at a t-th of
    its time; 1 / t where a forecast is missing."""
    whole = sharded = 0.0
    for family, shape, extra, scale in parts:
        full = predict(family, shape, extra)
        if full is None:
            return 1.0 / t
        piece = shard(family, shape, t, tokens, hidden, forward)
        one = predict(family, piece, extra) if piece is not None else full / t
        if one is None:
            return 1.0 / t
        whole += scale * full
        sharded += scale * one
    return sharded / whole if whole > 0 else 1.0 / t
