"""Known failures, listed in one place so they stay visible until fixed (see the issues).

Each entry names the test and why it fails today; none of them is counted as done.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# The shared helpers (models.py, threads.py, tools_fixtures.py) import as top-level modules
# from the tests in tests/python/{data,capture,analysis,...}/.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

#: A real captured step pair (tests/python/models.py's MLP with Adam, two steps, 426 ops),
#: saved with Forecast.save for A100 and H100; see data/test_golden_trace.py for its numbers.
GOLDEN_TRACE = HERE / "fixtures" / "golden_trace.json"


@pytest.fixture(scope="session")
def golden_trace() -> Path:
    """The path of the golden trace (read-only: copy it before changing it)."""
    return GOLDEN_TRACE

# Every skip of the session, recorded in pytest's cache (.pytest_cache/v/habitat/skips) for
# .ci/check_skips.py, which fails CI on a skip that tests/python/skips_allowed.txt does not list.
SKIPS_CACHE_KEY = "habitat/skips"
_skips: list[tuple[str, str]] = []


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _record_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):  # an xfail is not a skip
        _skips.append((report.nodeid, _skip_reason(report)))


pytest_runtest_logreport = _record_skip
pytest_collectreport = _record_skip


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)  # None under -p no:cacheprovider
    if cache is not None:
        cache.set(SKIPS_CACHE_KEY, {"args": list(session.config.invocation_params.args),
                                    "tests": session.testscollected, "skips": _skips})
