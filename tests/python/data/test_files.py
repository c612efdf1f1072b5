"""Files that never lose data: atomic replacement, append-only histories, keep_steps."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from habitat.data import files
from habitat.data.devices import UnknownDeviceError, devices
from habitat.data.forecast import Forecast, read_step_history


def test_atomic_write_replaces_and_leaves_no_temp_file(tmp_path: Path):
    path = tmp_path / "f.json"
    files.atomic_write_text(path, "one")
    files.atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_failed_write_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "f.json"
    files.atomic_write_text(path, '{"ok": 1}')

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        files.atomic_write_text(path, '{"ok": 2, "much": "more"}')
    assert json.loads(path.read_text()) == {"ok": 1}  # intact, not truncated
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # the temp file is gone



def test_an_unwritable_folder_names_the_file_asked_for(tmp_path: Path):
    # the temporary file's name ('.f.json.xxxx.tmp') would mean nothing to the user
    target = tmp_path / "missing" / "f.json"
    with pytest.raises(FileNotFoundError) as info:
        files.atomic_write_text(target, "x")
    assert f"cannot write '{target}'" in str(info.value) and ".tmp" not in str(info.value)

def test_atomic_write_keeps_the_file_mode(tmp_path: Path):
    path = tmp_path / "f.json"
    path.write_text("x")
    os.chmod(path, 0o640)
    files.atomic_write_text(path, "y")
    assert path.stat().st_mode & 0o777 == 0o640


def test_forecast_save_is_atomic(golden_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    forecast = Forecast.load(golden_trace)
    out = tmp_path / "forecast.json"
    forecast.save(out)
    before = out.read_bytes()
    monkeypatch.setattr(files.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.raises(OSError):
        forecast.save(out)
    assert out.read_bytes() == before
    assert len(Forecast.load(out).steps) == 2


def test_line_log_keeps_complete_lines_and_skips_a_cut_one(tmp_path: Path):
    path = tmp_path / "steps.jsonl"
    log = files.LineLog(path)
    for i in range(3):
        log.append(json.dumps({"run": "r", "index": i}))
    log.close()
    with open(path, "ab") as f:
        f.write(b'{"run": "r", "ind')  # a crash in the middle of a line
    assert [row["index"] for row in read_step_history(path)] == [0, 1, 2]
    assert read_step_history(path, run="other") == []


def test_keep_steps_is_configurable_and_stated(golden_trace: Path):
    doc = json.loads(golden_trace.read_text())
    steps = doc["steps"]
    forecast = Forecast(["A100"], doc["origin"], keep_steps=1)
    for step in steps:
        forecast.add_step(step)
    assert forecast.steps[0].trace is None and forecast.steps[1].trace is not None
    note = forecast.detail_note()
    assert note and "last 1 step" in note and "1 older step" in note
    saved = json.loads(forecast.to_json())
    assert saved["forecast"]["keep_steps"] == 1
    assert saved["forecast"]["dropped_detail_steps"] == 1
    assert "keep_steps" in saved["forecast"]["note"]
    assert len(saved["steps"]) == 1 and len(saved["forecast"]["steps"]) == 2
    assert "Note: per-op detail kept for the last 1" in str(forecast)

    everything = Forecast(["A100"], doc["origin"], keep_steps=None)
    for step in steps:
        everything.add_step(step)
    assert all(s.trace is not None for s in everything.steps) and everything.detail_note() is None
    assert Forecast(["A100"], history=3).keep_steps == 3  # the former name
    with pytest.raises(ValueError, match="keep_steps"):
        Forecast(["A100"], keep_steps=-1)


@pytest.mark.parametrize("bad", [None, 5, [], [None]])
def test_forecast_rejects_bad_targets_with_the_unknown_gpu_advice(bad):
    with pytest.raises(UnknownDeviceError, match="'all'"):
        Forecast(bad)


def test_all_targets_everywhere(golden_trace: Path):
    every = [d.name for d in devices()]
    assert Forecast("all").targets == every
    loaded = Forecast.load(golden_trace, targets="all")
    assert loaded.targets == every
    assert [r.gpu for r in loaded.compare(["all"]).rows]  # a list holding "all" too


def test_load_checks_targets_before_reading(tmp_path: Path):
    with pytest.raises(UnknownDeviceError):
        Forecast.load(tmp_path / "missing.json", targets=["A1000"])  # not FileNotFoundError


def test_load_parses_the_file_once(golden_trace: Path, monkeypatch: pytest.MonkeyPatch):
    import habitat.data.forecast as fc

    reads = []
    real_text, real_bytes, real_input = Path.read_text, Path.read_bytes, fc.read_input_bytes

    def counting(real):  # noqa: ANN001, ANN202
        def read(self: Path, *a, **k):  # noqa: ANN002, ANN003, ANN202
            reads.append(Path(self))
            return real(self, *a, **k)
        return read

    monkeypatch.setattr(Path, "read_text", counting(real_text))
    monkeypatch.setattr(Path, "read_bytes", counting(real_bytes))
    monkeypatch.setattr(fc, "read_input_bytes", counting(real_input))  # inputs, read bounded
    monkeypatch.setattr(fc.json, "loads", _counting(fc.json.loads, calls := []))
    forecast = Forecast.load(golden_trace)
    # the trace once; besides it only the timeline's host model (read once per process)
    assert reads.count(golden_trace) == 1
    assert all(r == golden_trace or r.name == "host_model.json" for r in reads)
    # the saved targets read from the forecast section alone and the origin; the engine's
    # results come as numbers and per-op rows, not JSON
    assert len(calls) == 1 + 1
    assert forecast.targets == json.loads(golden_trace.read_text())["forecast"]["targets"]


def test_load_names_the_file_of_an_invalid_trace(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "habitat-trace", "version": 1, "origin": {}, "steps": [{"ops": 3}]}')
    with pytest.raises(ValueError, match="bad.json"):
        Forecast.load(bad, targets="A100")


def _counting(fn, calls):  # noqa: ANN001, ANN202
    def wrapper(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return fn(*a, **k)
    return wrapper


def test_load_builds_per_op_detail_only_when_read(golden_trace: Path):
    from habitat.data.trace import load_trace

    forecast = Forecast.load(golden_trace, targets=["A100", "T4"])
    assert all(s._detail is not None for s in forecast.steps)  # totals only, so far
    assert forecast.steps[0].total_ms["T4"] > 0
    assert forecast.steps[0]._detail is not None
    # The step's trace, decoded from the engine's structs, is the canonical step of the file.
    assert forecast.steps[1].trace == load_trace(golden_trace)["steps"][1]
    assert forecast.steps[1]._ops == [] and forecast.steps[1]._op_results is not None  # not built
    assert len(forecast.steps[1].ops) == 189 and forecast.steps[0]._detail is not None


def _failing_replace(*args: object) -> None:
    raise OSError(28, "No space left on device")


def test_save_trace_is_atomic_and_fsynced(golden_trace: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch):
    from habitat.data.trace import load_trace, save_trace

    doc = load_trace(golden_trace)
    out = tmp_path / "trace.json"
    synced = []
    real_fsync = files.os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    save_trace(doc, out)
    assert synced and load_trace(out) == doc
    before = out.read_bytes()
    monkeypatch.setattr(files.os, "replace", _failing_replace)
    with pytest.raises(OSError, match="cannot write habitat trace .*No space"):
        save_trace(doc, out)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]  # no temp file left


def test_report_images_and_plots_are_replaced_atomically(golden_trace: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("matplotlib")
    from habitat.present.report import write_report

    forecast = Forecast.load(golden_trace)
    comparison = forecast.compare(["A100", "T4"])
    report, plot = tmp_path / "r.md", tmp_path / "p.png"
    write_report(forecast, report, comparison)
    comparison.plot(plot)
    written = {p: p.read_bytes() for p in [report, plot, *(tmp_path / "r_files").iterdir()]}
    assert len(written) == 3  # the report, its image, the plot
    monkeypatch.setattr(files.os, "replace", _failing_replace)
    for write in (lambda: write_report(forecast, report, comparison), lambda: comparison.plot(plot)):
        with pytest.raises(OSError, match="No space"):
            write()
    assert {p: p.read_bytes() for p in written} == written  # every file as it was
    from habitat.present.report import render_markdown

    with pytest.raises(OSError, match="No space"):  # the image itself goes through a rename
        render_markdown([("img", b"\x89PNG", "gpus")], image_dir=tmp_path / "r_files")
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_long_run_of_repeated_steps_costs_a_few_hundred_bytes_per_step(golden_trace: Path):
    # Bounded memory: 100k steps of a run in steady state (each reusing a forecast) must stay
    # within tens of MB, so each step's record is small: the totals' dicts are shared.
    import tracemalloc

    from habitat.data import engine

    doc = json.loads(golden_trace.read_text())
    forecast = Forecast(["A100", "T4"], doc["origin"], keep_steps=2)
    summary, rows = engine.forecast_step_parts(doc["origin"], doc["steps"][-1], forecast.targets)
    step = doc["steps"][-1]
    forecast._add_forecast(0, 1.0, summary, lambda: (step, rows), rows)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1, 10_001):
            forecast._add_forecast(i, 1.0, summary, lambda: (step, rows), rows)
        per_step = (tracemalloc.get_traced_memory()[0] - before) / 10_000
    finally:
        tracemalloc.stop()
    print(f"{per_step:.0f} bytes per step")
    assert per_step < 400, per_step
    assert forecast.steps[0].total_ms is forecast.steps[-1].total_ms  # shared, not copied
    assert forecast.dropped_detail_steps == 10_001 - 2
