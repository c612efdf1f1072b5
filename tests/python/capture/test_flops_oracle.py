"""The engine's FLOPs for captured ops against torch's own counter, FlopCounterMode.

Each case is one op, captured with its backward on the CPU (habitat.capture.record) and
forecast by the engine; its per-op rows carry the FLOPs the roofline and the reports use.
FlopCounterMode counts only matrix products, convolutions and attention, so the engine's
FLOPs are summed over the top-level ops of those classes, per phase (forward, backward):
with one op per case, that is the op's own count. Where the two conventions differ, the
test asserts the documented relation instead of equality, and says why.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from habitat.capture.environment import trace_origin
from habitat.capture.record import record_step
from habitat.data import engine

aten = torch.ops.aten

#: The engine's op classes whose FLOPs FlopCounterMode counts too (it has no formula for
#: elementwise ops, reductions or norms: e.g. a linear layer's bias gradient, an aten::sum).
MATRIX_CLASSES = {"gemm", "conv", "attention"}

Phases = dict[str, float]


def leaf(*shape: int, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=grad)


def engine_flops(op: Callable[[], torch.Tensor], grad: torch.Tensor) -> tuple[Phases, set[str]]:
    """The engine's FLOPs of one captured step (op and its backward), per phase, and the
    names of the ops captured at every depth."""
    with record_step(0) as rec:
        op().backward(grad)
    step = rec.step
    forecast = engine.forecast_step(trace_origin("cpu"), step, ["A100"])
    rows = {row["id"]: row for row in forecast["ops"]}
    totals = {"forward": 0.0, "backward": 0.0}
    for captured in step["ops"]:
        row = rows[captured["id"]]
        if "parent" not in captured and row["class"] in MATRIX_CLASSES:
            totals[captured["phase"]] += row["flops"]
    return totals, {captured["name"] for captured in step["ops"]}


def torch_flops(op: Callable[[], torch.Tensor], grad: torch.Tensor,
                custom_mapping: dict[Any, Any] | None = None) -> Phases:
    """FlopCounterMode's FLOPs of the same op and its backward, per phase."""
    with FlopCounterMode(display=False, custom_mapping=custom_mapping) as forward:
        out = op()
    with FlopCounterMode(display=False, custom_mapping=custom_mapping) as backward:
        out.backward(grad)
    return {"forward": forward.get_total_flops(), "backward": backward.get_total_flops()}


def both(op: Callable[[], torch.Tensor], custom_mapping: dict[Any, Any] | None = None,
         kernel: str | None = None) -> tuple[Phases, Phases]:
    """(the engine's FLOPs, FlopCounterMode's) of `op` and its backward; `kernel`: an aten op
    the capture must hold (the path the case is about was taken)."""
    torch.manual_seed(0)
    grad = torch.randn_like(op())
    ours, names = engine_flops(op, grad)
    assert kernel is None or kernel in names, f"{kernel} not captured: {sorted(names)}"
    return ours, torch_flops(op, grad, custom_mapping)


def gemm_cases() -> dict[str, Callable[[], Callable[[], torch.Tensor]]]:
    def mm():
        a, b = leaf(64, 96), leaf(96, 48)
        return lambda: torch.mm(a, b)

    def matmul():
        a, b = leaf(64, 96), leaf(96, 48)
        return lambda: a @ b

    def addmm():
        c, a, b = leaf(48), leaf(64, 96), leaf(96, 48)
        return lambda: torch.addmm(c, a, b, beta=0.5, alpha=2.0)

    def bmm():
        a, b = leaf(6, 32, 40), leaf(6, 40, 24)
        return lambda: torch.bmm(a, b)

    def baddbmm():
        c, a, b = leaf(6, 32, 24), leaf(6, 32, 40), leaf(6, 40, 24)
        return lambda: torch.baddbmm(c, a, b, beta=0.5)

    def matmul_3d_2d():  # folded into one mm
        a, b = leaf(4, 32, 40), leaf(40, 24)
        return lambda: a @ b

    def matmul_broadcast_batch():  # [2, 1] x [3] batch dimensions: expanded into one bmm
        a, b = leaf(2, 1, 32, 40), leaf(3, 40, 24)
        return lambda: a @ b

    def linear_bias():
        x, w, b = leaf(64, 96), leaf(48, 96), leaf(48)
        return lambda: F.linear(x, w, b)

    def linear_no_bias():
        x, w = leaf(64, 96), leaf(48, 96)
        return lambda: F.linear(x, w)

    def linear_3d_bias():
        x, w, b = leaf(4, 16, 96), leaf(48, 96), leaf(48)
        return lambda: F.linear(x, w, b)

    def linear_frozen_input():  # the first layer: no gradient for the input, one mm backward
        x, w, b = leaf(64, 96, grad=False), leaf(48, 96), leaf(48)
        return lambda: F.linear(x, w, b)

    return {f.__name__: f for f in (mm, matmul, addmm, bmm, baddbmm, matmul_3d_2d, matmul_broadcast_batch,
                                    linear_bias, linear_no_bias, linear_3d_bias, linear_frozen_input)}


