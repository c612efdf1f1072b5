"""Reads and writes the safetensors layout for float32 tensors.

Layout: 8-byte little-endian header length N, N bytes of JSON header mapping each tensor
name to {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} (offsets relative to
the end of the header) plus an optional "__metadata__" map of strings, then the raw
little-endian data. Written here so neither training nor the engine needs the package.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np


def save(path: str | Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> None:
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name], dtype="<f4", order="C")  # keeps a 0-d tensor 0-d
        blob = array.tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def load(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short to be a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, only F32 is supported")
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if end - begin != 4 * count or end > len(data):
            raise ValueError(f"{path}: tensor {name} has inconsistent data offsets")
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"]).copy()
    return tensors, metadata
