"""habitat.learned.safetensors_io against the reference implementation, the safetensors package:
files written by either are read by the other, tensors and metadata intact."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from habitat.learned import safetensors_io

safetensors = pytest.importorskip("safetensors", reason="the reference safetensors package (the test extra)")
from safetensors.numpy import load_file, save_file  # noqa: E402


def sample() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "layer0.weight": rng.standard_normal((7, 5)).astype(np.float32),
        "layer0.bias": rng.standard_normal(7).astype(np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "cube": rng.standard_normal((2, 3, 4)).astype(np.float32)[:, ::-1],  # not contiguous
        "a_odd": rng.standard_normal(3).astype(np.float32),  # 12 bytes: the next is unaligned
    }


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, array in want.items():
        assert got[name].dtype == np.float32 and got[name].shape == array.shape, name
        np.testing.assert_array_equal(got[name], array)


@pytest.mark.parametrize("metadata", [None, {"family": "gemm", "version": "3"}])
def test_ours_read_by_the_package(tmp_path: Path, metadata: dict[str, str] | None) -> None:
    path = tmp_path / "ours.safetensors"
    safetensors_io.save(path, sample(), metadata)
    assert_same(load_file(path), sample())
    with safetensors.safe_open(path, framework="numpy") as f:
        assert f.metadata() == metadata


@pytest.mark.parametrize("metadata", [None, {"family": "conv"}])
def test_the_packages_read_by_ours(tmp_path: Path, metadata: dict[str, str] | None) -> None:
    path = tmp_path / "theirs.safetensors"
    save_file({k: v.copy(order="C") for k, v in sample().items()}, path, metadata=metadata)
    tensors, meta = safetensors_io.load(path)
    assert_same(tensors, sample())
    assert meta == (metadata or {})


def test_a_scalar_keeps_its_shape(tmp_path: Path) -> None:
    scalar = {"scale": np.array(2.5, dtype=np.float32)}  # shape [], as torch saves a 0-d tensor
    theirs = tmp_path / "theirs.safetensors"
    save_file(scalar, theirs)
    assert_same(safetensors_io.load(theirs)[0], scalar)
    ours = tmp_path / "ours.safetensors"
    safetensors_io.save(ours, scalar)
    assert_same(load_file(ours), scalar)


def test_ours_names_a_dtype_it_does_not_read(tmp_path: Path) -> None:
    path = tmp_path / "f16.safetensors"
    save_file({"w": np.ones((2, 2), dtype=np.float16)}, path)
    with pytest.raises(ValueError, match="tensor w has dtype F16, only F32 is supported"):
        safetensors_io.load(path)
