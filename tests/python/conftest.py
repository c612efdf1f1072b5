"""Known failures, listed in one place so they stay visible until fixed (see the issues).

Each entry names the test and why it fails today; none of them is counted as done.
"""
from __future__ import annotations

import pytest

KNOWN_FAILURES: dict[str, str] = {
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        key = f"{item.path.name}::{item.name}"
        if key in KNOWN_FAILURES:
            item.add_marker(pytest.mark.xfail(reason=KNOWN_FAILURES[key], strict=False))
