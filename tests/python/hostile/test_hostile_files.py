"""Hostile and damaged inputs (issue 34): bounded reads, one-line errors naming the fix.

Each test is one case of benchmarks/hostile/cases.py's table, kept in the suite so that it
stays fixed. Subprocesses where a failure would be a crash (SIGSEGV) or a hang.
"""
from __future__ import annotations

import errno
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from subprocess_env import subprocess_env

from habitat import _engine
from habitat.cli import main
from habitat.data.files import LineLog, atomic_write_text, read_lines
from habitat.data.input_files import (
    InputLimitError,
    loads_json,
    read_input_bytes,
    read_tail,
    read_trace_text,
)


def trace_doc(ops: list[dict] | None = None, **step: object) -> dict:
    ops = ops if ops is not None else [
        {"id": 0, "name": "aten::mm", "args": [
            {"name": "self", "tensor": {"shape": [64, 128], "dtype": "float32"}},
            {"name": "mat2", "tensor": {"shape": [128, 32], "dtype": "float32"}}],
         "outputs": [{"shape": [64, 32], "dtype": "float32"}], "wall_us": 40.0}]
    return {"format": "habitat-trace", "version": 2, "origin": {"device": "cpu"},
            "steps": [{"index": 0, "wall_ms": 1.0, "ops": ops, **step}]}


@pytest.fixture()
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace_doc()))
    return path


def cli(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ----- regular files only ------------------------------------------------------------------
def test_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    code, _, err = cli(capsys, "predict", fifo, "-t", "A100")
    assert time.monotonic() - start < 5
    assert code == 1 and "FIFO" in one_line_error(err) and "regular file" in err
    with pytest.raises(InputLimitError, match="FIFO"):
        read_trace_text(fifo)


def test_dev_zero_is_refused_not_read_forever(capsys):
    code, _, err = cli(capsys, "predict", "/dev/zero", "-t", "A100")
    assert code == 1 and "character device" in one_line_error(err)


def test_standard_input_is_read_when_named(trace_file):
    result = subprocess.run([sys.executable, "-m", "habitat", "predict", "-", "-t", "A100"],
                            stdin=trace_file.open("rb"), capture_output=True, text=True,
                            env=subprocess_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "A100-SXM4-80GB" in result.stdout


def test_symlink_loops_and_missing_files_say_which(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    code, _, err = cli(capsys, "predict", a, "-t", "A100")
    assert code == 1 and "loops" in one_line_error(err)
    with pytest.raises(OSError) as info:
        read_trace_text(a)
    assert info.value.errno == errno.ELOOP


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_trace_says_permission_denied(trace_file, capsys):
    trace_file.chmod(0)
    code, _, err = cli(capsys, "predict", trace_file)  # no -t: the targets would be read first
    assert code == 1 and "permission denied" in one_line_error(err)


# ----- caps that scale with memory ----------------------------------------------------------
def test_a_gzip_bomb_stops_at_the_cap_naming_the_override(tmp_path, monkeypatch, capsys):
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        for _ in range(64):
            f.write(b" " * (1 << 20))  # 64 MiB of spaces: 64 KB compressed
    assert bomb.stat().st_size < 1 << 20
    monkeypatch.setenv("HABITAT_MAX_INPUT_BYTES", "8M")
    start = time.monotonic()
    with pytest.raises(InputLimitError, match="HABITAT_MAX_INPUT_BYTES=1G") as info:
        read_input_bytes(bomb)
    assert "set by HABITAT_MAX_INPUT_BYTES" in str(info.value)
    assert time.monotonic() - start < 5
    with pytest.raises(InputLimitError):
        read_tail(bomb, 100)
    code, _, err = cli(capsys, "predict", bomb, "-t", "A100")
    assert code == 1 and "HABITAT_MAX_INPUT_BYTES" in one_line_error(err)


def test_gzip_members_padding_and_damage(tmp_path):
    text = json.dumps(trace_doc()).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:50]) + gzip.compress(text[50:]) + b"\0" * 16)
    assert read_trace_text(path) == text.decode()
    assert read_tail(path, 20) == (text[-20:], False)
    path.write_bytes(gzip.compress(text)[:-12])
    with pytest.raises(ValueError, match="damaged gzip"):
        read_trace_text(path)


