"""Real traces for the report-side tests: a tiny training step captured with predict_on."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from torch import nn

import habitat
from habitat.data.forecast import Forecast

TARGETS = ("A100", "T4")


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def capture(targets: Sequence[str] = TARGETS, steps: int = 3, log_dir: str | Path | None = None) -> Forecast:
    """Captures `steps` AdamW training steps of TinyNet on the CPU."""
    torch.manual_seed(0)
    model = TinyNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    predictor = habitat.predict_on(list(targets), log_dir=log_dir)
    forecast = predictor.forecast  # the same object each `with` returns
    for _ in range(steps):
        with predictor:
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    close = getattr(predictor, "close", None)
    if close is not None:
        close()
    assert forecast is not None and len(forecast.steps) == steps, "capture produced no forecast"
    return forecast