@pytest.mark.parametrize("case", sorted(gemm_cases()))
def test_gemm_flops_equal_flop_counter(case: str):
    # Both count 2 FLOPs per multiply-add and no FLOPs for the addmm/linear bias epilogue
    # (csrc/src/cost/op_cost_gemm.cpp); the linear bias gradient is an aten::sum, a reduction
    # for the engine and uncounted by FlopCounterMode, so outside MATRIX_CLASSES.
    ours, theirs = both(gemm_cases()[case]())
    assert ours["forward"] > 0
    assert ours == theirs


# (input shape, weight shape, conv2d keyword arguments)
CONV_CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "3x3": ((2, 8, 16, 16), (16, 8, 3, 3), {"padding": 1}),
    "3x3_stride2": ((2, 8, 17, 17), (16, 8, 3, 3), {"stride": 2, "padding": 1}),
    "5x5_no_padding": ((2, 4, 12, 12), (8, 4, 5, 5), {}),
    "3x3_dilation2": ((2, 4, 16, 16), (8, 4, 3, 3), {"padding": 2, "dilation": 2}),
    "1x1_stride2": ((2, 16, 8, 8), (32, 16, 1, 1), {"stride": 2}),
    "rect_stride_2x1": ((2, 4, 12, 10), (8, 4, 3, 1), {"stride": (2, 1), "padding": (1, 0)}),
    "groups4": ((2, 16, 10, 10), (24, 4, 3, 3), {"padding": 1, "groups": 4}),
    "depthwise": ((2, 16, 12, 12), (16, 1, 3, 3), {"padding": 1, "groups": 16}),
    "depthwise_stride2_multiplier2": ((2, 8, 12, 12), (16, 1, 3, 3), {"stride": 2, "padding": 1, "groups": 8}),
}


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("input_grad", [True, False], ids=["input_grad", "frozen_input"])
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv2d_flops_against_flop_counter(case: str, input_grad: bool, bias: bool):
    x_shape, w_shape, kwargs = CONV_CASES[case]
    x, w = leaf(*x_shape, grad=input_grad), leaf(*w_shape)
    b = leaf(w_shape[0]) if bias else None
    ours, theirs = both(lambda: F.conv2d(x, w, b, **kwargs))
    groups = kwargs.get("groups", 1)
    fwd = theirs["forward"]
    # Forward: 2 * elements(output) * elements(weight) / Cout from both, the bias add counted
    # by neither (csrc/src/cost/op_cost_conv.cpp).
    assert fwd > 0 and ours["forward"] == fwd
    # Backward: the input gradient (when asked) and the weight gradient each cost a forward
    # pass; the engine also counts the bias gradient's reduction, one add per element of
    # grad_output, which FlopCounterMode leaves out (it has no bias term).
    out_elements = torch.Size(F.conv2d(x, w, **kwargs).shape).numel()
    passes = 2 if input_grad else 1
    assert ours["backward"] == passes * fwd + (out_elements if bias else 0)
    # FlopCounterMode counts the weight gradient of a grouped convolution `groups` times over
    # in torch 2.13: its formula transposes the shapes and loses the division by groups
    # (pytorch/pytorch#183405 divides by groups). Accept either, the engine's being right.
    torch_weight_grad = theirs["backward"] - (fwd if input_grad else 0)
    assert torch_weight_grad in (fwd, groups * fwd)


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_conv_transpose2d_flops_against_flop_counter(bias: bool):
    x, w = leaf(2, 16, 8, 8), leaf(16, 8, 3, 3)  # weight: [Cin, Cout, k, k]
    b = leaf(8) if bias else None
    kwargs: dict[str, Any] = {"stride": 2, "padding": 1, "output_padding": 1}
    ours, theirs = both(lambda: F.conv_transpose2d(x, w, b, **kwargs))
    # Transposed: 2 * elements(input) * elements(weight) / Cin, as FlopCounterMode counts it;
    # the bias gradient as for conv2d.
    assert ours["forward"] == theirs["forward"] == 2 * x.numel() * w.numel() / w.shape[0]
    out_elements = F.conv_transpose2d(x, w, **kwargs).numel()
    assert ours["backward"] == theirs["backward"] + (out_elements if bias else 0)