def test_gzip_members_larger_than_a_read_chunk(tmp_path, monkeypatch):
    """Each member inflates past the 1 MiB output chunk, so a member ends in a call that hit the
    output limit: its following members were inflated again and again (a 2 MiB file read as
    more than the cap, larger ones as damaged)."""
    monkeypatch.setenv("HABITAT_MAX_INPUT_BYTES", "16M")  # bounds the damage if it comes back
    members = [bytes([ord("a") + i]) * (5 << 19) for i in range(3)]  # 2.5 MiB each
    path = tmp_path / "t.json.gz"
    path.write_bytes(b"".join(gzip.compress(m, compresslevel=1) for m in members))
    assert read_input_bytes(path) == b"".join(members)
    assert read_tail(path, 4) == (b"cccc", False)


def test_the_byte_cap_applies_to_plain_files_and_the_engine(trace_file, monkeypatch):
    monkeypatch.setenv("HABITAT_MAX_INPUT_BYTES", "100")
    with pytest.raises(InputLimitError, match="more than the cap on input files"):
        read_input_bytes(trace_file)
    with pytest.raises(InputLimitError, match="HABITAT_MAX_INPUT_BYTES"):
        _engine.load_trace(str(trace_file))
    monkeypatch.setenv("HABITAT_MAX_INPUT_BYTES", "lots")
    with pytest.raises(InputLimitError, match="HABITAT_MAX_INPUT_BYTES=lots is not"):
        _engine.input_limits()


def test_steps_past_the_cap_are_refused_with_the_override(tmp_path, monkeypatch, capsys):
    doc = trace_doc()
    doc["steps"] = [{**doc["steps"][0], "index": i} for i in range(5)]
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("HABITAT_MAX_TRACE_STEPS", "4")
    code, _, err = cli(capsys, "predict", path, "-t", "A100")
    assert code == 1 and "HABITAT_MAX_TRACE_STEPS=5" in one_line_error(err)


def test_default_caps_follow_the_memory_available():
    limits = _engine.input_limits()
    assert limits["max_bytes"] >= 256 << 20
    assert "of memory available" in limits["bytes_basis"]


# ----- nesting and numbers ------------------------------------------------------------------
def test_json_nesting_is_capped_in_python_readers_too():
    with pytest.raises(ValueError, match="nested more than 256"):
        loads_json("[" * 100000 + "]" * 100000, "prices")
    assert loads_json('{"a": "[[[[["}', "x") == {"a": "[[[[["}


def test_deep_json_in_prices_and_in_saved_targets(trace_file, tmp_path, capsys):
    prices = tmp_path / "prices.json"
    prices.write_text('{"A100": ' + "[" * 50000 + "]" * 50000 + "}")
    code, _, err = cli(capsys, "compare", trace_file, "-t", "A100", "--prices", prices)
    assert code == 1 and "nested more than 256" in one_line_error(err)
    deep = tmp_path / "deep.json"
    text = json.dumps(trace_doc())[:-1] + ', "forecast": {"targets": ' + "[" * 50000 + "]" * 50000 + "}}"
    deep.write_text(text)
    code, _, err = cli(capsys, "predict", deep)
    assert code == 1
    one_line_error(err)


@pytest.mark.parametrize("option,value", [("--epochs", "nan"), ("--epochs", "inf"),
                                          ("--reserve-gib", "nan"), ("--reserve-gib", "-inf"),
                                          ("--host-speed", "0"), ("--host-speed", "nan"),
                                          ("--iterations", "0"), ("--world-size", "0"),
                                          ("--gpus-per-node", "-1")])
def test_cli_numbers_are_checked_where_they_enter(trace_file, capsys, option, value):
    extra = ["--steps-per-epoch", "10"] if option == "--epochs" else []
    code, _, err = cli(capsys, "compare", trace_file, "-t", "A100", option, value, *extra)
    assert code == 2 and f"argument {option}" in err and "Traceback" not in err


