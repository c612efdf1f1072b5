"""hypothesis on the Python loaders and the CLI (tests/fuzz/README.md): whatever the input, a
loader returns or raises its own error (a ValueError naming the problem), never another
exception, and escaped output never carries markup. A few dozen examples each in the suite;
HABITAT_FUZZ_EXAMPLES=20000 for a long run."""
from __future__ import annotations

import copy
import json
import math
import os
import re

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from habitat import _engine  # noqa: E402
from habitat.analysis.pricing import PriceFileError, parse_prices  # noqa: E402
from habitat.cli import main  # noqa: E402
from habitat.data.input_files import loads_json  # noqa: E402
from habitat.data.trace import TraceFormatError, validate_trace  # noqa: E402
from habitat.present.escape import markdown_text, terminal_text  # noqa: E402

EXAMPLES = int(os.environ.get("HABITAT_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="HABITAT_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=20)

BASE = {"format": "habitat-trace", "version": 2, "origin": {"device": "cpu"},
        "steps": [{"index": 0, "wall_ms": 1.0, "ops": [
            {"id": 0, "name": "aten::mm", "wall_us": 4.0,
             "args": [{"name": "self", "tensor": {"shape": [4, 8], "dtype": "float32"}},
                      {"name": "mat2", "tensor": {"shape": [8, 2], "dtype": "float32"}}],
             "outputs": [{"shape": [4, 2], "dtype": "float32"}],
             "kernels": [{"name": "k", "duration_us": 1.0, "grid": [1, 1, 1]}]}]}]}


def paths(doc, prefix=()):
    """Every (path to a value) in a document."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


PATHS = [p for p in paths(BASE) if p]


def mutated(path, value):
    doc = copy.deepcopy(BASE)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


@FUZZ
@given(st.sampled_from(PATHS), json_values)
def test_a_trace_with_any_field_replaced_is_read_or_refused_by_name(path, value):
    doc = mutated(path, value)
    try:
        validate_trace(doc)
    except TraceFormatError as e:
        assert str(e).startswith("invalid habitat trace")
    except _engine.InputLimitError:
        pass
    try:  # the same document as text reads the same way
        _engine.validate_trace_json(json.dumps(doc))
    except (TraceFormatError, _engine.InputLimitError):
        pass


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_as_a_trace_file_are_refused_in_one_line(tmp_path, capsys, data):
    path = tmp_path / "t.json"
    path.write_bytes(data)
    code = main(["predict", str(path), "-t", "A100"])
    err = capsys.readouterr().err
    assert code in (0, 1, 2) and "Traceback" not in err


@FUZZ
@given(json_values)
def test_any_json_as_prices_is_read_or_refused_by_name(value):
    try:
        table = parse_prices(json.dumps(value), "prices")
    except PriceFileError:
        return
    for price in table:
        assert math.isfinite(price.usd_per_hour) and price.usd_per_hour >= 0


@FUZZ
@given(st.text(alphabet="[]{}\"\\,:0a ", max_size=600))
def test_loads_json_never_recurses_without_bound(text):
    try:
        loads_json(text, "x")
    except ValueError:
        pass


@FUZZ
@given(st.sampled_from(["--epochs", "--reserve-gib", "--host-speed", "--iterations", "--world-size",
                        "--gpus-per-node", "--steps-per-epoch"]),
       st.one_of(st.text(max_size=12), st.floats().map(repr), st.integers().map(str)))
def test_any_cli_number_is_taken_or_refused_by_option(tmp_path, capsys, option, value):
    trace = tmp_path / "t.json"
    if not trace.exists():
        trace.write_text(json.dumps(BASE))
    argv = ["compare", str(trace), "-t", "A100", option, value]
    if option == "--epochs":
        argv += ["--steps-per-epoch", "10"]
    if option == "--steps-per-epoch":
        argv += ["--epochs", "1"]
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1, 2) and "Traceback" not in err
    if code == 2 and value.startswith("-") is False:
        assert option in err or "argument" in err


@FUZZ
@given(st.text(max_size=200))
def test_escaped_text_carries_no_markup(text):
    md = markdown_text(text)
    assert "<" not in md and ">" not in md and "\n" not in md
    assert not re.search(r"(?<!\\)\[", md)  # no link or image can open
    assert not re.search(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]", terminal_text(text))
