"""Progress on stderr for long command-line work: shown after a second, never for quick work
or when stderr is not a terminal (logs and pipes stay clean)."""
from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest

from habitat.present import progress as progress_module
from habitat.present.progress import progress, status


def _wait_for(capsys, text: str, seen: list[str], timeout: float = 10.0) -> None:  # noqa: ANN001
    """Work that lasts until `text` is on stderr (timers may be late on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while text not in "".join(seen) and time.monotonic() < deadline:
        time.sleep(0.02)
        seen.append(capsys.readouterr().err)


def test_status_appears_once_work_takes_longer_than_the_delay(capsys):
    seen: list[str] = []
    with status("loading big.json", enabled=True, delay=0.05):
        _wait_for(capsys, "loading big.json ...", seen)
    err = "".join(seen) + capsys.readouterr().err
    assert err.startswith("loading big.json ...") and " done in " in err and err.endswith(" s\n")


def test_status_is_silent_for_quick_work_and_off_a_terminal(capsys):
    with status("loading small.json", enabled=True, delay=1.0):
        pass
    with status("loading piped.json", delay=0.0):  # stderr is captured: not a terminal
        time.sleep(0.05)
    assert capsys.readouterr().err == ""


def test_progress_yields_every_item_and_draws_only_when_slow(capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tqdm", None)  # the plain bar
    assert list(progress(range(5), desc="quick", enabled=True, delay=1.0)) == list(range(5))
    assert capsys.readouterr().err == ""

    def slow():  # noqa: ANN202
        for i in range(3):
            time.sleep(0.05)
            yield i

    assert list(progress(slow(), total=3, desc="forecasting 2 GPU(s)", enabled=True, delay=0.01)) == [0, 1, 2]
    err = capsys.readouterr().err
    assert "forecasting 2 GPU(s)" in err and "3/3" in err and err.endswith("\n")
    assert list(progress(range(3), enabled=None, delay=0.0)) == [0, 1, 2]  # not a terminal
    assert capsys.readouterr().err == ""


def test_cli_shows_a_status_line_while_a_slow_trace_is_forecast(capsys, monkeypatch, golden_trace: Path):
    from habitat.cli import main
    from habitat.data.forecast import Forecast

    real_load = Forecast.load
    seen: list[str] = []

    def slow_load(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        _wait_for(capsys, "GPU(s) ...", seen)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(Forecast, "load", slow_load)
    monkeypatch.setattr(progress_module, "status",
                        functools.partial(progress_module.status, enabled=True, delay=0.05))
    assert main(["predict", str(golden_trace), "-t", "A100"]) == 0
    err = "".join(seen) + capsys.readouterr().err
    assert f"forecasting {golden_trace}" in err and "for 1 GPU(s) ..." in err and " done in " in err


def test_status_line_ends_even_when_the_work_fails(capsys):
    seen: list[str] = []
    with pytest.raises(ValueError), status("loading bad.json", enabled=True, delay=0.01):
        _wait_for(capsys, "loading bad.json ...", seen)
        raise ValueError("bad")
    assert ("".join(seen) + capsys.readouterr().err).endswith(" s\n")
