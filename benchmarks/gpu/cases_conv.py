"""Convolution and batch norm cases of the kernel collector: dense convolutions (family conv),
grouped and depthwise ones (gconv), 1x1 ones (pointwise), 3-D ones (conv3d), training-mode batch
norm (batchnorm)."""
from __future__ import annotations

from typing import Any

import torch
from kernel_case import DTYPES, MEMORY_FORMATS, MEMORY_PRECISIONS, Case, no_grad

# (precision, layout) of each conv case: fp32 with TF32 off runs cuDNN's NCHW SIMT kernels; the
# tensor-core precisions run NHWC kernels, wrapped in layout transforms when given NCHW tensors.
CONV_VARIANTS = (("fp32", "nchw"), ("tf32", "nchw"), ("tf32", "nhwc"), ("bf16", "nchw"), ("bf16", "nhwc"))


def conv_backward(gy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, stride: int, padding: int, groups: int,
                  mask: list[bool]) -> tuple:
    """aten.convolution_backward as autograd calls it for F.conv2d or F.conv3d (no bias, no
    dilation): the gradients `mask` asks for, (input, weight, bias)."""
    dims = x.dim() - 2
    return torch.ops.aten.convolution_backward(gy, x, w, None, [stride] * dims, [padding] * dims, [1] * dims, False,
                                               [0] * dims, groups, mask)


def _conv_cases(shapes: list[dict[str, Any]], device: str, op: str, stem: str | None = None) -> list[Case]:
    """fwd, bwd_data and bwd_weight of each shape in each CONV_VARIANTS; `Groups` (default 1)
    splits the channels; `Depth`, where a shape has it, makes the convolution 3-D (a cube
    filter; "nhwc" is then channels_last_3d). The backward passes (conv_backward) compute one
    gradient each."""
    cases = []
    for base in shapes:
        batch, cin, cout = base["B"], base["Input_Channel"], base["Output_Channel"]
        ksize, size, stride, pad = base["Kernel_Szie"], base["Input_Size"], base["Stride"], base["Padding"]
        groups = base.get("Groups", 1)
        depth = base.get("Depth")
        spatial, taps = ((depth, size, size), (ksize,) * 3) if depth else ((size, size), (ksize,) * 2)
        conv = torch.nn.functional.conv3d if depth else torch.nn.functional.conv2d
        for prec, layout in CONV_VARIANTS:
            dt = DTYPES[prec]
            fmt = torch.channels_last_3d if depth and layout == "nhwc" else MEMORY_FORMATS[layout]
            shape = {**base, "Layout": layout}
            x = torch.randn(batch, cin, *spatial, device=device, dtype=dt).contiguous(memory_format=fmt)
            w = torch.randn(cout, cin // groups, *taps, device=device, dtype=dt).contiguous(memory_format=fmt)
            y = conv(x, w, stride=stride, padding=pad, groups=groups)
            gy = torch.randn_like(y).contiguous(memory_format=fmt)
            del y

            def fwd(x=x, w=w, s=stride, p=pad, g=groups, conv=conv):
                return conv(x, w, stride=s, padding=p, groups=g)

            def bwd(mask, x=x, w=w, gy=gy, s=stride, p=pad, g=groups):
                return conv_backward(gy, x, w, s, p, g, mask)
            cases.append(Case(op, "fwd", prec, dict(shape), fwd, stem))
            cases.append(Case(op, "bwd_data", prec, dict(shape), lambda bwd=bwd: bwd([True, False, False]), stem))
            cases.append(Case(op, "bwd_weight", prec, dict(shape), lambda bwd=bwd: bwd([False, True, False]), stem))
    return cases


def conv_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    return _conv_cases(shapes, device, "conv")


def gconv_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    """OPName gconv (gconv_<precision>.csv): not a dense conv's row, its `Groups` column says how
    the channels split (depthwise: Groups == Input_Channel == Output_Channel)."""
    return _conv_cases(shapes, device, "gconv")


def pointwise_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    """Dense convolutions (OPName conv, read with the conv family's rows) in their own files,
    conv1x1_<precision>.csv, so no other family's run rewrites them."""
    return _conv_cases(shapes, device, "conv", stem="conv1x1")


def stem_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    """Dense convolutions (OPName conv) in their own files, convstem_<precision>.csv."""
    return _conv_cases(shapes, device, "conv", stem="convstem")


def conv3d_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    """3-D convolutions (OPName conv3d: no model reads them yet), conv3d_<precision>.csv."""
    return _conv_cases(shapes, device, "conv3d")


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
