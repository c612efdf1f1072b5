"""What every view shows comes from present/view.py: phases, shapes, methods, cost units, warnings."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

import habitat
from habitat.data.engine import trace_document
from habitat.data.forecast import Forecast
from habitat.present import report, tensorboard, text, view


def _op(shapes):
    return SimpleNamespace(input_shapes=shapes)


def test_one_phases_tuple_and_one_shape_formatter():
    for module in (text, report, tensorboard):
        assert not hasattr(module, "PHASES"), f"{module.__name__} has its own PHASES"
        assert not hasattr(module, "_shapes") and not hasattr(module, "_shape_text")
    assert view.PHASES == ("forward", "backward", "optimizer", "other")


def test_format_shapes():
    assert view.format_shapes(_op([[8, 128], [], [3]])) == "8x128, scalar, 3"
    assert view.format_shapes(_op([[1], [2], [3], [4]]), limit=2) == "1, 2, +2 more"
    assert view.format_shapes(_op([[1], [2]]), sep="; ") == "1; 2"
    assert view.format_shapes(_op([])) == "-"


@pytest.mark.parametrize("usd, shown", [(0, "0.00"), (1234.5, "1,234.50"), (0.5, "0.50"),
                                        (0.0062, "0.0062"), (0.00062, "0.00062"),
                                        (0.000012345, "0.000012")])
def test_usd_never_prints_scientific_or_zero_for_a_cost(usd, shown):
    assert view.format_usd(usd) == shown


def test_method_legend_explains_every_engine_method():
    names = {"wave_scaling", "learned_ratio", "roofline_ratio", "learned_shape", "roofline",
             "fallback", "no_kernel", "composite"}
    assert set(view.METHODS) == names
    assert [m for m, _ in view.method_legend(["no_kernel", "roofline"])] == ["roofline", "no_kernel"]
    assert view.method_legend(["new_method"]) == [("new_method", "unknown method")]


def _empty_forecast():
    return Forecast.from_trace(trace_document({"device": "cpu"}, [{"index": 0, "wall_ms": 1.0, "ops": []}]),
                               ["A100"])


def test_an_empty_step_prints_a_warning_not_a_silent_zero(tmp_path):
    forecast = _empty_forecast()
    assert view.step_warnings(forecast.latest)
    out = text.format_forecast(forecast)
    assert "warning: step 0 captured no aten ops" in out and "predict_on" in out
    assert "cost per" not in out
    blocks = report.build_blocks(forecast, None)
    assert any(b[0] == "p" and "captured no aten ops" in b[1] for b in blocks)


@pytest.fixture(scope="module")
def printed():
    forecast = habitat.Forecast.load(_demo_like_trace(), targets=["A100", "T4"])
    return forecast, str(forecast)


def _demo_like_trace():
    from tools_fixtures import capture

    return capture(("A100", "T4"), steps=1).to_trace()


def test_print_names_the_gpu_of_its_methods_and_explains_them(printed):
    forecast, out = printed
    line = next(ln for ln in out.splitlines() if ln.startswith("Methods on"))
    target = line.split()[2]  # the fastest as seen, the table's first column
    assert target in forecast.targets
    for method in forecast.latest.method_ops[target]:
        assert re.search(rf"^  {method}: ", out, re.M), method


def test_print_does_not_truncate_op_names(printed):
    forecast, out = printed
    target = re.search(r"^Top ops on (\S+) ", out, re.M).group(1)  # the fastest as seen
    assert target in forecast.targets
    for op in forecast.latest.top_ops(target, text.TOP_OPS):
        assert op.full_name in out
    assert "$0.00" not in out and not re.search(r"\de-\d", out)
