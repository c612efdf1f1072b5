"""The work one rank of Megatron's tensor parallelism runs: a node's parts at their shard's shapes.

Megatron-LM core_r0.5.0 (``megatron/core/tensor_parallel/layers.py``) splits a linear layer's
weight [k_in, n_out] across the t ranks of a tensor-parallel group in one of two ways:

- column-parallel (attention QKV, MLP h->4h, the vocabulary-parallel head): each rank holds
  [k_in, n_out / t] and computes its n_out / t output columns from the whole input;
- row-parallel (attention projection, MLP 4h->h): each rank holds [k_in / t, n_out] and computes
  a partial sum over its k_in / t inputs, all-reduced afterwards.

The layer whose output width is the hidden size is row-parallel, every other one column-parallel.
A node's GEMM parts are its forward (m tokens, n = n_out, k = k_in), its data gradient
(m tokens, n = k_in, k = n_out) and its weight gradient (m = k_in, n = n_out, k = tokens), so the
split dimension follows from the part. Batched products (attention over heads), softmax and the
element-wise work on attention scores split by heads: their batch, rows or elements divide by t.

Forecasting each rank's work at these shapes, instead of the single-GPU time / t, keeps the
efficiency a GEMM loses when it is t times narrower.
"""
from __future__ import annotations

from dataclasses import replace

from habitat.evaluate import models as M


def _gemm_shard(part: M.Part, forward: M.Part, phase: str, hidden: int, t: int) -> M.Part:
    s = dict(part.shape)
    if s["b"] > 1:
        s["b"] = s["b"] / t
        return replace(part, shape=s)
    column = forward.shape["n"] != hidden
    if phase == "fw":
        key = "n" if column else "k"
    elif s["m"] == forward.shape["m"]:  # data gradient: (tokens, k_in, n_out)
        key = "k" if column else "n"
    else:  # weight gradient: (k_in, n_out, tokens)
        key = "n" if column else "m"
    s[key] = s[key] / t
    return replace(part, shape=s)


def shard(node: M.NodeWork, part: M.Part, phase: str, hidden: int, t: int) -> M.Part:
    """`part` of `node` as one of t tensor-parallel ranks runs it (a part tensor parallelism
    splits: habitat.evaluate.distributed._split_by_tp)."""
    if part.family == "gemm":
        forward = next((p for p in node.parts.get("fw") or [] if p.family == "gemm"), part)
        return _gemm_shard(part, forward, phase, hidden, t)
    s = dict(part.shape)
    key = {"softmax": "rows", "elementwise": "n"}.get(part.family)
    if key is None:
        raise ValueError(f"tensor parallelism does not split {part.family} work")
    s[key] = s[key] / t
    return replace(part, shape=s)
