"""torch.nn.RMSNorm traced on the CPU, forecast for a CUDA GPU: the CPU runs _fused_rms_norm as
its decomposition and autograd records a backward op per piece; CUDA runs one fused forward
and one fused backward (csrc/src/predict/rms_norm_backward.h). A hand-written RMS norm (T5's,
Hugging Face's LlamaRMSNorm) runs its pieces on CUDA too and keeps them."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from habitat.capture.environment import trace_origin
from habitat.capture.record import record_step
from habitat.data import engine

WIDTH = 256
PIECE_NODES = {"PowBackward0", "RsqrtBackward0", "MeanBackward1"}


class HandWrittenRMSNorm(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + 1e-6)).to(x.dtype)


def forecast(norm: nn.Module, dtype: torch.dtype) -> tuple[list[dict], dict[int, dict]]:
    """The captured ops of linear -> norm -> sum and its backward, and their H100 rows."""
    torch.manual_seed(0)
    lin = nn.Linear(64, WIDTH).to(dtype)
    norm = norm.to(dtype)
    x = torch.randn(16, 128, 64, dtype=dtype, requires_grad=True)
    with record_step(0) as rec:
        norm(lin(x)).sum().backward()
    f = engine.forecast_step(trace_origin("cpu"), rec.step, ["H100"])
    return rec.step["ops"], {row["id"]: row for row in f["ops"]}


def share_us(row: dict) -> float:
    return float(row["predictions"][0][2])


FUSED = pytest.mark.skipif(not hasattr(torch.ops.aten, "_fused_rms_norm"),
                           reason="this torch has no _fused_rms_norm (rms_norm is its pieces on CUDA too)")


@FUSED
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decomposed_rms_norm_costs_one_fused_forward_and_backward(dtype: torch.dtype):
    ops, rows = forecast(nn.RMSNorm(WIDTH), dtype)
    fused = [op for op in ops if op["name"] == "aten::_fused_rms_norm"]
    assert len(fused) == 1
    assert fused[0].get("has_children"), "the CPU ran _fused_rms_norm as one kernel: nothing to map"
    assert rows[fused[0]["id"]]["class"] == "norm" and share_us(rows[fused[0]["id"]]) > 0
    assert all(share_us(rows[op["id"]]) == 0 for op in ops if op.get("parent") == fused[0]["id"])
    backward = [op for op in ops if op.get("phase") == "backward" and "parent" not in op]
    pieces = [op for op in backward if op.get("autograd_node") in PIECE_NODES]
    assert pieces, "no backward of the decomposition recorded"
    assert all(rows[op["id"]]["class"] == "no_kernel" for op in pieces)
    carriers = [op for op in backward if rows[op["id"]]["class"] == "norm"]
    assert len(carriers) == 1 and share_us(rows[carriers[0]["id"]]) > 0


@FUSED
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_norm_is_forecast_faster_than_a_hand_written_one(dtype: torch.dtype):
    fused_ops, fused_rows = forecast(nn.RMSNorm(WIDTH), dtype)
    hand_ops, hand_rows = forecast(HandWrittenRMSNorm(WIDTH), dtype)
    assert "aten::_fused_rms_norm" not in {op["name"] for op in hand_ops}
    # The same linear and sum around them: the steps differ by their norms alone.
    fused = sum(share_us(r) for r in fused_rows.values())
    hand = sum(share_us(r) for r in hand_rows.values())
    assert 0 < fused < hand
