"""predict_on(..., log_dir=d): forecast.json every N steps, steps.jsonl every step, TensorBoard
per run; nothing already written is lost when the process is killed; a bad log_dir is one
warning and close() never raises."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

pytest.importorskip("tensorboard", reason="log_dir writes TensorBoard logs")

from subprocess_env import subprocess_env  # noqa: E402
from tools_fixtures import TARGETS, capture  # noqa: E402

import habitat  # noqa: E402
from habitat.capture.sinks import HISTORY_FILE, SAVE_EVERY_STEPS, json_handler, log_dir_sinks  # noqa: E402
from habitat.data.forecast import Forecast, read_step_history  # noqa: E402
from habitat.present.tensorboard import MEASURED, OPS_TABLE, TensorBoardLogger  # noqa: E402

TRAIN = """
import sys, torch, habitat
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
p = habitat.predict_on(['A100', 'T4'], log_dir=sys.argv[1])
for i in range(100000):
    with p:
        m(torch.randn(8, 16)).sum().backward()
        opt.step(); opt.zero_grad()
    print(i, flush=True)
"""


def test_sigkill_mid_run_leaves_a_loadable_forecast_and_every_step_in_the_history(tmp_path: Path):
    env = subprocess_env()
    proc = subprocess.Popen([sys.executable, "-c", TRAIN, str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    history_file = tmp_path / HISTORY_FILE
    wanted = 3 * SAVE_EVERY_STEPS + 4
    try:
        deadline = time.monotonic() + 240
        written = 0
        while written < wanted and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
            written = len(read_step_history(history_file)) if history_file.exists() else 0
        assert written >= wanted, proc.stderr.read() if proc.poll() is not None and proc.stderr else written
        os.kill(proc.pid, signal.SIGKILL)  # mid-run: no atexit, no close(), no flush
    finally:
        proc.kill()
        proc.wait(timeout=60)
    history = read_step_history(history_file)
    indices = [row["index"] for row in history]
    # Every forecast step, in order, none missing; the kill came while steps were still written.
    assert indices == list(range(len(indices)))
    assert len(indices) >= wanted
    assert len({row["run"] for row in history}) == 1
    saved = Forecast.load(tmp_path / "forecast.json")  # loads: never half written
    doc = json.loads((tmp_path / "forecast.json").read_text())["forecast"]
    summaries = doc["steps"]
    # The file is at most SAVE_EVERY_STEPS steps behind the history, and repeats the totals of
    # its last steps only (`omitted_step_totals` older ones, when the run outlived that window:
    # how many steps the child writes before the kill depends on the machine's load).
    omitted = doc.get("omitted_step_totals", 0)
    assert summaries[-1]["index"] >= indices[-1] - SAVE_EVERY_STEPS
    assert [s["index"] for s in summaries] == indices[omitted:omitted + len(summaries)]
    assert saved.steps and saved.targets == ["A100-SXM4-80GB", "T4"]
    for row, summary in zip(history[omitted:], summaries):
        assert row["total_ms"] == summary["total_ms"]


def test_forecast_file_every_n_steps_and_at_close(tmp_path: Path):
    saves = []
    handler = json_handler(tmp_path / "f.json", every=3)
    real = handler._save
    handler._save = lambda f: (saves.append(len(f._steps)), real(f))  # type: ignore[method-assign]
    forecast = capture(TARGETS, steps=1)
    step = forecast.latest
    for n in range(7):
        forecast._steps.append(step) if n else None
        handler(forecast, step)
    handler.close()
    assert saves == [1, 4, 7]  # the first step, every 3 steps; close(): nothing new to write
    forecast._steps.append(step)
    handler.close()
    assert saves[-1] == 8
    with pytest.raises(ValueError):
        json_handler(tmp_path / "g.json", every=0)


def test_a_log_dir_under_a_file_is_one_warning_naming_it(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    bad = blocker / "runs"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        forecast = capture(TARGETS, steps=4, log_dir=bad)  # close() runs and must not raise
    messages = [str(w.message) for w in caught if "habitat" in str(w.message)]
    assert len(messages) == 1, messages
    assert str(blocker) in messages[0] and "is a file, not a directory" in messages[0]
    assert "pass a directory path" in messages[0] and "could not forecast" not in messages[0]
    assert len(forecast.steps) == 4  # the forecasts were made


def test_close_never_raises_into_user_code(tmp_path: Path):
    class Broken:
        def __call__(self, forecast, step):  # noqa: ANN001, ANN204
            pass

        def close(self) -> None:
            raise RuntimeError("boom")

    predictor = habitat.predict_on("A100", on_step=Broken())
    import torch

    with predictor:
        torch.ones(2) + 1
    with pytest.warns(UserWarning, match="boom"):
        predictor.close()


def test_two_runs_in_one_log_dir_are_told_apart(tmp_path: Path):
    capture(TARGETS, steps=2, log_dir=tmp_path)
    capture(TARGETS, steps=3, log_dir=tmp_path)
    runs = sorted({p.parent.name for p in tmp_path.glob("*/events.out.tfevents.*")})
    assert len(runs) == 2
    history = read_step_history(tmp_path / HISTORY_FILE)
    assert sorted({row["run"] for row in history}) == runs
    assert [len(read_step_history(tmp_path / HISTORY_FILE, run=r)) for r in runs] == [2, 3]


def test_log_dir_sinks_options(tmp_path: Path):
    sinks = log_dir_sinks(tmp_path, run="mine", save_every=5, detail_every=7)
    # The history is written before forecast.json, so a kill between the two loses nothing.
    assert sinks[0].path.name == HISTORY_FILE and sinks[0].run == "mine"
    assert sinks[1].every == 5 and sinks[2].log_dir == tmp_path / "mine"
    assert sinks[2].options == {"detail_every": 7}


def _read(log_dir: Path):  # noqa: ANN202
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_tensorboard_detail_every_n_steps_and_when_ops_change(tmp_path: Path):
    same = capture(TARGETS, steps=1)
    other = capture(["A100", "T4"], steps=1)
    step = same.latest
    with TensorBoardLogger(tmp_path, detail_every=4) as logger:
        for i in range(10):
            s = step
            if i == 6:  # a different step: its ops differ (op count per method)
                s = other.latest
                s.method_ops[s.targets[0]] = {**s.method_ops[s.targets[0]], "changed": 1}
            s.index = i
            logger.log_step(same, s)
    acc = _read(tmp_path)
    assert [e.step for e in acc.Scalars(MEASURED)] == list(range(10))  # every step
    # detail at step 0, every 4 steps after the last detail, and when the ops changed (6, 7)
    assert [e.step for e in acc.Tensors(f"{OPS_TABLE}/text_summary")] == [0, 4, 6, 7]


def test_forecast_file_keeps_the_latest_totals_only(tmp_path: Path):
    # A long run: forecast.json repeats the totals of the last `last_steps` steps (each save
    # costs the same at any step); steps.jsonl has them all.
    from habitat.capture.sinks import json_handler
    from habitat.data.forecast import Forecast

    forecast = capture(TARGETS, steps=1)
    step = forecast.latest
    handler = json_handler(tmp_path / "forecast.json", every=1, last_steps=3)
    for i in range(5):
        fc = forecast._add_forecast(i + 1, 1.0, {"targets": forecast.targets, "totals": [
            {"target": t, "total_ms": step.total_ms[t], "phases": step.phase_ms[t],
             "methods": step.method_ops[t]} for t in forecast.targets]}, lambda: (None, None))
        handler(forecast, fc)
    saved = json.loads((tmp_path / "forecast.json").read_text())["forecast"]
    assert [s["index"] for s in saved["steps"]] == [3, 4, 5]
    assert saved["omitted_step_totals"] == 3
    assert Forecast.load(tmp_path / "forecast.json").steps  # still a loadable trace


def test_tensorboard_bytes_per_step_stay_small_between_detail_steps(tmp_path: Path, golden_trace: Path):
    # Scalars every step (~1 KB a step for two GPUs: with the timeline's step as seen, GPU busy
    # and host-bound per GPU, which a CPU-traced step has since the host model is on by
    # default), the per-op table every 100 steps.
    forecast = Forecast.load(golden_trace, targets=["A100", "T4"])
    step = forecast.latest

    def size() -> int:
        return sum(p.stat().st_size for p in tmp_path.rglob("events.out.tfevents.*"))

    step.index = 0
    with TensorBoardLogger(tmp_path, detail_every=100) as logger:
        logger.log_step(forecast, step)
        logger.flush()
        first = size()  # the layout and one full per-op table (189 ops)
        for i in range(1, 301):
            step.index = i
            logger.log_step(forecast, step)
        logger.flush()
    per_step = (size() - first) / 300
    assert first > 10_000  # a detail step is large ...
    assert per_step < 1100, per_step  # ... the others are their scalars; 3 tables in 300 steps
    assert [e.step for e in _read(tmp_path).Tensors(f"{OPS_TABLE}/text_summary")] == [0, 100, 200, 300]


def test_a_full_disk_is_one_report_and_the_next_save_tries_again(tmp_path: Path, monkeypatch, capsys):
    from habitat.capture.sinks import LogDirError, history_handler

    forecast = capture(TARGETS, steps=1)
    step = forecast.latest
    sinks = log_dir_sinks(tmp_path, run="r", save_every=1)
    history, saver = sinks[0], sinks[1]
    assert isinstance(history, history_handler)
    real_save = Forecast.save
    full = [True]

    def save(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if full[0]:
            raise OSError(28, "No space left on device")
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(Forecast, "save", save)
    with pytest.raises(LogDirError, match="No space left on device.*previous files are intact"):
        saver(forecast, step)
    saver(forecast, step)  # said once: later failures are silent
    history(forecast, step)  # the other files go on
    full[0] = False
    saver(forecast, step)  # space again: written
    assert Forecast.load(tmp_path / "forecast.json").steps
    assert len(read_step_history(tmp_path / HISTORY_FILE)) == 1
    full[0] = True
    forecast._steps.append(step)
    saver.close()  # never raises; says so on stderr
    history.close()
    assert "could not write the last log files" not in capsys.readouterr().err  # already reported
