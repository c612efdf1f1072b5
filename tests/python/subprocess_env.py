"""The environment for a test's Python subprocess: it imports the same habitat as the test
(the installed package, or the source tree with its extensions built in place), never a
source tree that has no built extensions."""
from __future__ import annotations

import os
from pathlib import Path

import habitat

HABITAT_PYTHONPATH = str(Path(habitat.__file__).resolve().parents[1])


def subprocess_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (HABITAT_PYTHONPATH, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}
