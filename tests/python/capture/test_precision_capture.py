"""Precision switches in a CPU trace (format 2) and what the forecast makes of them: ops run
under torch.autocast carry its dtype, the autocast wrapper's bf16 children are what is
costed, and per-tensor optimizer updates are costed as the foreach kernels CUDA would run."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from habitat.capture.predict import _origin, record_step
from habitat.data import engine

GPU = "H100-SXM5-80GB"


def capture(fn) -> dict[str, Any]:
    with record_step() as rec:
        fn()
    assert rec.step is not None
    return rec.step


def forecast(step: dict[str, Any]) -> dict[str, Any]:
    return engine.forecast_step(_origin("cpu"), step, [GPU])


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(768, 3072), nn.GELU(), nn.Linear(3072, 768))


def test_ops_under_autocast_record_its_dtype_and_the_origin_the_switches() -> None:
    model, x = mlp(), torch.randn(512, 768)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(x)
        model[0](x)  # after the region: the origin's switches again

    ops = capture(step)["ops"]
    linears = [op for op in ops if op["name"] == "aten::linear"]
    inside = [op for op in linears if op.get("precision", {}).get("autocast_dtype") == "bfloat16"]
    outside = [op for op in linears if "precision" not in op]
    # The autocast region's two calls carry its dtype; the bf16 calls they re-dispatch run
    # below the Autocast key (excluded there, as torch reports it), and so does the call after.
    assert len(inside) == 2
    wrapper_ids = {op["id"] for op in inside}
    assert sum(op.get("parent") in wrapper_ids for op in outside) == 2
    assert [op for op in outside if op.get("parent") is None][0]["args"][0]["tensor"]["dtype"] == "float32"
    origin = _origin("cpu")
    assert origin["cudnn_allow_tf32"] is torch.backends.cudnn.allow_tf32
    assert origin["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    assert origin["autocast_dtype"] == ""
    assert engine.TRACE_VERSION == 2


def test_switch_changes_inside_the_window_are_recorded_per_op() -> None:
    conv, x = nn.Conv2d(8, 8, 3), torch.randn(2, 8, 16, 16)
    before = torch.backends.cudnn.allow_tf32

    def step() -> None:
        torch.backends.cudnn.allow_tf32 = not before
        try:
            conv(x)
        finally:
            torch.backends.cudnn.allow_tf32 = before

    ops = capture(step)["ops"]
    convs = [op for op in ops if op["name"] == "aten::conv2d"]
    assert convs and convs[0]["precision"]["cudnn_allow_tf32"] is (not before)
    # The engine reads the op's own switch: a strict-fp32 conv is not costed on TF32.
    costed = {o["id"]: o for o in forecast({"index": 0, "wall_ms": 1.0, "ops": ops})["ops"]}
    assert costed[convs[0]["id"]]["precision"] == ("tf32" if not before else "fp32")


def test_autocast_linear_is_costed_as_the_bf16_op_it_ran() -> None:
    """The outer aten::linear keeps its fp32 arguments under autocast; its child is the bf16
    linear that ran. The forecast follows the children, so autocast is cheaper than fp32."""
    model, x = mlp(), torch.randn(512, 768)

    def fp32() -> None:
        model(x)

    def bf16() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(x)

    bf16_step = capture(bf16)
    by_id = {op["id"]: op for op in bf16_step["ops"]}
    wrappers = [op for op in bf16_step["ops"] if op["name"] == "aten::linear"
                and any(c.get("parent") == op["id"] and c["name"] == "aten::linear" for c in bf16_step["ops"])]
    assert wrappers, "autocast should re-dispatch aten::linear on bf16 casts"
    f16 = forecast(bf16_step)
    f32 = forecast(capture(fp32))
    gemms = [o for o in f16["ops"] if o["class"] == "gemm" and o["predictions"][0][2] > 0]
    assert gemms and all(o["precision"] == "bf16" for o in gemms)
    assert all(by_id[o["id"]]["name"] != "aten::linear" or by_id[o["id"]].get("parent") is not None
               for o in gemms)
    assert f16["totals"][0]["total_ms"] < 0.6 * f32["totals"][0]["total_ms"]


def test_per_tensor_adamw_is_costed_as_foreach_and_its_bookkeeping_as_host_work() -> None:
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(64, 768)).sum().backward()
    opt.step()  # state exists, as in a steady-state step
    step = capture(opt.step)
    f = forecast(step)["ops"]
    by_id = {op["id"]: op for op in step["ops"]}
    scalar_ops = [o for o in f if by_id[o["id"]].get("phase") == "optimizer"
                  and all(not t.get("shape") for a in by_id[o["id"]].get("args", [])
                          for t in ([a["tensor"]] if "tensor" in a else a.get("tensors", [])))
                  and by_id[o["id"]].get("args")]
    assert scalar_ops and all(o["predictions"][0][0] == 0 for o in scalar_ops)
    # Each per-tensor update expression (one op per parameter) shares one foreach launch set:
    # the 4 lerp_ calls together cost less than 4 launch floors of their own.
    lerps = [o for o in f if by_id[o["id"]]["name"] == "aten::lerp_"]
    assert len(lerps) == 4
    total_lerp_us = sum(o["predictions"][0][0] for o in lerps)
    single = dict(by_id[lerps[0]["id"]], phase="forward")
    alone = forecast({"index": 0, "wall_ms": 1.0, "ops": [single]})["totals"][0]["total_ms"] * 1e3
    assert 0 < total_lerp_us < 4 * alone


def test_the_newer_fp32_precision_api_never_breaks_capture() -> None:
    """torch 2.9+ raises from the legacy getters once only the new API changed a switch; the
    capture reads them at every op, and must neither throw into the user's op nor lose it."""
    matmul = torch.backends.cuda.matmul
    if not hasattr(matmul, "fp32_precision"):
        return  # torch before 2.9: one API, nothing to mix
    before = matmul.fp32_precision
    model = nn.Linear(16, 16)

    def step() -> None:
        matmul.fp32_precision = "tf32"
        try:
            model(torch.randn(4, 16))
        finally:
            matmul.fp32_precision = before

    ops = capture(step)["ops"]
    linear = next(op for op in ops if op["name"] == "aten::linear")
    assert linear["precision"]["matmul_allow_tf32"] is True
    assert _origin("cpu")["allow_tf32"] is bool(torch.backends.cuda.matmul.allow_tf32)
