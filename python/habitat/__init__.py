"""Habitat: forecast how long a PyTorch training step takes on GPUs you do not have."""
from __future__ import annotations

__version__ = "0.1.0"

from habitat import _C  # noqa: F401  (fails early with the build's own error if missing)
