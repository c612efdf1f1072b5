"""Learned efficiency models for the op families whose kernels vary per GPU.

features.py  feature vectors (must match csrc/src/learned/learned_features.cpp exactly)
devices.py   device figures, read from habitat/data/devices.json (the single source)
neusight.py  loads NeuSight-format CSVs into per-family shape tables
safetensors_io.py  the weight file format (no dependency on the safetensors package)
model.py     numpy inference from weights/ (evaluation) and the output head
train.py     training: python -m habitat.learned.train --data DIR --out weights/
"""
from __future__ import annotations
