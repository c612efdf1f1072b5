"""Where the evaluations and the trainers find the repository's committed data and scripts
(benchmarks/...): beside this source tree, else under the current directory (an installed
habitat run from a checkout, as CI and `pip install .` users run it)."""
from __future__ import annotations

from pathlib import Path


def checkout_path(relative: str | Path) -> Path:
    """`relative` (e.g. "benchmarks/results") in the Habitat checkout; FileNotFoundError naming
    the fix when neither the source tree nor the current directory has it."""
    for root in (Path(__file__).resolve().parents[3], Path.cwd()):
        if (root / relative).exists():
            return root / relative
    raise FileNotFoundError(f"{relative} not found: run from a Habitat checkout or pass --data DIR")
