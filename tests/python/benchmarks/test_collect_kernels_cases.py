"""The kernel collector's cases (benchmarks/gpu/cases_*.py) on the CPU: each family's cases cover
its precisions, layouts and phases, keep their shape columns, and compute what a training step
computes (each backward case against autograd's gradient)."""
from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace

import pytest
import torch
from bench_scripts import loaded_script

F = torch.nn.functional
MODULES = ("cases_conv", "cases_matmul", "cases_memory", "cases_training", "kernel_case")


@pytest.fixture(scope="module")
def kc():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels"):
        yield SimpleNamespace(**{m.split("_", 1)[1]: sys.modules[m] for m in MODULES})


def _by(cases, *keys):
    return {tuple(c.shape.get(k, getattr(c, k, None)) for k in keys): c for c in cases}


def _conv_shape(**kw):
    return {"B": 2, "Input_Channel": 8, "Output_Channel": 8, "Kernel_Szie": 3, "Input_Size": 6, "Stride": 1,
            "Padding": 1, **kw}


def test_conv_cases_cover_tf32_and_channels_last(kc):
    cases = kc.conv.conv_cases([_conv_shape()], "cpu")
    assert {(c.precision, c.shape["Layout"]) for c in cases} == set(kc.conv.CONV_VARIANTS)
    assert len(cases) == 3 * len(kc.conv.CONV_VARIANTS) and {c.op for c in cases} == {"conv"}
    fwd = next(c for c in cases if c.phase == "fwd" and c.shape["Layout"] == "nhwc" and c.precision == "tf32")
    assert fwd.run().is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("groups,stride,ksize", [(8, 1, 3), (8, 2, 5), (2, 1, 7), (4, 2, 3), (1, 2, 1)])
