"""The device database as Python sees it: lookups, errors, user files, the table."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from subprocess_env import subprocess_env

hd = importlib.import_module("habitat.data.devices")  # habitat.data.devices is also the function


@pytest.fixture(autouse=True)
def fresh_database(monkeypatch: pytest.MonkeyPatch):
    """Every test starts from the packaged database and leaves it that way."""
    monkeypatch.delenv(hd.ENV_VAR, raising=False)
    monkeypatch.setattr(hd, "_user_files", [])
    hd._load()
    yield
    monkeypatch.undo()
    hd._load()


def test_ships_at_least_twenty_gpus_with_cited_figures():
    devs = hd.devices()
    assert len(devs) >= 20
    for d in devs:
        assert d.sms > 0 and d.memory_bandwidth_gbs > 0 and d.peak_tflops["fp32"] > 0
        assert "sms" in d.sources and "peak_tflops.fp32" in d.sources


@pytest.mark.parametrize("torch_name, canonical", [
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
    ("NVIDIA H100 PCIe", "H100-PCIE-80GB"),
    ("NVIDIA H200", "H200-SXM-141GB"),
    ("NVIDIA B200", "B200"),
    ("Tesla T4", "T4"),
    ("Tesla V100-PCIE-32GB", "V100-PCIE-32GB"),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
    ("Tesla P100-PCIE-16GB", "P100-PCIE-16GB"),
    ("Tesla P4", "P4"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("NVIDIA GeForce RTX 3090", "RTX-3090"),
    ("NVIDIA GeForce RTX 2080 Ti", "RTX-2080-Ti"),
])
def test_torch_device_names_resolve(torch_name: str, canonical: str):
    assert hd.get_device(torch_name).name == canonical


@pytest.mark.parametrize("short, canonical", [
    ("A100", "A100-SXM4-80GB"),
    ("a100", "A100-SXM4-80GB"),
    ("A100-80GB", "A100-SXM4-80GB"),
    ("a100 pcie 40gb", "A100-PCIE-40GB"),
    ("A100-PCIe", "A100-PCIE-80GB"),
    ("h100", "H100-SXM5-80GB"),
    ("H100-SXM", "H100-SXM5-80GB"),
    ("V100", "V100-SXM2-16GB"),
    ("P100", "P100-PCIE-16GB"),
    ("rtx_4090", "RTX-4090"),
    ("NVIDIA_A100_80GB_PCIe", "A100-PCIE-80GB"),  # NeuSight's file names
    ("Tesla_V100-PCIE-32GB", "V100-PCIE-32GB"),
])
def test_short_and_file_names_resolve(short: str, canonical: str):
    assert hd.get_device(short).name == canonical


def test_device_properties():
    a100 = hd.get_device("A100")
    assert a100.compute_capability == "8.0"
    assert (a100.cc_major, a100.cc_minor) == (8, 0)
    assert a100.peak_tflops["bf16"] == 312
    assert a100.peak_flops("bf16") == pytest.approx(312e12)
    assert a100.sm_limits["max_warps"] == 64
    assert a100.sm_limits["reserved_shared_per_block"] == 1024
    assert hd.get_device("V100").peak_flops("bf16") == pytest.approx(15.7e12)  # SIMT fallback
    assert "DISPUTED" in hd.get_device("L40S").notes
    assert hd.get_device(a100) is a100
    assert hd.get_device("NVIDIA A100-SXM4-80GB") == a100
    with pytest.raises(ValueError, match="int4"):
        a100.peak_flops("int4")


def test_occupancy_from_python():
    # cc 8.0: smem 49152 + 1 KB reserved = 50176 per block; 167936 // 50176 = 3 blocks.
    occ = hd.get_device("A100").occupancy(256, 32, 49152)
    assert occ == {"active_blocks_per_sm": 3, "active_warps_per_sm": 24, "fraction": 0.375,
                   "limit": "shared_memory"}
    assert hd.get_device("T4").occupancy(2048, 32)["limit"] == "invalid"


def test_unknown_name_lists_close_names_and_the_fix():
    with pytest.raises(hd.UnknownDeviceError) as info:
        hd.get_device("A100-SXM4-96GB")
    message = str(info.value)
    assert "A100-SXM4-80GB" in message
    assert "load_devices" in message and "HABITAT_DEVICES" in message
    assert isinstance(info.value, ValueError)
    assert "compute_capability" not in message  # the fix, not the file's whole layout


def test_cloud_names_resolve():
    assert hd.get_device("A10G").name == "A10"  # AWS g5: no datasheet of its own
    assert hd.get_device("NVIDIA A10G").name == "A10"
    assert hd.get_device("A100-40G").name == "A100-SXM4-40GB"


def _write(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "my_devices.json"
    path.write_text(json.dumps(doc))
    return path


# A GPU the database does not hold (figures for the test only).
NEW_GPU = {"name": "RTX-A6000", "aliases": ["NVIDIA RTX A6000"], "compute_capability": "8.6",
           "sms": 84, "boost_clock_mhz": 1800, "memory_gb": 48, "memory_bandwidth_gbs": 768,
           "l2_mb": 6, "tdp_w": 300, "peak_tflops": {"fp32": 38.7, "bf16": 155.0}}


def test_user_file_overrides_and_adds(tmp_path: Path):
    path = _write(tmp_path, {"devices": [{"name": "A100", "memory_bandwidth_gbs": 1800}, NEW_GPU]})
    named = hd.load_devices(path)
    assert [d.name for d in named] == ["A100-SXM4-80GB", "RTX-A6000"]
    assert hd.get_device("A100").memory_bandwidth_gbs == 1800
    assert hd.get_device("A100").sms == 108  # untouched fields stay
    assert hd.get_device("NVIDIA RTX A6000").sm_limits["max_warps"] == 48
    assert "RTX-A6000" in hd.format_devices_table(hd.devices())


def test_bad_user_file_names_device_and_field_and_changes_nothing(tmp_path: Path):
    before = len(hd.devices())
    path = _write(tmp_path, {"devices": [{"name": "MyGPU", "sms": 10}]})
    with pytest.raises(ValueError, match=r'MyGPU.*memory_gb.*my_devices\.json'):
        hd.load_devices(path)
    assert len(hd.devices()) == before
    bad_json = tmp_path / "broken.json"
    bad_json.write_text("{\"devices\": [")
    with pytest.raises(ValueError, match="malformed JSON"):
        hd.load_devices(bad_json)
    with pytest.raises(ValueError, match="cannot read"):
        hd.load_devices(tmp_path / "missing.json")


def test_environment_variable_adds_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(hd.ENV_VAR, str(_write(tmp_path, {"devices": [NEW_GPU]})))
    hd._load()
    assert hd.get_device("rtx a6000").name == "RTX-A6000"


def test_broken_environment_file_is_an_error_at_first_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bad = _write(tmp_path, {"devices": [{"name": "X"}]})
    monkeypatch.setenv(hd.ENV_VAR, str(bad))
    try:
        with pytest.raises(ValueError, match="invalid device file") as info:
            hd._load()
        assert str(bad) in str(info.value) and hd.ENV_VAR in str(info.value)
        # Never silently replaced by the built-in figures: every use raises until fixed.
        with pytest.raises(ValueError, match="invalid device file"):
            hd.get_device("A100")
        with pytest.raises(ValueError, match="invalid device file"):
            hd.devices()
        monkeypatch.setenv(hd.ENV_VAR, str(tmp_path / "nowhere.json"))
        with pytest.raises(ValueError, match="not a file"):
            hd._load()
        with pytest.raises(ValueError, match="nowhere.json"):
            hd.get_device("A100")
    finally:
        monkeypatch.delenv(hd.ENV_VAR)
        hd._load()
    assert hd.get_device("A100").name == "A100-SXM4-80GB"


def test_broken_environment_file_fails_the_cli_with_one_message(tmp_path: Path):
    import subprocess
    import sys

    bad = _write(tmp_path, {"devices": [{"name": "X"}]})
    env = subprocess_env(**{hd.ENV_VAR: str(bad)})
    out = subprocess.run([sys.executable, "-m", "habitat", "devices"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr and str(bad) in out.stderr


@pytest.mark.parametrize("bad", [None, 5, [], [None], "", ["A100", 3]])
def test_bad_target_values_get_the_unknown_gpu_advice(bad):
    with pytest.raises(hd.UnknownDeviceError, match="pass a GPU name, a list of names or 'all'"):
        hd.target_names(bad)


def test_all_and_comma_separated_targets():
    every = [d.name for d in hd.devices()]
    assert hd.target_names("all") == every
    assert hd.target_names(["ALL"]) == every
    assert hd.target_names("a100, h100") == ["A100-SXM4-80GB", "H100-SXM5-80GB"]
    assert hd.target_names(("A100", hd.get_device("a100"))) == ["A100-SXM4-80GB"]
    with pytest.raises(hd.UnknownDeviceError, match="A100"):
        hd.target_names(["A1000"])


def test_table_lists_every_device_with_peaks():
    table = hd.format_devices_table(hd.devices())
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["GPU", "CC", "SMs", "MHz"]
    assert len(lines) == len(hd.devices()) + 3  # header, rule, rows, footnote
    h100 = next(line for line in lines if line.startswith("H100-SXM5-80GB"))
    assert "989.4" in h100 and "3350" in h100 and "9.0" in h100
    t4 = next(line for line in lines if line.startswith("T4 "))
    assert " - " in t4  # no TF32/BF16 units
