"""The command line: each command, its output files, and clear errors with exit codes."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from subprocess_env import subprocess_env
from tools_fixtures import capture

import habitat
from habitat.cli import main
from habitat.data.devices import devices, format_devices_table


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """A saved forecast of three captured steps (targets A100 and T4)."""
    path = tmp_path_factory.mktemp("cli") / "tiny.json"
    capture(("A100", "T4"), steps=3).save(path)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_devices_prints_the_device_table(capsys):
    code, out, err = run(capsys, "devices")
    assert code == 0 and err == ""
    assert out.strip() == format_devices_table(devices()).strip()


def test_predict_prints_the_forecast_for_the_targets(capsys, trace):
    code, out, _ = run(capsys, "predict", trace, "--target", "H100", "-t", "L4,T4")
    assert code == 0
    assert "Habitat forecast" in out
    for name in ("H100-SXM5-80GB", "L4", "T4"):
        assert name in out
    code, out, _ = run(capsys, "predict", trace)  # the targets saved with the trace
    assert code == 0 and "A100-SXM4-80GB" in out and "T4" in out


def test_predict_json_and_tensorboard_logs(capsys, trace, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code, out, _ = run(capsys, "predict", trace, "-t", "A100", "--json", "--log-dir", tmp_path / "tb")
    assert code == 0
    doc = json.loads(out)
    assert doc["targets"] == ["A100-SXM4-80GB"] and len(doc["steps"]) == 3
    acc = EventAccumulator(str(tmp_path / "tb" / "A100-SXM4-80GB"))  # a run per GPU
    acc.Reload()
    from habitat.present.tensorboard import KERNELS

    events = acc.Scalars(KERNELS)
    assert [e.value for e in events] == pytest.approx([s["total_ms"]["A100-SXM4-80GB"] for s in doc["steps"]])


def test_compare_ranks_all_gpus_and_plots(capsys, trace, tmp_path):
    plot = tmp_path / "gpus.svg"
    code, out, _ = run(capsys, "compare", trace, "--iterations", "20000", "--plot", plot)
    assert code == 0
    for d in devices():
        assert d.name in out
    assert "20,000 iterations" in out
    assert "<svg" in plot.read_text()


def test_compare_json_with_epochs_and_prices(capsys, trace, tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("gpu,usd_per_hour\nT4,0.2\n")
    code, out, _ = run(capsys, "compare", trace, "--target", "T4,A100", "--epochs", "3",
                       "--steps-per-epoch", "100", "--prices", prices, "--price", "A100=1.0", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["iterations"] == 300
    rows = {r["gpu"]: r for r in doc["rows"]}
    assert set(rows) == {"T4", "A100-SXM4-80GB"}
    assert rows["T4"]["usd_per_hour"] == 0.2 and rows["A100-SXM4-80GB"]["usd_per_hour"] == 1.0
    t4 = rows["T4"]
    assert t4["run_cost_usd"] == pytest.approx(0.2 * t4["step_ms"] * 300 / 1000 / 3600)
    assert t4["usd_per_1m_steps"] == pytest.approx(0.2 * t4["step_ms"] / 3.6)


@pytest.mark.parametrize("suffix", [".html", ".md"])
def test_report_writes_a_self_contained_file(capsys, trace, tmp_path, suffix):
    out_path = tmp_path / f"report{suffix}"
    code, out, _ = run(capsys, "report", trace, "-o", out_path, "-t", "A100,T4", "-t", "H100")
    assert code == 0 and str(out_path) in out
    text = out_path.read_text()
    assert "H100-SXM5-80GB" in text
    if suffix == ".html":  # one self-contained file
        assert "data:image/png;base64," in text
    else:  # the plot beside it
        assert "base64" not in text and (tmp_path / "report_files" / "gpus.png").is_file()


def test_one_spelling_chooses_gpus_in_every_command(capsys, trace, tmp_path):
    code, out, _ = run(capsys, "compare", trace, "-t", "T4", "--target", "A100", "--json")
    assert code == 0 and {r["gpu"] for r in json.loads(out)["rows"]} == {"T4", "A100-SXM4-80GB"}
    code, out, _ = run(capsys, "predict", trace, "-t", "all", "--json")
    assert code == 0 and len(json.loads(out)["targets"]) == len(devices())
    # The old spelling still works, with a warning.
    code, out, err = run(capsys, "compare", trace, "--targets", "T4", "--json")
    assert code == 0 and [r["gpu"] for r in json.loads(out)["rows"]] == ["T4"]
    assert "--targets is deprecated" in err


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"habitat {habitat.__version__}"


def test_missing_trace_hint_names_real_apis(capsys, tmp_path):
    code, _, err = run(capsys, "compare", tmp_path / "nope.json")
    assert code == 1 and "forecast.save(" in err and "save=" not in err


def test_evaluate_delegates_to_habitat_evaluate(capsys, monkeypatch):
    seen = []
    fake = types.ModuleType("habitat.evaluate")
    fake.main = lambda argv: seen.append(argv) or 3
    monkeypatch.setitem(sys.modules, "habitat.evaluate", fake)
    code, _, _ = run(capsys, "evaluate", "--data", "x", "--help")
    assert code == 3 and seen == [["--data", "x", "--help"]]
    monkeypatch.setitem(sys.modules, "habitat.evaluate", types.ModuleType("habitat.evaluate"))
    monkeypatch.setitem(sys.modules, "habitat.evaluate.__main__", types.ModuleType("m"))
    code, _, err = run(capsys, "evaluate")
    assert code == 1 and "no main" in err


# ----- errors ----------------------------------------------------------------------------
def test_missing_and_corrupt_traces_exit_1_with_a_message(capsys, tmp_path):
    code, out, err = run(capsys, "compare", tmp_path / "nope.json")
    assert code == 1 and "does not exist" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "habitat-trace", "version": 1, "origin": {}, "steps": [{"index": 0')
    code, _, err = run(capsys, "predict", bad, "-t", "A100")
    assert code == 1 and "bad.json" in err and "Traceback" not in err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    code, _, err = run(capsys, "report", other, "-o", tmp_path / "r.html")
    assert code == 1 and "not a habitat trace" in err
    code, _, err = run(capsys, "predict", tmp_path, "-t", "A100")
    assert code == 1 and "folder without a forecast.json" in err


def test_unknown_gpu_and_bad_prices_exit_1(capsys, trace, tmp_path):
    code, _, err = run(capsys, "predict", trace, "-t", "A1000000")
    assert code == 1 and 'unknown GPU "A1000000"' in err and "habitat devices" in err
    assert err.count("unknown GPU") == 1  # said once
    bad = tmp_path / "prices.json"
    bad.write_text("{oops")
    code, _, err = run(capsys, "compare", trace, "--prices", bad)
    assert code == 1 and "prices.json" in err and "not valid JSON" in err


@pytest.mark.parametrize("argv", [
    [],
    ["fly"],
    ["compare"],
    ["compare", "t.json", "--iterations", "many"],
    ["compare", "t.json", "--epochs", "2"],
    ["compare", "t.json", "--plot", "out.jpg"],
    ["compare", "t.json", "--price", "A100"],
    ["report", "t.json", "-o", "out.pdf"],
])
def test_bad_usage_exits_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2 and "error" in err and "Traceback" not in err


def test_python_dash_m_habitat_runs_the_cli(tmp_path):
    # The child imports habitat the way this test run does: the installed package, or the
    # source tree when PYTHONPATH points there (its built extension lives beside it).
    env = subprocess_env()
    done = subprocess.run([sys.executable, "-m", "habitat", "devices"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "H100-SXM5-80GB" in done.stdout
    done = subprocess.run([sys.executable, "-m", "habitat", "predict", "missing.json", "-t", "A100"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 1 and "does not exist" in done.stderr


@pytest.mark.parametrize("argv, named", [
    (["predict", "{trace}", "-t", "A100", "--save", "{tmp}/no/such/f.json"], "does not exist"),
    (["predict", "{trace}", "-t", "A100", "--save", "{tmp}"], "it is a folder"),
    (["predict", "{trace}", "-t", "A100", "--log-dir", "{tmp}/file/logs"], "is a file, not a folder"),
    (["predict", "{trace}", "-t", "A100", "--log-dir", "{tmp}/file"], "it is a file"),
    (["compare", "{trace}", "--plot", "{tmp}/no/such/p.png"], "does not exist"),
    (["report", "{trace}", "-o", "{tmp}/file/r.html"], "is a file, not a folder"),
])
def test_output_paths_are_checked_before_the_trace_is_read(capsys, trace, tmp_path, monkeypatch,
                                                           argv, named):
    from habitat.cli import traces

    (tmp_path / "file").write_text("x")

    def no_load(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the trace was read before the output path was checked")

    monkeypatch.setattr(traces, "forecast_file", no_load)
    monkeypatch.setattr(traces, "read_trace", no_load)
    code, _, err = run(capsys, *(a.format(trace=trace, tmp=tmp_path) for a in argv))
    assert code == 1 and named in err and str(tmp_path) in err and "Traceback" not in err


def test_a_new_log_dir_and_save_file_are_fine(capsys, trace, tmp_path):
    code, _, err = run(capsys, "predict", trace, "-t", "A100", "--save", tmp_path / "f.json",
                       "--log-dir", tmp_path / "new" / "logs")
    assert code == 0 and (tmp_path / "f.json").exists() and (tmp_path / "new" / "logs").is_dir()


@pytest.mark.parametrize("log_dir", [False, True])
def test_predict_save_keeps_every_step_and_says_what_it_wrote(capsys, tmp_path, golden_trace, log_dir):
    from habitat.data.forecast import DEFAULT_KEEP_STEPS
    from habitat.data.trace import load_trace, save_trace

    doc = load_trace(golden_trace)
    steps = [dict(doc["steps"][i % 2], index=i) for i in range(DEFAULT_KEEP_STEPS + 4)]
    long = tmp_path / "long.json"
    save_trace({**doc, "steps": steps}, long)
    out = tmp_path / "out.json"
    extra = ["--log-dir", tmp_path / "tb"] if log_dir else []
    code, printed, _ = run(capsys, "predict", long, "-t", "A100", "--save", out, *extra)
    assert code == 0 and f"forecast saved to {out}: {len(steps)} step(s)" in printed
    saved = json.loads(out.read_text())
    assert [s["index"] for s in saved["steps"]] == list(range(len(steps)))  # no step's trace dropped
    assert "note" not in saved["forecast"]


@pytest.mark.parametrize("command", [["predict"], ["compare"], ["report", "-o", "r.html"]])
def test_an_unknown_gpu_is_reported_before_the_trace_is_read(capsys, trace, monkeypatch, command):
    from habitat.cli import traces

    def no_load(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the trace was read before the GPU names were checked")

    monkeypatch.setattr(traces, "forecast_file", no_load)
    monkeypatch.setattr(traces, "read_trace", no_load)
    code, _, err = run(capsys, command[0], trace, *command[1:], "-t", "A100,A1000000")
    assert code == 1 and 'unknown GPU "A1000000"' in err


def test_all_gpus_in_compare_and_report(capsys, trace, tmp_path):
    code, out, _ = run(capsys, "compare", trace, "-t", "all", "--json")
    assert code == 0 and len(json.loads(out)["rows"]) == len(devices())
    code, out, _ = run(capsys, "report", trace, "-t", "ALL", "-o", tmp_path / "r.md")
    assert code == 0 and (tmp_path / "r.md").exists()


def test_a_log_dir_stands_for_its_forecast_and_report_defaults_to_report_html(capsys, tmp_path, monkeypatch):
    log_dir = tmp_path / "runs" / "mlp"
    capture(("A100", "T4"), steps=2, log_dir=log_dir)
    code, out, _ = run(capsys, "compare", log_dir, "-t", "A100,T4")
    assert code == 0 and out.startswith("Fastest as seen: ")
    code, out, _ = run(capsys, "compare", tmp_path / "runs", "-t", "A100", "--json")  # one run below
    assert code == 0 and json.loads(out)["rows"][0]["gpu"] == "A100-SXM4-80GB"
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "report", log_dir, "-t", "A100,T4")
    assert code == 0 and "report.html" in out and (tmp_path / "report.html").is_file()


def test_a_step_history_is_named_for_what_it_is(capsys, tmp_path):
    log_dir = tmp_path / "run"
    capture(("A100",), steps=1, log_dir=log_dir)
    code, _, err = run(capsys, "compare", log_dir / "steps.jsonl")
    assert code == 1 and "step history" in err and "forecast.json" in err
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "forecast.json").write_text((log_dir / "forecast.json").read_text())
    code, _, err = run(capsys, "predict", tmp_path, "-t", "A100")  # two runs below: which?
    assert code == 1 and "several runs" in err and str(log_dir / "forecast.json") in err