def test_conv_backward_is_autograds(kc, groups, stride, ksize):
    x = torch.randn(2, 8, 6, 6, requires_grad=True)
    w = torch.randn(8, 8 // groups, ksize, ksize, requires_grad=True)
    y = F.conv2d(x, w, stride=stride, padding=ksize // 2, groups=groups)
    gy = torch.randn_like(y)
    gx, gw = torch.autograd.grad(y, (x, w), gy)
    data = kc.conv.conv_backward(gy, x.detach(), w.detach(), stride, ksize // 2, groups, [True, False, False])
    weight = kc.conv.conv_backward(gy, x.detach(), w.detach(), stride, ksize // 2, groups, [False, True, False])
    assert torch.allclose(data[0], gx, atol=1e-4) and data[1] is None
    assert torch.allclose(weight[1], gw, atol=1e-3) and weight[0] is None


def test_grouped_conv_cases(kc):
    shape = _conv_shape(Groups=8, Stride=2, Kernel_Szie=5, Padding=2)
    cases = _by(kc.conv.gconv_cases([shape], "cpu"), "phase", "precision", "Layout")
    assert len(cases) == 3 * len(kc.conv.CONV_VARIANTS) and {c.op for c in cases.values()} == {"gconv"}
    assert {c.file for c in cases.values()} == {"gconv_fp32", "gconv_tf32", "gconv_bf16"}
    assert all(c.shape["Groups"] == 8 for c in cases.values())
    assert cases["fwd", "bf16", "nhwc"].run().shape == (2, 8, 3, 3)
    dx, dw, _ = cases["bwd_data", "fp32", "nchw"].run()
    assert dx.shape == (2, 8, 6, 6) and dw is None
    _, dw, _ = cases["bwd_weight", "tf32", "nhwc"].run()
    assert dw.shape == (8, 1, 5, 5)


def test_pointwise_rows_are_conv_rows_in_their_own_files(kc):
    cases = kc.conv.pointwise_cases([_conv_shape(Kernel_Szie=1, Padding=0, Output_Channel=16, Stride=2)], "cpu")
    assert {c.op for c in cases} == {"conv"} and {c.file for c in cases} == {"conv1x1_fp32", "conv1x1_tf32",
                                                                              "conv1x1_bf16"}
    assert next(c for c in cases if c.phase == "fwd").run().shape == (2, 16, 3, 3)


def test_batch_norm_training_cases(kc):
    bn = kc.conv.batchnorm_cases([{"B": 2, "Input_Channel": 8, "Input_Size": 4}], "cpu")
    assert {(c.phase, c.precision, c.shape["Layout"]) for c in bn} == {
        (ph, p, lay) for ph in ("fwd", "fwd+bwd") for p in ("fp32", "bf16") for lay in ("nchw", "nhwc")}
    assert {c.file for c in bn} == {"bn_fp32", "bn_bf16"}
    cases = _by(bn, "phase", "precision", "Layout")
    nhwc = cases["fwd", "bf16", "nhwc"].run()
    assert nhwc.is_contiguous(memory_format=torch.channels_last) and nhwc.dtype == torch.bfloat16
    dx, dw, db = cases["fwd+bwd", "bf16", "nhwc"].run()
    assert dx.dtype == torch.bfloat16 and dw.dtype == db.dtype == torch.float32  # autocast's mix
    assert dx.shape == (2, 8, 4, 4) and dw.shape == (8,)


def test_attention_cases_cover_backends_causal_and_phases(kc):
    backends = {"flash": contextlib.nullcontext, "math": contextlib.nullcontext}
    cases = kc.matmul.attention_cases([{"B": 1, "H": 2, "L": 16, "S": 24, "E": 8}], "cpu", backends)
    keys = {(c.precision, c.shape["Backend"], c.shape["Causal"], c.phase) for c in cases}
    assert len(keys) == len(cases) == 3 * 2 * 2 * 2
    assert {c.file for c in cases} == {"sdpa_bf16", "sdpa_fp16", "sdpa_fp32"}
    fwd_bwd = next(c for c in cases if c.phase == "fwd+bwd" and c.precision == "fp32")
    dq, dk, dv = fwd_bwd.run()
    assert dq.shape == (1, 2, 16, 8) and dk.shape == dv.shape == (1, 2, 24, 8)
    assert set(kc.matmul.sdpa_backends()) <= set(kc.matmul.SDPA_BACKENDS)
    assert "math" in kc.matmul.sdpa_backends()


def test_memory_bound_cases_run_and_keep_their_shapes(kc):
    one = [{"B": 3, "H": 8}]
    ew = kc.memory.elementwise_cases(one, "cpu")
    assert {(c.op, c.precision) for c in ew} == {(op, p) for op in kc.memory.ELEMENTWISE for p in ("fp32", "bf16")}
    assert all(c.run().shape == (3, 8) for c in ew)
    ln = {(c.phase, c.precision): c for c in kc.memory.layernorm_cases(one, "cpu")}
    dx, dw, db = ln["bwd", "fp32"].run()
    assert dx.shape == (3, 8) and dw.shape == db.shape == (8,)
    sm = {(c.phase, c.precision): c for c in kc.memory.softmax_cases(one, "cpu")}
    assert sm["fwd", "bf16"].run().dtype == torch.bfloat16 and sm["bwd", "fp32"].run().shape == (3, 8)


def test_reductions_over_either_dimension(kc):
    cases = kc.memory.reduction_cases([{"B": 3, "H": 8}], "cpu")
    assert {(c.op, c.shape["Dim"], c.precision) for c in cases} == {
        (op, d, p) for op in ("sum", "mean") for d in (0, 1) for p in ("fp32", "bf16")}
    assert {c.file for c in cases} == {"sum_fp32", "sum_bf16", "mean_fp32", "mean_bf16"}
    got = {(c.op, c.shape["Dim"]): c.run() for c in cases if c.precision == "fp32"}
    assert got["sum", 1].shape == got["mean", 1].shape == (3,) and got["sum", 0].shape == got["mean", 0].shape == (8,)
    assert torch.allclose(got["mean", 1] * 8, got["sum", 1]) and torch.allclose(got["mean", 0] * 3, got["sum", 0])


def test_activation_backwards_are_autograds(kc):
    x = torch.randn(4, 33) * 4  # past relu6's and the hard functions' knees too
    g = torch.randn_like(x)
    for op, (fwd, bwd) in kc.memory.ACTIVATIONS.items():
        xr = x.clone().requires_grad_()
        (want,) = torch.autograd.grad(fwd(xr), xr, g)
        y = fwd(x) if op in kc.memory.FROM_OUTPUT else None
        assert torch.allclose(bwd(g, x, y), want, atol=1e-5), op


def test_activation_cases(kc):
    cases = _by(kc.memory.activation_cases([{"B": 4, "H": 33}], "cpu"), "op", "phase", "precision")
    names = {"relu", "relu6", "gelu", "gelu_tanh", "silu", "hardswish", "hardsigmoid", "sigmoid", "tanh"}
    assert set(kc.memory.ACTIVATIONS) == names
    assert set(cases) == {(op, ph, p) for op in names for ph in ("fwd", "bwd") for p in ("fp32", "bf16")}
    assert {c.file for c in cases.values()} == {"activation_fp32", "activation_bf16"}
    for (op, phase, prec), case in cases.items():
        out = case.run()
        assert out.shape == (4, 33) and out.dtype == kc.case.DTYPES[prec], (op, phase, prec)


def test_embedding_cases(kc):
    cases = _by(kc.training.embedding_cases([{"Vocab": 11, "Dim": 6, "Tokens": 40}], "cpu"), "phase", "precision")
    assert set(cases) == {(ph, p) for ph in ("fwd", "bwd") for p in ("fp32", "bf16")}
    assert cases["fwd", "bf16"].run().shape == (40, 6) and cases["bwd", "bf16"].run().shape == (11, 6)
    assert cases["bwd", "bf16"].run().dtype == torch.bfloat16
    table, ids = torch.randn(11, 6, requires_grad=True), torch.randint(0, 11, (40,))
    grad = torch.randn(40, 6)
    (want,) = torch.autograd.grad(F.embedding(ids, table), table, grad)
    assert torch.allclose(kc.training.embedding_backward(grad, ids, 11), want, atol=1e-5)


def test_cross_entropy_cases_and_their_aten_parts(kc):
    cases = _by(kc.training.crossentropy_cases([{"Tokens": 12, "Classes": 7}], "cpu"), "op", "phase", "precision")
    assert {(op, ph) for op, ph, _ in cases} == {("cross_entropy", "fwd"), ("cross_entropy", "fwd+bwd"),
                                                 ("log_softmax", "fwd"), ("log_softmax", "bwd"),
                                                 ("nll_loss", "fwd"), ("nll_loss", "bwd")}
    assert {c.file for c in cases.values()} == {"crossentropy_fp32", "crossentropy_bf16"}
    assert all(c.shape == {"Tokens": 12, "Classes": 7} for c in cases.values())
    c = {k[:2]: v for k, v in cases.items() if k[2] == "fp32"}
    loss = c["cross_entropy", "fwd"].run()
    (grad,) = c["cross_entropy", "fwd+bwd"].run()
    nll, _ = c["nll_loss", "fwd"].run()
    assert torch.allclose(loss, nll) and torch.allclose(c["log_softmax", "fwd"].run().exp().sum(1), torch.ones(12))
    # the parts' backward chain (nll_loss, then log_softmax) is autograd's gradient
    assert torch.allclose(c["log_softmax", "bwd"].run(), grad, atol=1e-6)
    assert c["nll_loss", "bwd"].run().shape == (12, 7)


def test_multitensor_step_cases(kc):
    shape = {"Tensors": 3, "Elements": 310, "Largest": 300, "Chunks": 3, "sizes": (300, 3, 7)}
    cases = kc.training.multitensor_cases([shape], "cpu")
    got = {(c.op, c.precision, c.shape["Impl"]) for c in cases}
    assert got == ({("sgd", p, i) for p in ("fp32", "bf16") for i in ("fused", "foreach")}
                   | {("amp_unscale", "fp32", "foreach")}
                   | {("clip_grad_norm", p, "foreach") for p in ("fp32", "bf16")})
    assert all(c.phase == "step" and "sizes" not in c.shape for c in cases)
    assert {c.file for c in cases} == {"multitensor_fp32", "multitensor_bf16"}
    for case in cases:
        case.run()  # each runs again as timed: SGD's momentum buffers exist, the grads stay


def test_adamw_step_cases(kc):
    shape = {"Tensors": 3, "Elements": 310, "Largest": 300, "Chunks": 3, "sizes": (300, 3, 7)}
    cases = kc.training.adamw_cases([shape], "cpu")
    assert {(c.precision, c.shape["Impl"]) for c in cases} == {(p, i) for p in ("fp32", "bf16")
                                                               for i in ("fused", "foreach")}
    assert all(c.op == "adamw" and c.phase == "step" and "sizes" not in c.shape for c in cases)
    assert {c.file for c in cases} == {"adamw_fp32", "adamw_bf16"}
    for case in cases:
        opt = case.run.__self__
        params = opt.param_groups[0]["params"]
        assert [p.numel() for p in params] == [300, 3, 7] and params[0].dtype == kc.case.DTYPES[case.precision]
        assert opt.defaults[case.shape["Impl"]] is True and opt.state[params[0]]  # state made beforehand
        before = params[0].detach().clone()
        case.run()
        assert not torch.equal(before, params[0].detach())
