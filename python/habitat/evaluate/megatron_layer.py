"""The HF GPT-2 node trace rewritten into the kernels Megatron-LM's GPT runs.

NeuSight's single-GPU trace is HuggingFace's GPT-2 (torch.fx nodes), but its distributed labels
ran Megatron-LM core_r0.5.0's legacy GPT (``megatron/model/transformer.py``, built by accelerate
1.0.0's Megatron-LM plugin with Megatron's argument defaults, ``megatron/arguments.py``). The
matrix products are the same (fused QKV in both, tied output head); what is on by default in
Megatron changes the element-wise work around them:

- the attention scores: ``CoreAttention`` scales Q.K^T inside ``baddbmm``
  (``alpha = 1/sqrt(d)``), so HF's ``truediv`` over the scores is not run. The causal mask stays a
  kernel of its own: ``FusedScaleMaskSoftmax`` only fuses it for fp16/bf16 input
  (``is_kernel_available``); in FP32 it runs ``attention_mask_func`` (an in-place ``masked_fill_``,
  the same traffic as HF's ``where``) and then the softmax;
- ``--no-bias-gelu-fusion`` not given: ``ParallelMLP`` adds the h->4h bias inside one fused
  (TorchScript) bias+GeLU kernel, forward and backward, instead of HF's eight-kernel tanh GeLU;
- ``--no-bias-dropout-fusion`` not given: bias, dropout and the residual add after attention and
  after the MLP are one kernel (``bias_dropout_add_fused_train``), not a dropout then an add;
- ``--no-gradient-accumulation-fusion`` not given: the weight-gradient GEMM accumulates straight
  into the fp32 ``main_grad`` buffer (``fused_weight_gradient_mlp_cuda``), so the separate
  gradient accumulation of every Linear weight is not run (its size still counts as a gradient).

The TorchScript fusions run as fused kernels on the labels' torch 2.1.0 (NeuSight's README):
Megatron's ``set_jit_fusion_options`` turns on nvFuser for torch 1.10-2.1 and warms the fused
functions up before training (``megatron/initialize.py``; nvFuser left TorchScript in 2.2, see
Megatron-LM's later ``megatron/core/jit.py``).

Nothing here is fitted: nodes are removed or merged by what they compute; fused kernels are costed
by the same element-wise model as every other kernel.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from habitat.evaluate import models as M

Predict = Callable[[M.Part], float]


def _fn(node: M.NodeWork) -> str:
    return node.name.rstrip("_0123456789")


def _elementwise_out(node: M.NodeWork) -> float:
    fw = node.parts.get("fw") or []
    return fw[0].shape["n"] if len(fw) == 1 and fw[0].family == "elementwise" else 0.0


def _rescaled(old: M.NodeWork, parts: dict[str, list[M.Part]], origin: Predict) -> M.NodeWork:
    """The node with new parts; its measured times scaled by the origin model's ratio of new to
    old work, so the runtime-based forecast also runs the fused kernel, not the unfused one."""
    measured = dict(old.measured)
    for phase, t in old.measured.items():
        before, after = old.parts.get(phase), parts.get(phase)
        if before and after is not None:
            b = M._parts_time(before, origin)
            measured[phase] = t * M._parts_time(after, origin) / b if b > 0 else t
        elif before and after is None:
            measured[phase] = 0.0
    return replace(old, parts=parts, measured=measured)


def megatron_gpt(nodes: list[M.NodeWork], hidden: int, origin: Predict) -> list[tuple[M.NodeWork, int]]:
    """Rewrite the repeated transformer layer of an HF GPT-2 trace into Megatron's kernels (see
    the module docstring); nodes outside the layer are kept as they are. Returns each new node
    with the index of the trace node it comes from (removed nodes stay, with no work)."""
    out: list[tuple[M.NodeWork, int]] = []
    mlp_width = 4.0 * hidden
    i = 0
    while i < len(nodes):
        n = nodes[i]
        fn = _fn(n)
        if n.repeat <= 1:
            out.append((n, i))
            i += 1
            continue
        # Attention scale: folded into baddbmm.
        if fn == "truediv" and _elementwise_out(n) > 0:
            out.append((_rescaled(n, {}, origin), i))
            i += 1
            continue
        # The tanh GeLU: a run of element-wise nodes over the 4h-wide MLP activation.
        if _elementwise_out(n) > 0 and _elementwise_out(n) % mlp_width == 0 and fn in ("mul", "pow", "add", "tanh"):
            j = i
            while j < len(nodes) and _elementwise_out(nodes[j]) == _elementwise_out(n) and \
                    _fn(nodes[j]) in ("mul", "pow", "add", "tanh"):
                j += 1
            if j - i >= 3:
                elems = _elementwise_out(n)
                fused = M.NodeWork(f"{n.name}_bias_gelu", n.repeat,
                                   {"fw": 0.0, "bw": 0.0, "acc": 0.0},
                                   {"fw": [M._elem(elems, 1, True)], "bw": [M._elem(elems, 2, True)]})
                fused.measured = {"fw": M._parts_time(fused.parts["fw"], origin),
                                  "bw": M._parts_time(fused.parts["bw"], origin), "acc": 0.0}
                out.append((fused, i))
                out.extend((_rescaled(nodes[x], {}, origin), x) for x in range(i, j))
                i = j
                continue
        # Dropout then the residual add: one bias-dropout-add kernel reading both inputs.
        if n.parts.get("fw") and n.parts["fw"][0].family == "elementwise" and "dropout" in n.name \
                and i + 1 < len(nodes) and _fn(nodes[i + 1]) == "add" \
                and _elementwise_out(nodes[i + 1]) == _elementwise_out(n):
            elems = _elementwise_out(n)
            parts = dict(n.parts)
            parts["fw"] = [M._elem(elems, 2)]
            out.append((_rescaled(n, parts, origin), i))
            out.append((_rescaled(nodes[i + 1], {}, origin), i + 1))
            i += 2
            continue
        # Weight-gradient accumulation fused into the wgrad GEMM: no time, same gradient size.
        acc = n.parts.get("acc")
        if acc and any(p.family == "gemm" for p in n.parts.get("fw", [])):
            parts = dict(n.parts)
            parts["acc"] = [replace(p, scale=0.0) for p in acc]
            out.append((_rescaled(n, parts, origin), i))
            i += 1
            continue
        out.append((n, i))
        i += 1
    return out
