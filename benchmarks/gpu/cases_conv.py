"""Convolution and batch norm cases of the kernel collector: dense convolutions (family conv) and
training-mode batch norm (batchnorm)."""
from __future__ import annotations

from typing import Any

import torch
from kernel_case import DTYPES, MEMORY_FORMATS, MEMORY_PRECISIONS, Case, no_grad

# (precision, layout) of each conv case: fp32 with TF32 off runs cuDNN's NCHW SIMT kernels; the
# tensor-core precisions run NHWC kernels, wrapped in layout transforms when given NCHW tensors.
CONV_VARIANTS = (("fp32", "nchw"), ("tf32", "nchw"), ("tf32", "nhwc"), ("bf16", "nchw"), ("bf16", "nhwc"))


def conv_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    cases = []
    for base in shapes:
        batch, cin, cout = base["B"], base["Input_Channel"], base["Output_Channel"]
        ksize, size, stride, pad = base["Kernel_Szie"], base["Input_Size"], base["Stride"], base["Padding"]
        for prec, layout in CONV_VARIANTS:
            dt, fmt = DTYPES[prec], MEMORY_FORMATS[layout]
            shape = {**base, "Layout": layout}
            x = torch.randn(batch, cin, size, size, device=device, dtype=dt).contiguous(memory_format=fmt)
            w = torch.randn(cout, cin, ksize, ksize, device=device, dtype=dt).contiguous(memory_format=fmt)
            y = torch.nn.functional.conv2d(x, w, stride=stride, padding=pad)
            gy = torch.randn_like(y).contiguous(memory_format=fmt)
            del y

            def bwd(mask, x=x, w=w, gy=gy, stride=stride, pad=pad):
                return torch.ops.aten.convolution_backward(gy, x, w, None, [stride] * 2, [pad] * 2, [1, 1],
                                                           False, [0, 0], 1, mask)
            cases.append(Case("conv", "fwd", prec, dict(shape),
                              lambda x=x, w=w, s=stride, p=pad: torch.nn.functional.conv2d(x, w, stride=s, padding=p)))
            cases.append(Case("conv", "bwd_data", prec, dict(shape), lambda bwd=bwd: bwd([True, False, False])))
            cases.append(Case("conv", "bwd_weight", prec, dict(shape), lambda bwd=bwd: bwd([False, True, False])))
    return cases


def batchnorm_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    """Training-mode batch norm (batch statistics, running statistics updated), fwd and fwd+bwd
    (autograd: the backward runs on autograd's thread), NCHW and channels-last; the input in
    fp32 or bf16, parameters and statistics in fp32 (as under autocast)."""
    cases = []
    bn = torch.nn.functional.batch_norm
    for base in shapes:
        c = base["Input_Channel"]
        for prec in MEMORY_PRECISIONS:
            for layout, fmt in MEMORY_FORMATS.items():
                x = torch.randn(base["B"], c, base["Input_Size"], base["Input_Size"], device=device,
                                dtype=DTYPES[prec]).contiguous(memory_format=fmt).requires_grad_()
                w, b = (torch.randn(c, device=device, requires_grad=True) for _ in range(2))
                mean, var = torch.zeros(c, device=device), torch.ones(c, device=device)
                gy = torch.randn_like(x)

                def fwd(x=x, w=w, b=b, mean=mean, var=var):
                    return bn(x, mean, var, w, b, training=True)

                shape = {**base, "Layout": layout}
                cases.append(Case("bn", "fwd", prec, shape, lambda fwd=fwd: no_grad(fwd)))
                cases.append(Case("bn", "fwd+bwd", prec, dict(shape),
                                  lambda fwd=fwd, x=x, w=w, b=b, gy=gy: torch.autograd.grad(fwd(), (x, w, b), gy)))
    return cases
