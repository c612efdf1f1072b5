"""Accuracy benchmarks of Habitat's predictors on real measurements.

    python -m habitat.evaluate kernels --data DIR [--quick] [--json OUT] [--origin G] [--target G]
    python -m habitat.evaluate models  --data DIR [--quick] [--json OUT] [--origin G] [--target G]
    python -m habitat.evaluate cards   --data DIR [--origin G] [--target G] [--json OUT]

See benchmarks/accuracy/README.md for the full-run commands and recorded results.
"""
from __future__ import annotations
