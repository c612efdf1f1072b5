"""GPU selection: ranking by time, run cost from dated prices, overrides, memory fit, plots."""
from __future__ import annotations

import json

import pytest
from tools_fixtures import capture

from habitat.analysis.memory import GiB
from habitat.analysis.pricing import (
    DEFAULT_PRICE_FILE,
    PriceFileError,
    current_prices,
    default_prices,
    load_prices,
    pick_default,
    price_per_hour,
)
from habitat.data.devices import devices, get_device


@pytest.fixture(scope="module")
def forecast():
    return capture(("A100",), steps=2)


@pytest.fixture(scope="module")
def comparison(forecast):
    return forecast.compare()


# ----- prices ---------------------------------------------------------------------------
def test_default_price_table_is_dated_sourced_and_keyed_by_canonical_names():
    doc = json.loads(DEFAULT_PRICE_FILE.read_text())
    assert doc["format"] == "habitat-prices" and doc["rule"]
    for name, entry in doc["prices"].items():
        assert get_device(name).name == name
        for c in entry["candidates"]:
            assert c["usd_per_hour"] > 0 and c["provider"] and c["source"]
    table = default_prices()
    assert len(table) == len(doc["prices"])
    assert all(p.source for p in table)


def test_default_rule_is_the_lower_median_of_dated_offers():
    # H100 SXM offers: 3.95 Modal, 3.99 RunPod, 4.29 Lambda, 6.88 AWS, 10.98 GCP, 12.29 Azure.
    h100 = default_prices().get("H100")
    assert (h100.usd_per_hour, h100.provider, h100.date) == (4.29, "Lambda", "2026-09-20")
    # L4: the undated AWS offer does not count while a dated one exists.
    assert default_prices().get("L4").provider == "Modal"
    offers = [{"usd_per_hour": p, "date": "2026-01-01"} for p in (5.0, 1.0, 3.0, 2.0)]
    assert pick_default(offers)["usd_per_hour"] == 2.0
    assert pick_default([{"usd_per_hour": 7.0, "date": ""}])["usd_per_hour"] == 7.0


def test_price_per_hour_and_unpriced_gpus():
    assert price_per_hour("A100-SXM4-40GB") == 1.99
    assert price_per_hour("nvidia a100-sxm4-40gb") == 1.99
    assert price_per_hour("P100") is None


def test_user_price_files_json_and_csv(tmp_path):
    plain = tmp_path / "prices.json"
    plain.write_text(json.dumps({"A100": 1.5, "h100": {"usd_per_hour": 2.25, "source": "contract"}}))
    table = load_prices(plain)
    assert table.price_per_hour("A100-SXM4-80GB") == 1.5
    assert table.get("H100").source == "contract"
    assert len(table) == 2
    csv = tmp_path / "prices.csv"
    csv.write_text("gpu,usd_per_hour,source\nT4,0.35,spot quote\nRTX 4090,0.4,\n")
    table = load_prices(csv)
    assert table.price_per_hour("T4") == 0.35 and table.price_per_hour("RTX-4090") == 0.4


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    (json.dumps({"A100": -1}), ">= 0"),
    (json.dumps({"A100": "cheap"}), "not a number"),
    (json.dumps({"NoSuchGPU 9000": 1.0}), "unknown GPU"),
    ("name,price\nA100,1\n", "gpu,usd_per_hour"),
])
def test_bad_price_files_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PriceFileError, match=message) as err:
        load_prices(path)
    assert "bad.json" in str(err.value)
    with pytest.raises(PriceFileError, match="does not exist"):
        load_prices(tmp_path / "missing.json")


def test_habitat_prices_environment_variable_overrides_defaults(tmp_path, monkeypatch):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"H100": 1.23}))
    monkeypatch.setenv("HABITAT_PRICES", str(path))
    assert price_per_hour("H100") == 1.23
    assert price_per_hour("A100-SXM4-40GB") == 1.99  # others keep their defaults
    monkeypatch.setenv("HABITAT_PRICES", str(tmp_path / "gone.json"))
    with pytest.raises(PriceFileError, match="HABITAT_PRICES"):
        current_prices()
    with pytest.warns(UserWarning, match="HABITAT_PRICES"):  # print(forecast) must not fail
        assert price_per_hour("H100") == 4.29


