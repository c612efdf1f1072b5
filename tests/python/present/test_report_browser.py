"""The HTML report a user would rather look at than read: its first screen is the verdict and
the chart of the step as seen against the kernels per GPU, and its tables fit a 1280 px window.

The structure is checked everywhere; the layout in headless Chromium (Debian ``chromium``,
benchmarks/ux/browser.py) only where it is installed: the test is skipped without it.
benchmarks/ux/screenshots.py takes the screenshots of the report and of TensorBoard."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from bench_scripts import ROOT, load_script

from habitat.data.forecast import Forecast
from habitat.present.report import write_report

TRACE = ROOT / "benchmarks" / "results" / "h100-sxm5-80gb" / "traces" / "resnet50_bf16.json.gz"
browser = load_script("benchmarks/ux/browser.py", "ux_browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """Every GPU compared, three in detail: the widest tables a default report has."""
    with gzip.open(TRACE, "rt", encoding="utf-8") as f:
        forecast = Forecast.from_trace(json.load(f), ["H100", "B200", "A100"])
    return write_report(forecast, tmp_path_factory.mktemp("report") / "report.html")


def test_the_first_screen_is_the_verdict_then_the_chart(report: Path):
    text = report.read_text()
    body = text[text.index("<body>"):]
    first = re.findall(r"<(h1|p class=\"verdict\"|img|table|h2)", body)[:4]
    assert first == ["h1", "p class=\"verdict\"", "img", "h2"]
    assert "Fastest as seen: " in body[:body.index("<img")]
    assert "max-width:1100px" in text and "overflow-wrap:anywhere" in text


@pytest.mark.skipif(browser.chromium() is None, reason="no headless browser (apt-get install chromium)")
def test_in_a_browser_it_fits_1280_px_and_answers_on_the_first_screen(report: Path):
    geometry = browser.measure(report, width=1280, height=800)
    assert geometry["scroll_width"] <= geometry["client_width"], geometry  # no sideways scroll
    assert geometry["tables_past_the_edge"] == 0, geometry
    assert geometry["verdict_bottom"] < geometry["chart_bottom"] <= 800, geometry
    assert geometry["chart_height"] > 300, geometry  # the chart is drawn, not a broken image
