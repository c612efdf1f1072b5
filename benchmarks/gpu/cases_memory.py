"""Memory-bound cases of the kernel collector on B x H tensors, in fp32 and bf16: NeuSight's
element-wise ops (family elementwise), layer norm (layernorm), softmax (softmax), sum over either
dimension (reduction)."""
from __future__ import annotations

from typing import Iterable

import torch
from kernel_case import DTYPES, MEMORY_PRECISIONS, Case

F = torch.nn.functional
A = torch.ops.aten
# NeuSight's element-wise ops (habitat.learned.neusight.ELEMENTWISE_OPS): "u" = with a scalar.
ELEMENTWISE = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
               "addu": lambda x, y: x + 0.5, "mulu": lambda x, y: x * 0.5, "relu": lambda x, y: torch.relu(x),
               "gelu": lambda x, y: F.gelu(x), "tanh": lambda x, y: torch.tanh(x)}


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


def softmax_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        y, gy = torch.softmax(x, -1), torch.randn_like(x)
        cases.append(Case("softmax", "fwd", prec, dict(s), lambda x=x: torch.softmax(x, -1)))
        cases.append(Case("softmax", "bwd", prec, dict(s), lambda gy=gy, y=y:
                          A._softmax_backward_data(gy, y, -1, y.dtype)))
    return cases


def reduction_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """sum over the last dimension (a row reduction, as in a norm's statistics) and over the
    first (a column reduction, as in a bias gradient)."""
    cases = []
    for s, prec, x in _row_tensors(shapes, device):
        cases += [Case("sum", "fwd", prec, {**s, "Dim": d}, lambda x=x, d=d: x.sum(dim=d)) for d in (1, 0)]
    return cases