# ----- comparison -----------------------------------------------------------------------
def test_every_known_gpu_ranked_by_the_step_as_seen(forecast, comparison):
    names = [r.gpu for r in comparison.rows]
    assert sorted(names) == sorted(d.name for d in devices())
    times = [r.step_ms for r in comparison.rows]
    # Equal steps (float rounding apart: host-bound GPUs play one host cadence) rank cheapest first.
    assert all(a <= b + 1e-6 for a, b in zip(times, times[1:])) and all(t > 0 for t in times)
    assert [r.rank for r in comparison.rows] == list(range(1, len(names) + 1))
    # The ranking forecasts the same step: the targets the forecast already had agree.
    assert comparison["A100"].step_ms == pytest.approx(forecast.step_ms("A100"), rel=1e-9)
    assert comparison["A100"].kernel_ms == pytest.approx(forecast.time_ms("A100"), rel=1e-9)
    assert comparison["A100"].iteration_ms == comparison["A100"].kernel_ms  # the former name
    assert comparison.step_index == forecast.latest.index


def test_run_time_and_cost_follow_iterations_and_prices(comparison):
    assert comparison.iterations == 1000
    for r in comparison.rows:
        assert r.run_seconds == pytest.approx(r.step_ms * 1000 / 1000)
        price = default_prices().get(r.gpu)
        if price is None:
            assert r.run_cost_usd is None
        else:
            assert r.run_cost_usd == pytest.approx(price.usd_per_hour * r.run_seconds / 3600)
            assert r.usd_per_million_steps == pytest.approx(price.usd_per_hour * r.step_ms / 3.6)
    cheapest = comparison.cheapest
    assert cheapest is not None
    assert cheapest.run_cost_usd == min(r.run_cost_usd for r in comparison.rows if r.run_cost_usd is not None)


def test_epochs_and_price_overrides(forecast, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"T4": 0.1}))
    c = forecast.compare(["A100", "T4", "H100"], epochs=2, steps_per_epoch=500,
                         price_file=path, prices={"H100": 0.5})
    assert c.iterations == 1000 and len(c) == 3
    t4, h100 = c["T4"], c["H100"]
    assert t4.usd_per_hour == 0.1 and h100.usd_per_hour == 0.5
    assert h100.run_cost_usd == pytest.approx(0.5 * h100.step_ms * 1000 / 1000 / 3600)
    assert "2 epoch(s) x 500 steps" in str(c)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        forecast.compare(epochs=2)
    with pytest.raises(ValueError, match="iterations"):
        forecast.compare(iterations=0)


def test_memory_fit_flags_gpus_the_step_does_not_fit(forecast):
    from habitat.data.engine import trace_document
    from habitat.data.forecast import Forecast

    step = dict(forecast.latest.trace, measured_peak_bytes=20 * GiB)
    big = Forecast.from_trace(trace_document(forecast.origin, [step]), ["A100"])
    c = big.compare()
    for r in c.rows:
        capacity = int(get_device(r.gpu).memory_gb * GiB)
        assert r.margin_bytes == capacity - GiB - 20 * GiB
        assert r.fits == (r.margin_bytes >= 0)
    assert c["T4"].fits is False and c["A100"].fits is True
    assert "DOES NOT FIT" in str(c)
    assert c.cheapest.fits


def test_text_and_dict_views(comparison):
    text = str(comparison)
    for r in comparison.rows:
        assert r.gpu in text
    assert "iterations" in text and "$/hour" in text and "$/1M steps" in text and "fits" in text
    assert text.splitlines()[0] == comparison.verdict()  # the answer first
    doc = json.loads(json.dumps(comparison.to_dict()))
    assert [r["gpu"] for r in doc["rows"]] == [r.gpu for r in comparison.rows]
    assert doc["verdict"] == comparison.verdict()
    assert {"step_ms", "kernel_sum_ms", "usd_per_hour", "usd_per_1m_steps"} <= set(doc["rows"][0])
    assert doc["memory"]["parameters"] > 0


def test_plot_png_and_svg(comparison, tmp_path):
    png = comparison.plot(tmp_path / "gpus.png")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    svg = comparison.plot(tmp_path / "gpus.svg").read_text()
    assert "<svg" in svg and comparison.rows[0].gpu in svg
    with pytest.raises(ValueError, match=r"\.png"):
        comparison.plot(tmp_path / "gpus.txt")
