"""Warnings for the common mistakes: a forward-only step (backward and step outside the `with`
block) and a new predict_on per step; never for the right pattern, never changing training."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import habitat
from habitat.capture import mistakes
from habitat.capture.mistakes import HabitatUsageWarning


def _setup():  # noqa: ANN202
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(8, 16), torch.randn(8, 4)


def _usage(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, HabitatUsageWarning)]


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    monkeypatch.setattr(mistakes, "fresh_predictors", mistakes._FreshPredictors())
    from habitat.capture import predict

    monkeypatch.setattr(predict, "fresh_predictors", mistakes.fresh_predictors)


def test_loss_alone_inside_the_block_warns_once_with_the_fix():
    model, opt, x, y = _setup()
    predictor = habitat.predict_on("A100")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with predictor as forecast:
                loss = nn.functional.mse_loss(model(x), y)
            loss.backward()  # outside: not in the forecast
            opt.step()
            opt.zero_grad()
    predictor.close()
    (message,) = _usage(caught)
    assert "step 0" in message and "forward pass only" in message
    assert "loss.backward()" in message and "torch.no_grad()" in message
    assert "backward" not in forecast.latest.phase_ms["A100-SXM4-80GB"]


def test_a_whole_training_step_or_inference_does_not_warn():
    model, opt, x, y = _setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = habitat.predict_on("A100")
        for _ in range(3):
            with predictor:
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
        predictor.close()
        inference = habitat.predict_on("A100")
        with torch.no_grad():
            for _ in range(2):
                with inference:
                    model(x)
        inference.close()
    assert _usage(caught) == []


def test_the_warning_changes_no_gradient():
    results = []
    for watched in (False, True):
        model, _, x, y = _setup()
        if watched:
            with pytest.warns(HabitatUsageWarning), habitat.predict_on("A100"):
                loss = nn.functional.mse_loss(model(x), y)
        else:
            loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        results.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results))


def test_a_predictor_per_step_warns_once_after_three():
    model, opt, x, y = _setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            with habitat.predict_on(["A100", "T4"]):
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
    (message,) = _usage(caught)
    assert "3 predict_on(...) objects in a row" in message
    assert "predictor = habitat.predict_on([...])" in message and "predictor.close()" in message


def test_separate_runs_of_other_work_do_not_count():
    model, opt, x, y = _setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for targets in (["A100"], ["T4"], ["A100"], ["T4"]):  # different targets each time
            with habitat.predict_on(targets):
                nn.functional.mse_loss(model(x), y).backward()
    assert _usage(caught) == []
