"""The collective model against the published nccl-tests curves (benchmarks/collectives), by node
cross-validation: devices.json holds what calibrate.py (one node) and across_nodes.py (across
nodes) fit on each whole pool of curves, every pooled curve is scored by a fit that never saw it,
and the held-out figures stay where benchmarks/collectives/README.md reports them."""
from __future__ import annotations

import pytest
from bench_scripts import load_script

from habitat.analysis.cluster import Cluster

# compare_nccl_tests imports calibrate by that name (the script's directory): one module for both.
calibrate = load_script("benchmarks/collectives/calibrate.py", "calibrate")
compare_nccl_tests = load_script("benchmarks/collectives/compare_nccl_tests.py", "bench_compare_nccl_tests")
across_nodes = load_script("benchmarks/collectives/across_nodes.py", "bench_across_nodes")


@pytest.fixture(scope="module")
def comparison() -> list[dict]:
    return compare_nccl_tests.compare()


def test_every_curve_has_a_harness_and_a_source() -> None:
    curves = calibrate.load_curves()
    assert {c["harness"] for c in curves} == {"nccl-tests", "all_reduce_bench.py"}
    for c in curves:
        assert c["source"] and c["algorithm"] in ("auto", "nvls")
    pools = calibrate.pools(curves)
    assert sorted((name, len(members)) for name, members in pools.items()) == [
        ("nvlink3-nvswitch", 3), ("nvlink4-nvswitch/nvls", 2)]
    assert all(c["harness"] == "nccl-tests" for members in pools.values() for c in members)


def test_devices_json_holds_what_calibrate_fits_on_the_whole_pools() -> None:
    blocks = calibrate.shipped_fits(calibrate.load_curves())
    for gpu in ("A100-SXM4-80GB", "H100-SXM5-80GB"):
        intra = Cluster(gpu, 8).intra
        got, achieved = blocks[intra["name"]], intra["achieved"]
        for proto in calibrate.PROTOCOLS:
            assert achieved[proto]["busbw_fraction"] == pytest.approx(got[proto]["busbw_fraction"], abs=1e-3)
            assert achieved[proto]["step_latency_us"] == pytest.approx(got[proto]["step_latency_us"], abs=0.01)
        if "nvls_chunk_overhead_us" in got:
            assert achieved["nvls_latency_us"] == pytest.approx(got["nvls_latency_us"], abs=0.05)
            assert achieved["nvls_chunk_overhead_us"] == pytest.approx(got["nvls_chunk_overhead_us"], abs=0.005)
    # Hopper's ring protocols are the A100 fit carried over (no Hopper ring curve to fit).
    a100, hopper = blocks["nvlink3-nvswitch"], blocks["nvlink4-nvswitch"]
    assert hopper["LL"]["step_latency_us"] == a100["LL"]["step_latency_us"]
    assert hopper["Simple"]["busbw_fraction"] == pytest.approx(a100["Simple"]["busbw_fraction"] * 0.82 / 0.8, abs=1e-3)


def test_a_single_curve_fit_is_the_first_protocols_calibration() -> None:
    """Pooling changes the data, not the fit: one Azure curve alone gives the constants the first
    protocol shipped (calibrated on that node only, README 'Layer 2')."""
    azure = next(c for c in calibrate.load_curves() if "Azure ND A100 v4" in c["name"])
    fit = calibrate.fit([azure])
    assert fit["LL"] == {"busbw_fraction": 0.515, "step_latency_us": 2.52, "points": "64 KiB-2 MiB (6)"}
    assert (fit["Simple"]["busbw_fraction"], fit["Simple"]["step_latency_us"]) == (0.769, 13.57)


def test_every_pooled_curve_is_scored_by_a_fit_without_it(comparison: list[dict]) -> None:
    curves = calibrate.load_curves()
    held_out = calibrate.held_out_fits(curves)
    assert set(held_out) == {c["name"] for c in curves if c["harness"] == "nccl-tests"}
    for curve in curves:
        if curve["name"] not in held_out:
            continue
        pool = calibrate.pools(curves)[calibrate.pool_name(curve)]
        rest = [c for c in pool if c is not curve]
        expected = calibrate.achieved_blocks([calibrate.fit(rest)])[Cluster(curve["device"], 8).intra["name"]]
        got = held_out[curve["name"]][Cluster(curve["device"], 8).intra["name"]]
        for key, value in expected.items():
            assert got[key] == value, (curve["name"], key)
    scored = {c["name"]: c["scored"] for c in comparison}
    assert all(s.startswith("held out") for n, s in scored.items() if n in held_out)
    assert all(s.startswith("shipped constants") for n, s in scored.items() if n not in held_out)


def test_held_out_figures_stay_where_the_readme_reports(comparison: list[dict]) -> None:
    assert all(c["points"] == 11 for c in comparison)
    gpus = compare_nccl_tests.by_gpu(comparison)
    # The 15% over all sizes of each GPU type's curves, each curve scored held out.
    assert gpus["A100-SXM4"]["mean_abs_error_pct"] <= 15
    assert gpus["H100-SXM5"]["mean_abs_error_pct"] <= 15
    assert gpus["H200-SXM"]["mean_abs_error_pct"] <= 15
    # Per curve the A100 nodes part at 1-4 MiB (README, 'Why the A100 evaluation curves miss'):
    # the OCI node held out is 16.1%, the stas00 node 15.0%.
    for c in comparison:
        assert c["mean_abs_error_pct"] <= (17 if c["device"].startswith("A100") else 15), c["name"]
        # the achieved model beats NCCL's tuner numbers on every curve
        assert c["mean_abs_error_pct"] < c["nccl_tuner_mean_abs_error_pct"]


