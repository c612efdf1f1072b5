"""NeuSight's distributed DP/TP/PP labels through habitat.evaluate: the repository's 4x A100 copy,
and a synthetic second GPU folder to show the evaluation takes any target (its label values are
made up here: nothing is fitted to labels, so any positive numbers do)."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from habitat.evaluate import distributed as D
from habitat.evaluate import distributed_labels as L
from habitat.evaluate import models as M
from habitat.evaluate import predictors as P
from habitat.evaluate.distributed_audit import as_megatron
from habitat.learned.devices import default_table

DATA = Path(__file__).resolve().parents[3] / D.DATA_IN_REPO  # the checkout, also when installed
A100 = "gpt2_large-train-1024-4-"


@pytest.fixture(scope="module")
def models():
    return P.ModelSet(P.default_weights_dir())


@pytest.fixture(scope="module")
def a100(models):
    return D.evaluate(DATA, models, default_table())


def test_distributed_labels_are_forecast_from_the_single_gpu_step(a100):
    configs = a100["configs"]
    assert list(configs) == [A100 + c for c in ("dp4", "tp4", "pp4_1")]
    assert [round(configs[A100 + k]["measured_ms"], 1) for k in ("dp4", "tp4", "pp4_1")] == [452.3, 484.9, 1597.6]
    for stem, e in configs.items():
        assert e["trace"]["gpu"] == L.ORIGIN and e["trace"]["batch"] == e["trace"]["traced_batch"]
        for method in ("shape", "runtime"):
            r = e[method]
            assert math.isfinite(r["predicted_ms"]) and r["predicted_ms"] > 0
            assert e[f"{method}_ms"] == r["predicted_ms"]
            # a regression bound, not the target (README: 10%; measured errors are recorded there)
            assert abs(r["error_pct"]) < 25, (stem, method, r)
    # What each parallelism adds: DP one all-reduce of every gradient (3.1 GB of FP32), TP
    # 2 x (2 x 36 + 1) all-reduces of the hidden state, PP a bubble of 3/4 and send/recvs.
    dp = configs[A100 + "dp4"]["shape"]["breakdown"]["collectives"]
    assert len(dp) == 1 and dp[0]["count"] == 1 and 3.0e9 < dp[0]["bytes"] < 3.2e9
    tp = configs[A100 + "tp4"]["shape"]["breakdown"]["collectives"]
    assert sum(r["count"] for r in tp) == 2 * (2 * 36 + 1)
    pp = configs[A100 + "pp4_1"]["shape"]["breakdown"]
    assert pp["bubble_ms"] > 0.7 * (pp["time_ms"] - pp["compute_ms"])


def test_cli_writes_the_configs_by_label_file_stem(tmp_path):
    from habitat.evaluate.__main__ import main

    out = tmp_path / "out.json"
    assert main(["distributed", "--data", str(DATA), "--target", D.DEFAULT_TARGET, "--json", str(out)]) == 0
    configs = json.loads(out.read_text())["configs"]
    assert set(configs) == {A100 + c for c in ("dp4", "tp4", "pp4_1")}
    for e in configs.values():
        assert {"measured_ms", "shape_ms", "runtime_ms"} <= set(e)


def _synthetic_gpu(tmp_path: Path, name: str, own_trace: bool) -> Path:
    """A labels folder with the origin's traces and a GPU folder of made-up DP/TP/PP labels at
    global batches 4 and 16 (as NeuSight measured the H100)."""
    data = tmp_path / "labels"
    shutil.copytree(DATA / L.ORIGIN, data / L.ORIGIN)
    gpu = data / name
    gpu.mkdir()
    for batch, ms in ((4, 300.0), (16, 1100.0)):
        for config in ("dp4", "tp4", "pp4_1"):
            (gpu / f"gpt2_large-train-1024-{batch}-{config}.json").write_text(json.dumps({"e2e_latency": ms}))
    if own_trace:
        for f in (data / L.ORIGIN).iterdir():
            shutil.copy(f, gpu / f.name)
    return data


def test_any_gpu_folder_with_labels_is_a_target(tmp_path, models):
    data = _synthetic_gpu(tmp_path, "NVIDIA_H100_80GB_HBM3", own_trace=False)
    r = D.evaluate(data, models, default_table(), "NVIDIA_H100_80GB_HBM3")
    configs = r["configs"]
    assert list(configs) == [f"gpt2_large-train-1024-{b}-{c}" for b in (4, 16) for c in ("dp4", "tp4", "pp4_1")]
    assert configs["gpt2_large-train-1024-4-dp4"]["cluster"].startswith("4x H100-SXM5-80GB")
    # batch per rank: dp B/4, tp and pp B; batch 16 has no trace: the batch-4 one, rewritten
    for stem, batch in (("16-dp4", 4), ("16-tp4", 16), ("16-pp4_1", 16), ("4-dp4", 1)):
        e = configs["gpt2_large-train-1024-" + stem]
        assert e["single_gpu_batch"] == batch and e["trace"]["batch"] == batch
        assert e["trace"]["traced_batch"] == (4 if batch == 16 else batch)
        assert e["trace"]["gpu"] == L.ORIGIN
    for stem in ("tp4", "pp4_1"):
        small = configs[f"gpt2_large-train-1024-4-{stem}"]["shape"]["single_gpu_fwd_bwd_ms"]
        large = configs[f"gpt2_large-train-1024-16-{stem}"]["shape"]["single_gpu_fwd_bwd_ms"]
        assert 3.2 * small < large < 4.4 * small
    assert r["compute_audit"]["trace_gpu"] == L.ORIGIN


def test_the_targets_own_trace_is_used_and_is_not_scaled(tmp_path, models):
    data = _synthetic_gpu(tmp_path, D.DEFAULT_TARGET, own_trace=True)
    r = D.evaluate(data, models, default_table(), D.DEFAULT_TARGET)
    e = r["configs"]["gpt2_large-train-1024-4-dp4"]
    assert e["trace"]["gpu"] == D.DEFAULT_TARGET
    # runtime-based on its own GPU: the node times as measured (Megatron's fusions aside)
    table = default_table()
    own = M._model_predictor(models, table.find(D.DEFAULT_TARGET), D.DEFAULT_TARGET)
    nodes = as_megatron(L.trace_nodes(L.TraceChoice(data / D.DEFAULT_TARGET, 1, 1), "gpt2_large", 1024, own), own)
    measured = sum(n.work.repeat * t for n in nodes for p, t in n.work.measured.items() if n.work.parts.get(p))
    assert e["runtime"]["single_gpu_fwd_bwd_ms"] == pytest.approx(measured / 1e3, rel=1e-3)


def test_missing_target_or_labels_name_the_fix(tmp_path, models):
    with pytest.raises(FileNotFoundError, match="no such GPU folder.*NVIDIA_A100"):
        D.evaluate(DATA, models, default_table(), "NVIDIA_H100_80GB_HBM3")
    with pytest.raises(FileNotFoundError, match="no distributed label"):
        D.evaluate(DATA, models, default_table(), L.ORIGIN)


def test_a_config_implies_its_parallelism_and_trace_batch():
    p, b = L.parallelism_of("dp4", 16)
    assert (p.data, p.overlap, b) == (4, False, 4) and math.isinf(p.bucket_mb)
    p, b = L.parallelism_of("tp4", 16)
    assert (p.tensor, b) == (4, 16)
    p, b = L.parallelism_of("pp4_2", 16)
    assert (p.pipeline, p.micro_batches, b) == (4, 2, 16)
    with pytest.raises(ValueError, match="does not split"):
        L.parallelism_of("dp3", 16)
    with pytest.raises(ValueError, match="go with pp"):
        L.parallelism_of("tp4_2", 16)


def test_rewriting_the_batch_scales_leading_batch_and_token_dimensions():
    row = {"input_shapes": "[[4, 1024, 1280], [1, 1024], [4096, 1280], [1280, 3840]]",
           "output_shape": "(4096, 3840)"}
    out = L.rebatched_row(row, 4, 16, 1024)
    assert out["input_shapes"] == str([[16, 1024, 1280], [1, 1024], [16384, 1280], [1280, 3840]])
    assert out["output_shape"] == "(16384, 3840)"


def test_megatron_rewrite_removes_the_fused_element_wise_work(models):
    """Megatron's default fusions: the attention scale, the 8-kernel tanh GeLU and the residual
    adds leave the layer (the FP32 causal mask stays); the gradient sizes do not change."""
    table = default_table()
    origin = M._model_predictor(models, table.find(L.ORIGIN), D.DEFAULT_TARGET)
    hf = L.trace_nodes(L.TraceChoice(DATA / L.ORIGIN, 1, 1), "gpt2_large", 1024, origin)
    mg = as_megatron(hf, origin)

    def busy(nodes, prefix):
        return [n.work.name for n in nodes if n.work.repeat > 1 and n.work.name.startswith(prefix)
                and any(sum(p.scale for p in ps) > 0 for ps in n.work.parts.values())]
    assert busy(hf, "truediv") and busy(hf, "where") and busy(hf, "tanh")
    assert not busy(mg, "truediv") and busy(mg, "where") and not busy(mg, "tanh")
    assert len([n for n in mg if n.work.name.endswith("_bias_gelu")]) == 1
    assert not busy(mg, "add_10") and not busy(mg, "add_15")  # residual adds fused into dropout

    def grad_bytes(nodes):
        return sum(n.work.repeat * p.shape["n"] for n in nodes for p in n.work.parts.get("acc") or [])
    assert grad_bytes(mg) == grad_bytes(hf)
    hf_run = D.evaluate(DATA, models, table, megatron=False)["configs"][A100 + "dp4"]["shape"]
    mg_run = D.evaluate(DATA, models, table)["configs"][A100 + "dp4"]["shape"]
    assert mg_run["single_gpu_fwd_bwd_ms"] < hf_run["single_gpu_fwd_bwd_ms"]


def test_optimizer_counts_every_pass_over_the_fp32_state_once():
    """Adam 7 streams, L2 norm 1 (a read), clip scale 2 (only when the norm exceeds the clip value),
    zero_grad 1, divide 2 (every DDP rank, a data-parallel size of 1 included): 13 streams of
    4-byte values with the clip scale, 11 without, whatever a part's scale."""
    def streams(p: M.Part) -> float:  # a stand-in predictor: 1 us per stream, scale ignored as the real one does
        return p.shape["inputs"] + 1.0
    assert D.optimizer_us(1e6, streams) == 13.0
    assert D.optimizer_us(1e6, streams, clip_scale=False) == 11.0
    assert D.CLIP_SCALE_RUNS is False  # the labels' constant batch: see the constant's comment


