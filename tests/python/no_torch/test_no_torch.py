"""Habitat without torch: saved traces load, forecast, compare and report; capture says what
it needs. Runs only where torch is NOT importable (.ci/no_torch.sh runs it in such a venv);
skipped everywhere else."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import torch  # noqa: F401
except ImportError:
    torch = None
if torch is not None:
    pytest.skip("checks an environment without torch (.ci/no_torch.sh)", allow_module_level=True)

import habitat  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden_trace.json"
RECORDED = json.loads(GOLDEN.read_text())["forecast"]  # the totals saved when it was captured


def test_torch_is_absent_and_habitat_imports():
    with pytest.raises(ImportError):
        import torch  # noqa: F401, F811
    assert habitat.TORCH_AVAILABLE is False
    assert "torch" not in sys.modules
    out = subprocess.run([sys.executable, "-c", "import habitat, sys; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", ["predict_on", "record_step", "tensorboard_handler", "json_handler"])
def test_capture_names_raise_a_clear_import_error(name):
    with pytest.raises(ImportError) as info:
        getattr(habitat, name)(["A100"])
    assert str(info.value) == (f"habitat.{name} needs PyTorch: pip install torch, then reinstall "
                               "habitat with pip install --no-build-isolation .")


def test_forecast_load_gives_the_recorded_numbers():
    forecast = habitat.Forecast.load(GOLDEN)
    assert forecast.targets == RECORDED["targets"]
    assert len(forecast.steps) == len(RECORDED["steps"])
    for step, recorded in zip(forecast.steps, RECORDED["steps"]):
        assert step.total_ms == pytest.approx(recorded["total_ms"], rel=1e-9)
        assert step.method_ops == recorded["method_ops"]
    assert "A100" in str(forecast)  # the text view is plugged in


def test_compare_ranks_with_the_recorded_times():
    comparison = habitat.Forecast.load(GOLDEN).compare(["A100", "H100"])
    last = RECORDED["steps"][-1]["total_ms"]
    assert {row.gpu: row.iteration_ms for row in comparison} == pytest.approx(last, rel=1e-9)


def test_report_is_written(tmp_path):
    forecast = habitat.Forecast.load(GOLDEN)
    out = tmp_path / "report.html"
    habitat.write_report(forecast, out, comparison=forecast.compare(["A100", "H100"]))
    text = out.read_text()
    assert "Habitat forecast report" in text and "A100" in text
