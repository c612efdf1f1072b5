"""Knowledge the evaluation and learned code take from the engine instead of repeating it
(issue 17): Habitat's wave scaling, the forgiving GPU-name lookup and the weights directory."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from habitat import _engine  # noqa: E402
from habitat.data.engine import weights_dir  # noqa: E402
from habitat.evaluate import predictors as P  # noqa: E402
from habitat.learned import devices as learned_devices  # noqa: E402
from habitat.learned.devices import DEFAULT_DB, DeviceTable, default_table  # noqa: E402


def test_wave_scaling_is_the_engines() -> None:
    t = default_table()
    o, d = t.find("V100-PCIE-32GB"), t.find("T4")
    times, flops, nbytes = np.array([10.0, 10.0]), np.array([1e9, 1e6]), np.array([1e6, 1e6])
    blocks, threads = np.array([40.0, 1e6]), np.array([256, 256])
    got = P.habitat_wave_scaling(times, flops, nbytes, blocks, o, d, threads=threads)
    want = _engine.wave_scale_us(times.tolist(), flops.tolist(), nbytes.tolist(), o.name, d.name,
                                 blocks=blocks.tolist(), threads_per_block=threads.tolist(),
                                 devices_json=str(DEFAULT_DB))
    assert got.tolist() == want
    # under one wave (40 blocks fit at once on both GPUs): only the clock and the busiest SM
    # matter, so with 40 blocks on 80 and 40 SMs (one block per SM on each) the clock ratio
    gamma = 0.5 * (d.peak_flops() / (d.bandwidth_gbs * 1e9)) / 1000.0
    assert got[0] == pytest.approx(10.0 * (o.clock_mhz / d.clock_mhz) ** (1 - gamma), rel=1e-9)
    assert "np.ceil" not in Path(P.__file__).read_text()  # no numpy copy of the formula


def test_wave_scaling_without_blocks_is_the_full_wave_formula() -> None:
    t = default_table()
    o, d = t.find("V100-PCIE-32GB"), t.find("T4")
    got = P.habitat_wave_scaling(np.array([1.0]), np.array([1e-9]), np.array([1.0]), None, o, d)
    assert got[0] == pytest.approx(o.bandwidth_gbs / d.bandwidth_gbs, rel=1e-6)
    with pytest.raises(ValueError):
        _engine.wave_scale_us([1.0], [1.0], [1.0, 2.0], o.name, d.name)


def test_device_names_are_looked_up_by_the_engine() -> None:
    table = default_table()
    assert not hasattr(learned_devices, "_key")  # no second normaliser
    for name in ("T4", "Tesla T4", "NVIDIA Tesla T4", "tesla_t4", "Tesla-T4", "NVIDIA A100-PCIE-40GB",
                 "A100 PCIE 40GB", "Tesla_P100-PCIE-16GB"):
        assert table.find(name).name == _engine.find_device(name, str(DEFAULT_DB)).name
    assert table.try_find("AMD_Instinct_MI100") is None
    with pytest.raises(KeyError, match="unknown GPU"):
        table.find("no such gpu 9000")


def test_device_table_looks_names_up_in_its_own_file(tmp_path: Path) -> None:
    path = tmp_path / "devices.json"
    path.write_text(DEFAULT_DB.read_text())
    table = DeviceTable.load(path)
    assert table.path == str(path)
    assert table.find("nvidia t4") == default_table().find("T4")


def test_evaluation_uses_the_forecasts_weights_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gemm.safetensors").write_bytes(b"")
    monkeypatch.setenv("HABITAT_WEIGHTS", str(tmp_path))
    assert P.default_weights_dir() == Path(weights_dir()) == tmp_path
    monkeypatch.setenv("HABITAT_WEIGHTS", "")
    with pytest.raises(FileNotFoundError, match="HABITAT_WEIGHTS"):
        P.default_weights_dir()
