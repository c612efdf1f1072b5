"""Names from a trace are text in every output format, never markup (issue 34)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from habitat.cli import main
from habitat.present.escape import markdown_text, terminal_text

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
LINK = "[click](javascript:alert(1))"


def hostile_trace(path: Path) -> Path:
    ops = [{"id": 0, "name": "aten::relu", "module_path": f"model.{IMG}.{LINK}",
            "args": [{"name": "self", "tensor": {"shape": [256, 256], "dtype": "float32"}}],
            "outputs": [{"shape": [256, 256], "dtype": "float32"}], "wall_us": 50.0},
           {"id": 1, "name": f"custom::{SCRIPT}", "module_path": "\x1b[2Jmodel | x\n# heading",
            "args": [{"name": "self", "tensor": {"shape": [256, 256], "dtype": "float32"}}],
            "outputs": [{"shape": [256, 256], "dtype": "float32"}], "wall_us": 50.0}]
    doc = {"format": "habitat-trace", "version": 2,
           "origin": {"device": "cpu", "host": SCRIPT, "torch_version": IMG},
           "steps": [{"index": 0, "wall_ms": 1.0, "ops": ops}]}
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_reports_show_trace_names_as_text(tmp_path, capsys, suffix):
    trace = hostile_trace(tmp_path / "t.json")
    out = tmp_path / f"report{suffix}"
    assert main(["report", str(trace), "-t", "A100", "-o", str(out)]) == 0
    text = out.read_text()
    for raw in (SCRIPT, IMG, "<script", "onerror=alert(1)>", "\x1b"):
        assert raw not in text, raw
    assert "alert(1)" in text  # shown, as text
    if suffix == ".md":
        assert not re.search(r"(?<!\\)\]\(javascript", text)  # the link's brackets are escaped
        assert "\n# heading" not in text and "&lt;script&gt;" in text


def test_markdown_and_terminal_escapes():
    assert markdown_text(SCRIPT) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert markdown_text(LINK) == "\\[click\\](javascript:alert(1))"
    assert markdown_text("a|b\nc") == "a\\|b c"
    assert markdown_text("# h") == "\\# h" and markdown_text("1. x") == "1\\. x"
    assert markdown_text("12.345 ms") == "12.345 ms"
    assert terminal_text("\x1b[2Jx") == "\\x1b[2Jx"


def test_terminal_output_shows_control_characters_as_escapes(tmp_path, capsys):
    trace = hostile_trace(tmp_path / "t.json")
    assert main(["predict", str(trace), "-t", "A100"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b" in out


def test_tensorboard_ops_table_escapes_names(tmp_path):
    from habitat.data.forecast import Forecast
    from habitat.present.tensorboard import ops_table

    forecast = Forecast.load(hostile_trace(tmp_path / "t.json"), targets=["A100"])
    table = ops_table(forecast.latest)
    assert "<script" not in table and "<img" not in table
    assert not re.search(r"(?<!\\)\]\(javascript", table)