def test_a100_curves_side_by_side_below_the_evaluation_range() -> None:
    """Every published 8x A100 curve per call, 32 KiB-16 MiB, beside the model: the Azure node stays
    near its 32 KiB latency up to 1 MiB; the stas00 and OCI nodes grow from 64 KiB on, and the
    stas00 node sits at ~101 us from 1 to 4 MiB (benchmarks/collectives/README.md)."""
    table = compare_nccl_tests.side_by_side("A100-SXM4")
    assert len(table["curves"]) == 3
    rows = {r["bytes"]: r for r in table["rows"]}
    azure, stas, oci = table["curves"]
    assert rows[32 << 10][azure] == pytest.approx(rows[32 << 10][stas], rel=0.1)
    assert rows[1 << 20][stas] > 1.9 * rows[1 << 20][azure]
    assert rows[1 << 20][oci] > 1.5 * rows[1 << 20][azure] and rows[32 << 10][oci] < rows[32 << 10][azure]
    assert max(rows[s][stas] for s in (1 << 20, 2 << 20, 4 << 20)) < 1.01 * min(
        rows[s][stas] for s in (1 << 20, 2 << 20, 4 << 20))
    assert all(r["model_us"] > 0 for r in rows.values())


@pytest.fixture(scope="module")
def across() -> dict:
    return across_nodes.evaluate()


def test_network_tiers_hold_the_whole_pool_fits_across_nodes(across: dict) -> None:
    blocks = across_nodes.devices_blocks(across["fits"])
    for gpu in ("A100-SXM4-40GB", "H100-SXM5-80GB", "V100-SXM2-16GB"):
        achieved = Cluster(gpu, 16, 8).inter["achieved"]
        for pool in ("two_nodes", "more_nodes"):
            assert achieved[pool] == pytest.approx(blocks[pool], abs=1e-4), (gpu, pool)
    # NCCL's tree beats a ring's network bound on two nodes only
    assert blocks["two_nodes"]["busbw_share"] > 1 > blocks["more_nodes"]["busbw_share"]


def test_across_nodes_the_engine_scales_the_tuners_latency_and_bandwidth_time() -> None:
    two = Cluster("H100-SXM5-80GB", 16, 8).inter["achieved"]["two_nodes"]
    e = Cluster("H100-SXM5-80GB", 16, 8).collective("all_reduce", 64 << 20)
    latency, bandwidth = e["tuner_latency_us"], e["tuner_time_us"] - e["tuner_latency_us"]
    assert e["time_us"] == pytest.approx(two["latency_scale"] * latency + bandwidth / two["busbw_share"])
    more = Cluster("H100-SXM5-80GB", 32, 8).collective("all_reduce", 64 << 20)
    assert more["time_us"] != pytest.approx(more["tuner_time_us"])
    # other collectives across nodes keep the tuner's estimate (no curve of them was fitted)
    g = Cluster("H100-SXM5-80GB", 16, 8).collective("all_gather", 64 << 20)
    assert g["time_us"] == pytest.approx(g["tuner_time_us"])


def test_every_pooled_curve_across_nodes_is_scored_by_a_fit_without_it(across: dict) -> None:
    doc = across_nodes.load()
    by_name = {c["name"]: c for c in doc["curves"]}
    for c in across["curves"]:
        if c["pool"] is None:
            assert c["scored"].startswith("shipped constants") and by_name[c["name"]]["forced"]
            continue
        rest = [o for o in doc["curves"] if across_nodes.pool_of(o) == c["pool"] and o["name"] != c["name"]]
        assert c["fit"] == across_nodes.fit(rest)
    pools = [c["pool"] for c in across["curves"]]
    assert pools.count("two nodes") == 4 and pools.count("more than two nodes") == 3


def test_across_nodes_held_out_figures_stay_where_the_readme_reports(across: dict) -> None:
    two = {c["name"]: c for c in across["curves"] if c["pool"] == "two nodes"}
    assert all(c["points"] == 11 for c in two.values())
    # Three of the four two-node curves within the 25% held out; the OCI tutorial's
    # cluster reached 87 GB/s, where the same shape measured 171-222 GB/s in four other runs.
    met = sorted(c["mean_abs_error_pct"] for c in two.values())
    assert met[2] <= 15 and met[3] > 75
    oci = next(c for n, c in two.items() if "OKE" not in n and "A100" in n)
    assert oci["mean_abs_error_pct"] > 75 and oci["rows"][-1]["measured_busbw_gbs"] < 90
    assert across["two_nodes_held_out_mean_abs_error_pct"] == pytest.approx(29.5, abs=0.5)
    for c in across["curves"]:
        if c["pool"] == "more than two nodes":
            assert c["mean_abs_error_pct"] <= 21 and c["mean_abs_error_pct"] < c["tuner_mean_abs_error_pct"]
