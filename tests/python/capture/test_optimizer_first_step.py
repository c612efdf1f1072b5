"""A first optimizer step traced on the CPU creates the optimizer's state (torch.optim's lazy
_init_group: AdamW's step counters and zeros_like moments); its forecast is the step a run
repeats, without that one-time work, and says it left it out (csrc/src/predict/optimizer_state.h)."""
from __future__ import annotations

import torch
from torch import nn

import habitat

TARGET = "H100-SXM5-80GB"


def test_a_first_adamw_step_is_forecast_as_the_next_one() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(16, 64)
    forecasts = []
    for _ in range(2):
        with habitat.predict_on([TARGET]) as f:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
        forecasts.append(f)
    first, later = (f.steps[-1] for f in forecasts)
    assert first.step_ms(TARGET) == later.step_ms(TARGET)
    assert first.time_ms(TARGET) == later.time_ms(TARGET)
    assert "the optimizer's state created in this step (24 calls" in str(forecasts[0])
    assert "the optimizer's state created" not in str(forecasts[1])
