"""One answer: print(forecast), `habitat compare`, the report and its chart price and rank GPUs
on the step as seen, and name the same fastest and cheapest GPU, on recorded host-bound H100
traces (where the kernel sum would pick another GPU)."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from habitat.analysis.choice import format_usd
from habitat.analysis.pricing import price_per_hour
from habitat.cli import main
from habitat.data.forecast import Forecast
from habitat.present.report import build_blocks, render_html

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
TRACES = [RESULTS / "h100-sxm5-80gb" / "traces" / "resnet50_bf16.json.gz",
          RESULTS / "h100-sxm5-80gb-2026-11-23" / "traces" / "dcgan_bf16.json.gz"]
GPUS = ["B200", "H100", "A100", "L4", "T4", "A10"]


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def saved(request, tmp_path_factory) -> Path:
    with gzip.open(request.param, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    path = tmp_path_factory.mktemp("answer") / "step.json"
    Forecast.from_trace(doc, GPUS).save(path)
    return path


@pytest.fixture(scope="module")
def forecast(saved: Path) -> Forecast:
    return Forecast.load(saved)


def expected(forecast: Forecast) -> dict[str, dict[str, float | None]]:
    """Per GPU, from first principles: the step as seen, the kernel sum and the cost of 1M
    steps at the default price."""
    step = forecast.latest
    out = {}
    for gpu in forecast.targets:
        price = price_per_hour(gpu)
        seen = step.step_ms(gpu)
        out[gpu] = {"seen": seen, "kernels": step.time_ms(gpu),
                    "per_1m": None if price is None else price * seen / 1000 * 1e6 / 3600}
    return out


#: Steps as seen this close are the same step: host-bound GPUs play one host cadence and differ
#: by float rounding only (1e-12 ms); the cheaper of them comes first.
SAME_MS = 1e-6


def in_order(numbers: dict[str, dict[str, float | None]]) -> list[str]:
    """The GPUs fastest as seen first, equal steps cheapest first."""
    out: list[str] = []
    for g in sorted(numbers, key=lambda g: numbers[g]["seen"]):
        k = len(out)
        while k and abs(numbers[out[k - 1]]["seen"] - numbers[g]["seen"]) < SAME_MS and \
                (numbers[out[k - 1]]["per_1m"] or float("inf")) > (numbers[g]["per_1m"] or float("inf")):
            k -= 1
        out.insert(k, g)
    return out


def fastest_and_cheapest(numbers: dict[str, dict[str, float | None]]) -> tuple[str, str]:
    fastest = in_order(numbers)[0]
    priced = {g: v["per_1m"] for g, v in numbers.items() if v["per_1m"] is not None}
    return fastest, min(priced, key=lambda g: (priced[g], numbers[g]["seen"]))


def test_the_trace_is_host_bound_where_the_kernel_sum_would_answer_otherwise(forecast):
    numbers = expected(forecast)
    by_kernels = min(numbers, key=lambda g: numbers[g]["kernels"])
    assert forecast.latest.host_bound(by_kernels)
    assert numbers[by_kernels]["seen"] > 1.3 * numbers[by_kernels]["kernels"]
    fastest, cheapest = fastest_and_cheapest(numbers)
    # Priced on the kernel sum, the cheapest would differ or cost less than it will.
    assert fastest != by_kernels or cheapest != by_kernels


def verdict_names(line: str) -> tuple[str, str]:
    fastest = re.search(r"Fastest as seen: (\S+) \(", line)
    cheapest = re.search(r"Cheapest: (\S+) \(\$([\d,.]+) per 1M steps", line)
    assert fastest and cheapest, line
    return fastest.group(1), cheapest.group(1)


def test_print_verdict_columns_and_prices_agree(forecast):
    numbers = expected(forecast)
    lines = str(forecast).splitlines()
    assert verdict_names(lines[0]) == fastest_and_cheapest(numbers)  # the verdict comes first
    header = next(i for i, line in enumerate(lines) if line.split() and
                  set(line.split()) == set(forecast.targets))
    columns = lines[header].split()
    assert columns == in_order(numbers)
    rows = {line[:24].strip(): line[24:].split() for line in lines[header + 1:header + 16]}
    assert rows["step as seen (ms)"] == [f"{numbers[g]['seen']:.3f}" for g in columns]
    assert rows["kernels (ms)"] == [f"{numbers[g]['kernels']:.3f}" for g in columns]
    assert rows["$ per 1M steps"] == ["n/a" if numbers[g]["per_1m"] is None
                                      else format_usd(numbers[g]["per_1m"]) for g in columns]


def test_compare_ranks_prices_and_answers_the_same(forecast, saved, capsys):
    numbers = expected(forecast)
    assert main(["compare", str(saved), "-t", ",".join(GPUS), "--iterations", "2000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["rows"]
    assert [r["gpu"] for r in rows] == in_order(numbers)
    for r in rows:
        n = numbers[r["gpu"]]
        assert r["step_ms"] == pytest.approx(n["seen"]) and r["kernel_sum_ms"] == pytest.approx(n["kernels"])
        assert r["run_seconds"] == pytest.approx(n["seen"] * 2000 / 1000)
        if n["per_1m"] is not None:
            assert r["usd_per_1m_steps"] == pytest.approx(n["per_1m"])
            assert r["run_cost_usd"] == pytest.approx(n["per_1m"] * 2000 / 1e6)
    assert verdict_names(doc["verdict"]) == fastest_and_cheapest(numbers)
    assert main(["compare", str(saved), "-t", ",".join(GPUS)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == doc["verdict"]
    assert "fastest:" not in text  # no second answer on the kernel sum


def test_report_and_chart_answer_the_same(forecast):
    numbers = expected(forecast)
    comparison = forecast.compare(GPUS)
    blocks = build_blocks(forecast, comparison)
    assert [b[0] for b in blocks[:3]] == ["h", "verdict", "img"]  # the first screen
    assert verdict_names(blocks[1][1]) == fastest_and_cheapest(numbers)
    html = render_html(blocks)
    assert html.index("class=\"verdict\"") < html.index("<img") < html.index("<table")
    svg = comparison.plot_bytes("svg").decode()
    for r in comparison.rows:  # the chart's cost bars are the cost of 1M steps as seen
        if r.usd_per_million_steps is not None:
            assert f"${format_usd(r.usd_per_million_steps)}" in svg
    # Every table of the report lists the GPUs in the order of the step as seen.
    table = next(b[1] for b in blocks if b[0] == "table")
    assert [row[1] for row in table[1:]] == in_order(numbers)