def test_a_nan_price_is_refused(trace_file, capsys):
    code, _, err = cli(capsys, "compare", trace_file, "-t", "A100", "--price", "A100=nan")
    assert code == 2 and "--price" in one_line_error(err)


def test_absurd_kernel_times_and_huge_integers_are_named(tmp_path, capsys):
    doc = trace_doc()
    doc["steps"][0]["ops"][0]["kernels"] = [{"name": "k", "duration_us": 1e300}]
    path = tmp_path / "k.json"
    path.write_text(json.dumps(doc))
    code, _, err = cli(capsys, "predict", path, "-t", "A100")
    assert code == 1 and "duration_us: must be at most 1e12" in one_line_error(err)
    doc = trace_doc()
    doc["steps"][0]["ops"][0]["outputs"][0]["shape"] = [2**64, 1]
    path.write_text(json.dumps(doc))
    code, _, err = cli(capsys, "predict", path, "-t", "A100")
    assert code == 1 and "out of range" in one_line_error(err)


# ----- device files -------------------------------------------------------------------------
def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=subprocess_env(**env), timeout=120)


def test_a_deeply_nested_device_file_is_an_error_not_a_crash(tmp_path):
    devices = tmp_path / "devices.json"
    devices.write_text('{"devices": [{"name": "A100", "memory_gb": ' + "[" * 100000 + "]" * 100000 + "}]}")
    result = run_python("import habitat\ntry:\n    habitat.devices()\nexcept ValueError as e:\n"
                        "    print('refused:', e)", HABITAT_DEVICES=str(devices))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "refused:" in result.stdout and "nested more than 256" in result.stdout


def test_device_figures_out_of_range_are_one_line_errors(tmp_path, trace_file, capsys):
    devices = tmp_path / "devices.json"
    devices.write_text(json.dumps({"devices": [{"name": "A100", "memory_bandwidth_gbs": 1e-300}]}))
    result = subprocess.run([sys.executable, "-m", "habitat", "predict", str(trace_file), "-t", "A100"],
                            capture_output=True, text=True, timeout=120,
                            env=subprocess_env(HABITAT_DEVICES=str(devices)))
    assert result.returncode == 1
    assert "memory_bandwidth_gbs: must be a number from" in one_line_error(result.stderr)


def test_twenty_thousand_devices_import_quickly(tmp_path):
    entry = {"compute_capability": "8.0", "sms": 108, "boost_clock_mhz": 1410, "memory_gb": 80,
             "memory_bandwidth_gbs": 2039, "l2_mb": 40, "tdp_w": 400, "peak_tflops": {"fp32": 19.5}}
    devices = tmp_path / "devices.json"
    devices.write_text(json.dumps({"devices": [{"name": f"GPU{i}", **entry} for i in range(20000)]}))
    start = time.monotonic()
    result = run_python("import habitat; print(habitat.get_device('gpu 19999').name)",
                        HABITAT_DEVICES=str(devices))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "GPU19999"
    assert time.monotonic() - start < 20  # 78 s before the name index (import included)


# ----- files Habitat writes -----------------------------------------------------------------
def test_a_write_torn_by_a_full_disk_leaves_no_corrupt_line(tmp_path, monkeypatch):
    path = tmp_path / "steps.jsonl"
    log = LineLog(path)
    log.append('{"step": 0}')
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd: int, data: bytes) -> int:  # half a line lands, then the disk is full
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError):
        log.append('{"step": 1, "padding": "' + "x" * 100 + '"}')
    monkeypatch.setattr(os, "write", real_write)
    log.append('{"step": 2}')
    log.close()
    assert read_lines(path) == ['{"step": 0}', '{"step": 2}']


def test_a_full_disk_error_names_the_file(tmp_path, monkeypatch):
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    target = tmp_path / "report.html"
    with pytest.raises(OSError) as info:
        atomic_write_text(target, "x")
    assert str(target) in str(info.value) and "No space left" in str(info.value)
    assert not list(tmp_path.iterdir())  # no temporary file left behind