def test_runtime_method_leaves_host_only_nodes_out(models, a100):
    """Nodes with no device work add nothing to the runtime-based forecast (they are host-side and
    hidden behind the GPU's queued kernels); what was left out is reported, and it does not depend
    on the batch (26 ms at batch 1 and 4: dispatch and timing gaps, not data)."""
    table = default_table()
    times = D._runtime_times(models, table.find(D.DEFAULT_TARGET), table.find(L.ORIGIN), D.DEFAULT_TARGET)
    origin = M._model_predictor(models, table.find(L.ORIGIN), D.DEFAULT_TARGET)
    left = []
    for batch in (1, 4):
        nodes = L.trace_nodes(L.TraceChoice(DATA / L.ORIGIN, batch, batch), "gpt2_large", 1024, origin)
        host = [n for n in nodes if n.work.measured.get("fw", 0.0) > 0 and not n.work.parts.get("fw")]
        assert host and all(times(n.work, "fw") == 0.0 for n in host)
        left.append(D.host_only_us(nodes))
    assert left[0] > 0 and abs(left[0] - left[1]) < 0.01 * left[0]
    assert a100["configs"][A100 + "dp4"]["runtime"]["host_only_left_out_ms"] > 0


def test_compute_audit_locates_the_per_rank_compute_error(a100):
    audit = a100["compute_audit"]
    dp, pp = audit["implied_per_sample_ms"][A100 + "dp4"], audit["implied_per_sample_ms"][A100 + "pp4_1"]
    e = a100["configs"][A100 + "dp4"]
    added = e["shape"]["predicted_ms"] - e["shape"]["single_gpu_fwd_bwd_ms"]
    assert dp["implied_by_label_shape_adds"] == round(e["measured_ms"] - added, 1)
    assert dp["samples_per_rank"] == 1 and pp["samples_per_rank"] == 4
    kernels = audit["origin_kernels"]
    assert set(kernels) == {"batch 1", "batch 4"}
    for groups in kernels.values():
        assert groups["gemm"]["measured_ms"] > 0 and groups["gemm"]["forecast_ms"] > 0
        assert groups["not modelled"]["forecast_ms"] == 0.0
    # Where the forecast's batch-1 penalty per sample comes from. Since the GEMM model of
    # 2026-11-27 the linear GEMMs' forecast penalty on the origin card is below what NeuSight
    # measured there (it was steeper before), and the attention bmm carry most of the target's.
    penalty = audit["batch_penalty_by_kernel"]
    assert penalty["batches"] == [1, 4]
    for group in penalty["groups"].values():
        for side in group.values():
            small, large = side["small_batch_ms"], side["large_batch_per_sample_ms"]  # rounded to 0.1 ms
            lo, hi = ((small - 0.05) / (large + 0.05) - 1) * 100, ((small + 0.05) / (large - 0.05) - 1) * 100
            assert lo - 0.05 <= side["penalty_pct"] <= hi + 0.05
    gemm, bmm = penalty["groups"]["linear GEMMs"], penalty["groups"]["attention bmm"]
    total = penalty["groups"]["all modelled"]
    assert gemm["origin_forecast"]["penalty_pct"] < gemm["origin_measured"]["penalty_pct"]
    share = (bmm["target_forecast"]["small_batch_ms"] - bmm["target_forecast"]["large_batch_per_sample_ms"]) / (
        total["target_forecast"]["small_batch_ms"] - total["target_forecast"]["large_batch_per_sample_ms"])
    assert share > 0.5
    assert total["target_forecast"]["small_batch_ms"] == dp["shape_forecast"]
