"""The collective model against the published nccl-tests curves (benchmarks/collectives): the
achieved constants in devices.json are what calibrate.py fits on the calibration curves, and
the evaluation curves (never fitted to) stay where benchmarks/collectives/README.md reports."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from habitat.analysis.cluster import Cluster

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "collectives"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def comparison() -> dict[str, dict]:
    return {c["name"]: c for c in _load("compare_nccl_tests").compare()}


def test_every_curve_has_a_role_and_a_source() -> None:
    curves = json.loads((BENCH / "nccl_tests_all_reduce.json").read_text())["curves"]
    roles = {c["role"] for c in curves}
    assert roles == {"calibration", "evaluation"}
    for c in curves:
        assert c["source"] and c["algorithm"] in ("auto", "nvls")


def test_devices_json_holds_what_calibrate_fits() -> None:
    curves = json.loads((BENCH / "nccl_tests_all_reduce.json").read_text())["curves"]
    fit = _load("calibrate").fit_curve
    for curve in (c for c in curves if c["role"] == "calibration"):
        got = fit(curve)
        achieved = Cluster(curve["device"], curve["ranks"]).intra["achieved"]
        for proto in ("LL", "LL128", "Simple"):
            if proto in got:
                assert achieved[proto]["busbw_fraction"] == pytest.approx(got[proto]["busbw_fraction"], abs=1e-3)
                assert achieved[proto]["step_latency_us"] == pytest.approx(got[proto]["step_latency_us"], abs=0.01)
        if "nvls_chunk_overhead_us" in got:
            assert achieved["nvls_latency_us"] == pytest.approx(got["nvls_latency_us"], abs=0.05)
            assert achieved["nvls_chunk_overhead_us"] == pytest.approx(got["nvls_chunk_overhead_us"], abs=0.005)


def test_evaluation_curves_stay_where_the_readme_reports(comparison: dict[str, dict]) -> None:
    evaluation = [c for c in comparison.values() if c["role"] == "evaluation"]
    assert len(evaluation) == 4 and all(c["points"] == 11 for c in evaluation)
    by_gpu = {c["name"].split("(")[0].strip(): c for c in evaluation}
    # Hopper: within the 15% on both curves. The two A100 evaluation curves miss it at
    # 1-2 MiB, where both nodes take 1.5-2x the calibration node's time (same GPU, same harness):
    # benchmarks/collectives/README.md, 'Why the A100 evaluation curves miss'.
    assert by_gpu["8x H100 SXM5 80GB"]["mean_abs_error_pct"] <= 15
    assert by_gpu["8x H200 SXM"]["mean_abs_error_pct"] <= 15
    assert by_gpu["8x A100 SXM4"]["mean_abs_error_pct"] <= 20
    assert by_gpu["8x A100 SXM4 40GB"]["mean_abs_error_pct"] <= 20
    for c in evaluation:  # the achieved model beats NCCL's tuner numbers on every curve
        assert c["mean_abs_error_pct"] < c["nccl_tuner_mean_abs_error_pct"]


def test_a100_curves_side_by_side_below_the_evaluation_range() -> None:
    """Every published 8x A100 curve per call, 32 KiB-16 MiB, beside the model: the Azure node stays
    near its 32 KiB latency up to 1 MiB; the stas00 and OCI nodes grow from 64 KiB on, and the
    stas00 node sits at ~101 us from 1 to 4 MiB (benchmarks/collectives/README.md)."""
    table = _load("compare_nccl_tests").side_by_side("A100-SXM4")
    assert len(table["curves"]) == 3
    rows = {r["bytes"]: r for r in table["rows"]}
    azure, stas, oci = table["curves"]
    assert rows[32 << 10][azure] == pytest.approx(rows[32 << 10][stas], rel=0.1)
    assert rows[1 << 20][stas] > 1.9 * rows[1 << 20][azure]
    assert rows[1 << 20][oci] > 1.5 * rows[1 << 20][azure] and rows[32 << 10][oci] < rows[32 << 10][azure]
    assert max(rows[s][stas] for s in (1 << 20, 2 << 20, 4 << 20)) < 1.01 * min(
        rows[s][stas] for s in (1 << 20, 2 << 20, 4 << 20))
    assert all(r["model_us"] > 0 for r in rows.values())