# ----- settings in the environment ----------------------------------------------------------
@pytest.mark.parametrize("content", [b'{"version": 1}', b"\xff\xfe binary", b"[" * 5000])
def test_a_broken_host_model_names_the_variable_not_the_trace(trace_file, tmp_path, monkeypatch,
                                                              capsys, content):
    from habitat.data import engine

    model = tmp_path / "host.json"
    model.write_bytes(content)
    monkeypatch.setenv("HABITAT_HOST_MODEL", str(model))
    monkeypatch.setattr(engine, "_host_model_text", {})
    code, _, err = cli(capsys, "predict", trace_file, "-t", "A100")
    line = one_line_error(err)
    assert code == 1 and "HABITAT_HOST_MODEL" in line and "invalid habitat trace" not in line


def test_weights_pointing_nowhere_is_an_error_not_a_silent_fallback(trace_file, monkeypatch, capsys):
    monkeypatch.setenv("HABITAT_WEIGHTS", "/nonexistent/weights")
    code, _, err = cli(capsys, "predict", trace_file, "-t", "A100")
    assert code == 1 and "HABITAT_WEIGHTS='/nonexistent/weights' names no folder" in one_line_error(err)
    monkeypatch.setenv("HABITAT_WEIGHTS", "")  # empty: the learned models off, as documented
    assert cli(capsys, "predict", trace_file, "-t", "A100")[0] == 0


def test_runs_sharing_a_log_dir_do_not_overwrite_each_others_forecast(tmp_path):
    from habitat.capture.sinks import FORECAST_FILE, LogDirWarning, json_handler
    from habitat.data.forecast import Forecast

    def forecast_of(wall_ms: float) -> Forecast:
        doc = trace_doc()
        doc["steps"][0]["wall_ms"] = wall_ms
        return Forecast.load(doc, targets=["A100"])

    first = json_handler(tmp_path / FORECAST_FILE, run="run1")
    second = json_handler(tmp_path / FORECAST_FILE, run="run2")
    one, two = forecast_of(1.0), forecast_of(2.0)
    first(one, one.latest)
    with pytest.warns(LogDirWarning, match="run2"):
        second(two, two.latest)
    assert json.loads((tmp_path / FORECAST_FILE).read_text())["steps"][0]["wall_ms"] == 1.0
    assert json.loads((tmp_path / "run2" / FORECAST_FILE).read_text())["steps"][0]["wall_ms"] == 2.0
    first.close()
    second.close()
    third = json_handler(tmp_path / FORECAST_FILE, run="run3")  # the file is free again
    three = forecast_of(3.0)
    third(three, three.latest)
    third.close()
    assert json.loads((tmp_path / FORECAST_FILE).read_text())["steps"][0]["wall_ms"] == 3.0


def test_dropped_ops_are_named_by_predict_compare_and_report(tmp_path, capsys):
    path = tmp_path / "capped.json"
    path.write_text(json.dumps(trace_doc(dropped_ops=29000)))
    code, out, _ = cli(capsys, "predict", path, "-t", "A100")
    assert code == 0 and "ran 29000 ops more than the capture recorded" in out
    code, out, _ = cli(capsys, "compare", path, "-t", "A100,H100")
    assert code == 0 and "29000 ops more than the capture recorded" in out
    code, out, _ = cli(capsys, "compare", path, "-t", "A100", "--json")
    assert json.loads(out)["dropped_ops"] == 29000
    report = tmp_path / "r.md"
    assert cli(capsys, "report", path, "-t", "A100", "-o", report)[0] == 0
    assert "29000 ops more than the capture recorded" in report.read_text()


@pytest.mark.parametrize("cap", ["100", "lots"])
def test_the_input_cap_never_stops_habitat_loading_itself(trace_file, cap):
    result = subprocess.run([sys.executable, "-m", "habitat", "predict", str(trace_file), "-t", "A100"],
                            capture_output=True, text=True, timeout=120,
                            env=subprocess_env(HABITAT_MAX_INPUT_BYTES=cap))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "HABITAT_MAX_INPUT_BYTES" in one_line_error(result.stderr)
