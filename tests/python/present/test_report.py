"""Self-contained reports: HTML and Markdown with tables, the comparison, memory and the plot."""
from __future__ import annotations

import base64
import re

import pytest
from tools_fixtures import capture

from habitat.present.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def forecast():
    return capture(("A100", "T4"), steps=2)


@pytest.fixture(scope="module")
def comparison(forecast):
    return forecast.compare(["A100", "T4", "H100", "L4"], iterations=5000)


def embedded_png(text: str) -> bytes:
    match = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)
    assert match, "no embedded plot"
    return base64.b64decode(match.group(1))


def test_html_report_is_self_contained(forecast, comparison, tmp_path):
    path = write_report(forecast, tmp_path / "report.html", comparison)
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert embedded_png(text).startswith(PNG)
    assert not re.search(r"(src|href)=\"(?!data:)", text), "the report must not link other files"
    for heading in ("Forecast for step", "Every GPU, ranked by the step as seen", "Memory", "Prices used"):
        assert heading in text
    for r in comparison.rows:
        assert f"<td>{r.gpu}</td>" in text
    top = forecast.latest.top_ops("A100", 1)[0]
    assert top.full_name in text
    assert f"{forecast.time_ms('T4'):.3f}" in text and f"{forecast.step_ms('T4'):.3f}" in text
    assert "5,000 iterations" in text


def test_markdown_report_has_tables_and_the_plot(forecast, comparison, tmp_path):
    path = write_report(forecast, tmp_path / "report.md", comparison)
    text = path.read_text()
    assert text.startswith("# Habitat forecast report")
    assert "| kernels (ms) |" in text and "| step as seen (ms) |" in text
    assert text.splitlines()[2].startswith("**Fastest as seen: ")  # the verdict, then the chart
    assert "| # | GPU |" in text
    assert "| parameters |" in text
    # The plot is written beside the report and linked, not embedded as base64.
    assert "base64" not in text and len(text) < 40_000
    assert "](report_files/gpus.png)" in text
    assert (tmp_path / "report_files" / "gpus.png").read_bytes().startswith(PNG)


def test_report_compares_all_gpus_by_default(forecast, tmp_path):
    from habitat.data.devices import devices

    text = write_report(forecast, tmp_path / "all.md").read_text()
    for d in devices():
        assert f"| {d.name} |" in text


def test_report_suffix_must_name_a_format(forecast, comparison, tmp_path):
    with pytest.raises(ValueError, match=r"\.html"):
        write_report(forecast, tmp_path / "report.pdf", comparison)
