"""benchmarks/timeline/cpu_origin.py: CPU-traced steps forecast host-aware for the H100 and
H200, each with a host model calibrated without any trace of its workload, against the
recorded GPU measurements (issue #15, its third "done when")."""
from __future__ import annotations

import pytest
from bench_scripts import ROOT, loaded_script


@pytest.fixture(scope="module")
def co():
    with loaded_script("benchmarks/timeline/cpu_origin.py", "cpu_origin") as module:
        yield module


@pytest.fixture(scope="module")
def rows(co):
    return co.evaluate()


def _mean(rows, key="error", run=None):
    sel = [r for r in rows if run in (None, r["run"])]
    return sum(abs(r[key]) for r in sel) / len(sel)


def test_each_workload_is_forecast_with_a_model_that_never_saw_it(co) -> None:
    from habitat.analysis.host_model import load_document, trace_host_costs

    later = sorted((ROOT / "benchmarks/results" / co.CALIBRATION_RUN / "traces").glob("dcgan_*.json.gz"))
    later += sorted((ROOT / "benchmarks/results" / co.CALIBRATION_RUN / "traces").glob("resnet50_*.json.gz"))
    costs = {f"{co.CALIBRATION_RUN}/{p.name.removesuffix('.json.gz')}": trace_host_costs(load_document(p))
             for p in later}
    models = co.held_out_models(costs)
    assert "resnet50" not in models["resnet50"]["calibration"] and "dcgan" in models["resnet50"]["calibration"]
    assert set(models["dcgan"]["traces"]) == {f"{co.CALIBRATION_RUN}/resnet50_bf16", f"{co.CALIBRATION_RUN}/resnet50_fp32"}


def test_cpu_traced_steps_are_host_aware_and_closer_than_the_kernel_sum(rows) -> None:
    # 8 workloads x (H100 and H200 of 2026-11-22, H100 of 2026-11-23), 8 of the networks built
    # from configs x (H100 and H200 of 2026-11-27)
    assert len(rows) == 40
    # Measured (2026-11-23, load ~3.5): 12.5% on the H100 of 11-22, 15.3% on the H100 of 11-23,
    # 29.2% on the H200 machine (its host is 1.2-2x slower), 19.0% overall; the kernel sum
    # 36.2%, 32.0%, 46.3%, 38.2%. Bounds leave room for changes to the device-side cost models.
    assert _mean(rows, run="H100 11-22") < 0.16
    assert _mean(rows, run="H100 11-23") < 0.19
    assert _mean(rows) < 0.23
    assert _mean(rows) < _mean(rows, "kernel_sum_error") - 0.10
    by = {(r["workload"], r["run"]): r for r in rows}
    # The host-bound mixed-precision steps are said to be host-bound, with the GPU partly idle.
    for w in ("dcgan_bf16", "gpt2_small_bf16", "resnet50_bf16"):
        assert by[(w, "H100 11-22")]["host_bound"] and by[(w, "H100 11-22")]["gpu_busy_fraction"] < 0.85
    assert not by[("gpt2_small_fp32", "H100 11-22")]["host_bound"]  # device-bound: the kernels
    # The networks built from configs on the H100 of 2026-11-27, with a host model of no trace of
    # theirs: 8.0% measured (2026-11-27), 7 of 8 within 15%.
    assert _mean(rows, run="H100 11-27") < 0.12
    assert by[("bert_base_mlm_bf16", "H100 11-27")]["host_bound"]
    assert not by[("vit_b16_fp32", "H100 11-27")]["host_bound"]