def fused_sdpa_formulas() -> dict[Any, Any]:
    """FlopCounterMode's own SDPA formulas, for the CPU's fused kernel, which it has no entry
    for (it counts the flash, memory-efficient and cuDNN kernels only, so the CPU kernel counts
    as 0): the formulas torch applies to the GPU kernels of the same call."""

    def forward(q, k, v, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return flop_counter.sdpa_flop_count(q, k, v)

    def backward(grad_out, q, k, v, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        return flop_counter.sdpa_backward_flop_count(grad_out, q, k, v)

    return {aten._scaled_dot_product_flash_attention_for_cpu: forward,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: backward}


# (batch, query heads, key/value heads, query length, key length, head dim, value head dim)
SDPA_CASES = {
    "self": (2, 4, 4, 32, 32, 16, 16),
    "cross": (2, 4, 4, 24, 40, 16, 16),
    "gqa": (2, 8, 2, 32, 32, 16, 16),
}
FUSED_CPU_KERNEL = "aten::_scaled_dot_product_flash_attention_for_cpu"


def sdpa_op(case: str, causal: bool = False) -> Callable[[], torch.Tensor]:
    b, hq, hkv, lq, lk, e, ev = SDPA_CASES[case]
    q, k, v = leaf(b, hq, lq, e), leaf(b, hkv, lk, e), leaf(b, hkv, lk, ev)
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)


@pytest.mark.parametrize("case", sorted(SDPA_CASES))
def test_fused_sdpa_flops_equal_torch_formulas(case: str):
    # Forward 2 * pairs * (E + Ev); backward recomputes the scores: 2 * pairs * (3E + 2Ev).
    ours, theirs = both(sdpa_op(case), fused_sdpa_formulas(), kernel=FUSED_CPU_KERNEL)
    assert ours["forward"] > 0
    assert ours == theirs


def test_causal_sdpa_counts_half_the_pairs():
    # The engine counts half the (query, key) pairs under a causal mask, which flash and
    # memory-efficient kernels skip tile by tile; FlopCounterMode ignores masks ("We aren't
    # accounting for causal attention here", torch/utils/flop_counter.py).
    ours, theirs = both(sdpa_op("self", causal=True), fused_sdpa_formulas(), kernel=FUSED_CPU_KERNEL)
    assert ours["forward"] > 0
    assert ours == {phase: flops / 2 for phase, flops in theirs.items()}


def test_math_sdpa_flops_equal_flop_counter():
    # The math backend: SDPA decomposed into matmuls, which FlopCounterMode counts itself (no
    # formula lent). Forecast for a CUDA GPU, the forward is the captured SDPA op, which the
    # engine counts as two products, as FlopCounterMode does. The backward's pieces (bmm,
    # softmax backward) give way to the fused backward CUDA runs (csrc/src/predict/
    # attention_backward.h), which recomputes the scores: one product more than the pieces.
    with sdpa_kernel(SDPBackend.MATH):
        ours, theirs = both(sdpa_op("cross"), kernel="aten::_scaled_dot_product_attention_math")
    b, hq, _, lq, lk, e, ev = SDPA_CASES["cross"]
    pairs = b * hq * lq * lk
    assert theirs == {"forward": 2 * pairs * (e + ev), "backward": 2 * pairs * (2 * e + 2 * ev)}
    assert ours == {"forward": 2 * pairs * (e + ev), "backward": 2 * pairs * (3 * e + 2 * ev)}
