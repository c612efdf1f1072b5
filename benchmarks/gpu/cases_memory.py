"""Memory-bound cases of the kernel collector on B x H tensors, in fp32 and bf16: NeuSight's
element-wise ops (family elementwise), activations forward and backward (activation), layer norm
(layernorm), RMS norm (rmsnorm), softmax (softmax), sum and mean over either dimension
(reduction), and the norms and softmax on tensors past 2^25 elements (largenorm)."""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

import torch
from kernel_case import DTYPES, MEMORY_PRECISIONS, Case

F = torch.nn.functional
A = torch.ops.aten
# NeuSight's element-wise ops (habitat.learned.neusight.ELEMENTWISE_OPS): "u" = with a scalar.
ELEMENTWISE = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
               "addu": lambda x, y: x + 0.5, "mulu": lambda x, y: x * 0.5, "relu": lambda x, y: torch.relu(x),
               "gelu": lambda x, y: F.gelu(x), "tanh": lambda x, y: torch.tanh(x)}
# Activation -> (forward, backward as autograd calls it: (grad, input, output) -> grad input).
# GPT-2 runs GELU's tanh form, MobileNet-v2 ReLU6 (aten hardtanh), MobileNet-v3 hardswish and
# hardsigmoid, EfficientNet SiLU and sigmoid (squeeze-excitation).
ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "relu": (torch.relu, lambda g, x, y: A.threshold_backward(g, y, 0)),
    "relu6": (F.relu6, lambda g, x, y: A.hardtanh_backward(g, x, 0.0, 6.0)),
    "gelu": (F.gelu, lambda g, x, y: A.gelu_backward(g, x)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda g, x, y: A.gelu_backward(g, x, approximate="tanh")),
    "silu": (F.silu, lambda g, x, y: A.silu_backward(g, x)),
    "hardswish": (F.hardswish, lambda g, x, y: A.hardswish_backward(g, x)),
    "hardsigmoid": (F.hardsigmoid, lambda g, x, y: A.hardsigmoid_backward(g, x)),
    "sigmoid": (torch.sigmoid, lambda g, x, y: A.sigmoid_backward(g, y)),
    "tanh": (torch.tanh, lambda g, x, y: A.tanh_backward(g, y)),
}
# The activations whose backward reads their output (the others read their input).
FROM_OUTPUT = {"relu", "sigmoid", "tanh"}
REDUCTIONS = {"sum": torch.sum, "mean": torch.mean}


def _row_tensors(shapes: list[dict[str, int]], device: str) -> Iterable[tuple[dict[str, int], str, torch.Tensor]]:
    """(shape, precision, a random B x H tensor) for every shape in every MEMORY_PRECISIONS."""
    for s in shapes:
        for prec in MEMORY_PRECISIONS:
            yield s, prec, torch.randn(s["B"], s["H"], device=device, dtype=DTYPES[prec])


def elementwise_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        y = torch.rand_like(x) + 0.5
        cases += [Case(op, "fwd", prec, dict(s), lambda f=f, x=x, y=y: f(x, y)) for op, f in ELEMENTWISE.items()]
    return cases


def activation_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """Each activation's forward and backward (Phase bwd: the aten backward op alone, on a
    stored input and output), all in activation_<precision>.csv with the activation as OPName
    (relu, gelu and tanh forward rows read like elementwise's)."""
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        g = torch.randn_like(x)
        for op, (fwd, bwd) in ACTIVATIONS.items():
            y = fwd(x) if op in FROM_OUTPUT else None
            cases.append(Case(op, "fwd", prec, dict(s), lambda fwd=fwd, x=x: fwd(x), "activation"))
            cases.append(Case(op, "bwd", prec, dict(s), lambda bwd=bwd, g=g, x=x, y=y: bwd(g, x, y), "activation"))
    return cases


def layernorm_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        w, b = torch.randn(s["H"], device=device, dtype=x.dtype), torch.randn(s["H"], device=device, dtype=x.dtype)
        _, mean, rstd = A.native_layer_norm(x, [s["H"]], w, b, 1e-5)
        gy = torch.randn_like(x)
        cases.append(Case("ln", "fwd", prec, dict(s),
                          lambda x=x, w=w, b=b: F.layer_norm(x, x.shape[-1:], w, b)))
        cases.append(Case("ln", "bwd", prec, dict(s), lambda gy=gy, x=x, m=mean, r=rstd, w=w, b=b:
                          A.native_layer_norm_backward(gy, x, list(x.shape[-1:]), m, r, w, b, [True, True, True])))
    return cases


def rmsnorm_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """torch's fused RMS norm (the layer-norm kernels without the mean on CUDA) and its fused
    backward; none on a torch without _fused_rms_norm. CUDA alone has a kernel for the backward:
    a CPU dry run times autograd's backward of the composite instead."""
    if not hasattr(A, "_fused_rms_norm"):
        return []
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        w = torch.randn(s["H"], device=device, dtype=x.dtype)
        _, rstd = A._fused_rms_norm(x, [s["H"]], w, 1e-6)
        gy = torch.randn_like(x)
        cases.append(Case("rms", "fwd", prec, dict(s), lambda x=x, w=w: F.rms_norm(x, x.shape[-1:], w, 1e-6)))
        if torch.device(device).type == "cuda":
            def bwd(gy=gy, x=x, r=rstd, w=w):
                return A._fused_rms_norm_backward(gy, x, list(x.shape[-1:]), r, w, [True, True])
        else:
            xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
            y = F.rms_norm(xg, xg.shape[-1:], wg, 1e-6)

            def bwd(y=y, gy=gy, xg=xg, wg=wg):
                return torch.autograd.grad(y, (xg, wg), gy, retain_graph=True)
        cases.append(Case("rms", "bwd", prec, dict(s), bwd))
    return cases


def large_norm_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """Layer norm, RMS norm and softmax, forward and backward, on the largenorm family's large
    tensors: the same cases as their own families, in files of their own (<op>_large_*)."""
    cases = layernorm_cases(shapes, device) + rmsnorm_cases(shapes, device) + softmax_cases(shapes, device)
    return [dataclasses.replace(c, stem=f"{c.op}_large") for c in cases]


def softmax_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        y, gy = torch.softmax(x, -1), torch.randn_like(x)
        cases.append(Case("softmax", "fwd", prec, dict(s), lambda x=x: torch.softmax(x, -1)))
        cases.append(Case("softmax", "bwd", prec, dict(s), lambda gy=gy, y=y:
                          A._softmax_backward_data(gy, y, -1, y.dtype)))
    return cases


def reduction_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """sum and mean over the last dimension (`Dim` 1: a row reduction, as in a norm's
    statistics or global pooling) and over the first (`Dim` 0: a column reduction, as in a bias
    gradient)."""
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        cases += [Case(op, "fwd", prec, {**s, "Dim": d}, lambda f=f, x=x, d=d: f(x, dim=d))
                  for op, f in REDUCTIONS.items() for d in (1, 0)]
    return cases
