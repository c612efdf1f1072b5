"""The parallel step model and clusters (no torch needed, no GPU)."""
from __future__ import annotations

import pytest

from habitat.analysis.cluster import Cluster
from habitat.analysis.parallel import MB, Parallelism, StepWork, ddp_buckets, parallel_step


def _work(grad_mb: float = 100.0, n_grads: int = 100, layers: int = 8) -> StepWork:
    per = grad_mb * MB / n_grads
    backward = 20_000.0
    grads = [(per, backward * (i + 1) / n_grads) for i in range(n_grads)]
    return StepWork(forward_us=10_000.0, backward_us=backward, optimizer_us=2_000.0, gradients=grads,
                    layers=layers, tp_split_forward_us=8_000.0, tp_split_backward_us=16_000.0,
                    activation_bytes=8 * MB, prologue_forward_us=500.0, prologue_backward_us=1_000.0,
                    epilogue_forward_us=500.0, epilogue_backward_us=1_000.0)


def test_cluster_defaults_and_label():
    c = Cluster("H100", 16)
    assert (c.nodes, c.per_node) == (2, 8)
    assert c.intra["name"] == "nvlink4-nvswitch" and c.inter["name"] == "ib-ndr400"
    assert "2 nodes of 8" in c.label()
    assert Cluster("A100", 8, interconnect="pcie").intra["name"] == "pcie4"
    with pytest.raises(ValueError, match="gpus_per_node"):
        Cluster("A100", 12, gpus_per_node=8)
    with pytest.raises(ValueError, match="world_size"):
        Cluster("A100", 0)


def test_group_of_a_strided_process_group_spans_nodes():
    c = Cluster("A100", 16)
    assert c.group(8).nodes == 1
    dp = c.group(4, stride=4)  # DP group of a TP4 x DP4 job: one rank per 4 GPUs
    assert dp.nodes == 2 and dp.per_node == 2


def test_ddp_buckets_close_at_their_cap_in_ready_order():
    grads = [(0.5 * MB, float(i)) for i in range(10)]
    buckets = ddp_buckets(grads, bucket_mb=2.0, first_bucket_mb=1.0)
    assert [b for b, _ in buckets] == [1 * MB, 2 * MB, 2 * MB]
    assert buckets[0] == (1 * MB, 1.0)
    assert all(r1 <= r2 for (_, r1), (_, r2) in zip(buckets, buckets[1:]))
    assert sum(b for b, _ in buckets) == 5 * MB


def test_ddp_overlap_hides_communication_and_no_overlap_exposes_it():
    c = Cluster("A100", 8)
    w = _work()
    overlapped = parallel_step(w, c, Parallelism(data=8))
    serial = parallel_step(w, c, Parallelism(data=8, overlap=False))
    assert overlapped.exposed_comm_us < serial.exposed_comm_us
    assert serial.exposed_comm_us == pytest.approx(serial.comm_us, rel=1e-9)
    assert overlapped.time_us >= w.compute_us
    # the all-reduce of 100 MB over NVLink 3 at ~240 GB/s bus bandwidth: ~0.77 ms + latencies
    assert 700 < serial.comm_us < 3000
    row = overlapped.collectives[0]
    assert row["kind"] == "all_reduce" and row["bytes"] == pytest.approx(100 * MB, rel=1e-6)


def test_ddp_across_nodes_costs_more_than_inside_one():
    w = _work(grad_mb=1000)
    inside = parallel_step(w, Cluster("A100", 8), Parallelism(data=8, overlap=False))
    across = parallel_step(w, Cluster("A100", 16), Parallelism(data=16, overlap=False))
    assert across.comm_us > inside.comm_us
    assert any("across nodes" in n for n in across.notes) and not any("across nodes" in n for n in inside.notes)


def test_tensor_parallel_splits_the_layers_and_adds_all_reduces():
    c = Cluster("H100", 4)
    w = _work()
    tp = parallel_step(w, c, "tp")
    # split work /4, replicated work whole, plus 2 x (2L+1) all-reduces of the hidden state
    split = w.tp_split_forward_us + w.tp_split_backward_us
    expected_compute = w.forward_us + w.backward_us - split * 0.75
    reduces = [r for r in tp.collectives if r["kind"] == "all_reduce"]
    assert sum(r["count"] for r in reduces) == 2 * (2 * w.layers + 1)
    assert tp.time_us == pytest.approx(expected_compute + tp.comm_us + w.optimizer_us / 4)


def test_tensor_parallel_takes_the_shards_forecast_where_the_step_has_one():
    c = Cluster("H100", 4)
    w = _work()
    w.tp_sharded_us = {4: (2_500.0, 4_800.0)}  # a quarter-width GEMM runs less efficiently than 1/4
    tp = parallel_step(w, c, "tp")
    expected_compute = w.forward_us + w.backward_us - w.tp_split_forward_us - w.tp_split_backward_us + 2_500.0 + 4_800.0
    assert tp.time_us == pytest.approx(expected_compute + tp.comm_us + w.optimizer_us / 4)
    two = parallel_step(w, Cluster("H100", 2), "tp")  # no shard forecast for 2 ranks: the split work / 2
    split = w.tp_split_forward_us + w.tp_split_backward_us
    assert two.time_us == pytest.approx(w.forward_us + w.backward_us - split / 2 + two.comm_us + w.optimizer_us / 2)


def test_pipeline_bubble_follows_micro_batches():
    c = Cluster("A100", 4)
    w = _work(layers=8)
    w.prologue_forward_us = w.prologue_backward_us = w.epilogue_forward_us = w.epilogue_backward_us = 0
    one = parallel_step(w, c, Parallelism(pipeline=4, micro_batches=1))
    many = parallel_step(w, c, Parallelism(pipeline=4, micro_batches=16))
    fb = w.forward_us + w.backward_us
    # the pipeline takes fb (p+m-1)/(p m), of which the bubble is (p-1)/(m+p-1): fb (p-1)/(p m)
    assert one.bubble_us == pytest.approx(fb * 3 / 4)
    assert many.bubble_us == pytest.approx(fb * 3 / (4 * 16), rel=1e-6)
    assert many.time_us < one.time_us


def test_fsdp_and_parse():
    c = Cluster("H100", 8)
    w = _work()
    fsdp = parallel_step(w, c, "fsdp")
    kinds = {r["kind"] for r in fsdp.collectives}
    assert kinds == {"all_gather", "reduce_scatter"}
    assert Parallelism.parse("dp2,tp4", 8) == Parallelism(data=2, tensor=4)
    assert Parallelism.parse("pp4x8", 4) == Parallelism(pipeline=4, micro_batches=8)
    with pytest.raises(ValueError, match="world_size"):
        Parallelism.parse("dp3", 8)
    with pytest.raises(ValueError, match="cannot read"):
        Parallelism.parse("zero3", 8)
    with pytest.raises(ValueError, match="layers"):
        parallel_step(StepWork(forward_us=1, backward_us=1), c, "tp")


def _host_bound(work: StepWork, factor: float = 3.0) -> StepWork:
    """The same step with a host that takes `factor` x each phase's device time to issue it."""
    work.host_forward_us = factor * work.forward_us
    work.host_backward_us = factor * work.backward_us
    work.host_optimizer_us = factor * work.optimizer_us
    return work


def test_a_host_bound_step_is_host_bound_on_every_rank():
    c = Cluster("H100", 8)
    device, host = _work(), _host_bound(_work())
    issued = host.host_forward_us + host.host_backward_us + host.host_optimizer_us
    ddp = parallel_step(host, c, Parallelism(data=8))
    # 100 MB of buckets finish inside the host's backward; the rest hides behind the optimizer's launches
    assert ddp.time_us == pytest.approx(issued)
    assert ddp.exposed_comm_us == 0 and ddp.comm_us > 0
    assert ddp.host_bound and any("host-bound" in n for n in ddp.notes) and "host-bound" in str(ddp)
    assert not parallel_step(device, c, Parallelism(data=8)).host_bound
    # tensor parallelism divides the device work, not the launches: the step stays the host's
    tp = parallel_step(host, c, "tp")
    assert tp.time_us == pytest.approx(issued)
    assert tp.time_us > parallel_step(device, c, "tp").time_us


def test_tensor_parallelism_can_make_a_device_bound_step_host_bound():
    w = _host_bound(_work(), factor=0.5)  # one GPU: the device sets every phase
    c = Cluster("H100", 8)
    assert not parallel_step(w, c, Parallelism(data=8)).host_bound
    tp = parallel_step(w, c, "tp")  # 80% of the passes split 8 ways: the launches set the pace now
    assert tp.host_bound
    assert tp.time_us >= w.host_forward_us + w.host_backward_us


def test_a_host_bound_optimizer_hides_the_gradient_all_reduce_up_to_its_slack():
    c = Cluster("A100", 8)
    w = _work(grad_mb=2000)
    w.host_optimizer_us = 5 * w.optimizer_us  # 8 ms of launches for 2 ms of device work
    serial = parallel_step(w, c, Parallelism(data=8, overlap=False))
    device_only = parallel_step(_work(grad_mb=2000), c, Parallelism(data=8, overlap=False))
    # the optimizer's kernels wait for the all-reduce on the device while the host issues them
    slack = w.host_optimizer_us - w.optimizer_us
    assert serial.exposed_comm_us == pytest.approx(device_only.exposed_comm_us - slack)
    assert serial.time_us == pytest.approx(device_only.time_us)


def test_a_pipeline_stage_issues_its_launches_once_per_micro_batch():
    c = Cluster("A100", 4)
    w = _host_bound(_work(layers=8))
    w.prologue_forward_us = w.prologue_backward_us = w.epilogue_forward_us = w.epilogue_backward_us = 0
    pp = parallel_step(w, c, Parallelism(pipeline=4, micro_batches=4))
    # each stage's host time per micro-batch is a quarter of the step's, whatever m is:
    # the pipeline takes (sum over stages + (m - 1) x the largest) = (4 + 3) / 4 of the host's passes
    passes = w.host_forward_us + w.host_backward_us
    p2p = sum(r["time_us"] for r in pp.collectives if r["kind"] == "send_recv")
    assert pp.time_us == pytest.approx(passes * 7 / 4 + p2p + w.host_optimizer_us / 4, rel=1e-6)


def test_shares_of_the_step_exposed_communication_host_cadence_and_bubble():
    c = Cluster("A100", 8)
    serial = parallel_step(_work(grad_mb=1000), c, Parallelism(data=8, overlap=False))
    assert serial.host_bound_us == 0 and serial.bubble_us == 0
    assert serial.share(serial.exposed_comm_us) == pytest.approx(serial.exposed_comm_us / serial.time_us)
    assert serial.to_dict()["shares"]["exposed_comm"] > 0.05
    # a host-bound step: the host adds what the step takes over its device time
    host = _host_bound(_work())
    ddp = parallel_step(host, c, Parallelism(data=8))
    device_time = parallel_step(_work(), c, Parallelism(data=8)).time_us
    assert ddp.host_bound_us == pytest.approx(ddp.time_us - device_time)
    assert 0 < ddp.to_dict()["shares"]["host_bound"] < 1
    # a pipeline of one micro-batch idles (p-1)/p of its stages
    pp = parallel_step(_work(layers=8), Cluster("A100", 4), Parallelism(pipeline=4, micro_batches=1))
    assert pp.share(pp.bubble_us) == pytest.approx(0.75, abs=0.05)


def test_what_the_framework_adds_on_every_rank():
    """DDP's reducer and bucket launches, TP's and FSDP's collective launches: host time where
    the step has a host cadence (here host-bound: all of it lengthens the step), the reducer's
    kernels always."""
    from dataclasses import replace

    from habitat.analysis.parallel import FrameworkWork, ddp_buckets

    fw = FrameworkWork(tensors=100, reducer_host_backward_us=2000.0, reducer_backward_us=300.0,
                       reducer_host_finalize_us=3000.0, reducer_finalize_us=100.0,
                       launch_forward_us=20.0, launch_backward_us=10.0, bucket_launch_us=1.0)
    c = Cluster("H100", 8)
    host = _host_bound(_work())
    plain = replace(host, framework=fw)
    buckets = len(ddp_buckets(host.gradients))
    ddp, ddp0 = parallel_step(plain, c, Parallelism(data=8)), parallel_step(host, c, Parallelism(data=8))
    assert ddp.time_us - ddp0.time_us == pytest.approx(2000.0 + buckets * 1.0 + 3000.0)
    tp, tp0 = parallel_step(plain, c, "tp"), parallel_step(host, c, "tp")
    n = 2 * host.layers + 1
    assert tp.time_us - tp0.time_us == pytest.approx(n * (20.0 + 10.0))  # no reducer under pure TP
    fsdp, fsdp0 = parallel_step(plain, c, "fsdp"), parallel_step(host, c, "fsdp")
    assert fsdp.time_us - fsdp0.time_us == pytest.approx(host.layers * (20.0 + 2 * 10.0))
    # without a host cadence only the reducer's kernels are added (in the backward pass and after it)
    device = replace(_work(), framework=fw)
    serial = parallel_step(device, c, Parallelism(data=8, overlap=False))
    serial0 = parallel_step(_work(), c, Parallelism(data=8, overlap=False))
    assert serial.time_us - serial0.time_us == pytest.approx(300.0 + 100.0)


def test_a_device_file_can_add_a_fabric(tmp_path):
    import json

    import habitat
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps({"format": "habitat-devices", "version": 1, "devices": [],
                                "interconnects": {"links": {"ib-xdr800": {
                                    "kind": "network", "bandwidth_gbs": 100.0, "efficiency": 0.9,
                                    "hop_latency_us": 14.0}}}}))
    habitat.load_devices(path)
    c = Cluster("B200", 16, network="ib-xdr800")
    assert c.inter["bandwidth_gbs"] == 100.0
    slow = Cluster("B200", 16)
    big = 8 * 1024 * MB
    assert c.collective_us("all_reduce", big) < slow.collective_us("all_reduce", big)


def test_a_recorded_h100_step_on_clusters_keeps_its_step_as_seen():
    """A format-2 trace recorded on an H100 (GPT-2 small, bf16, host-bound there): on one GPU
    the cluster model gives the step as seen; DDP on 8 keeps it and adds what is exposed."""
    from pathlib import Path

    from habitat import Forecast
    from habitat.analysis.cluster_compare import forecast_on_cluster

    trace = (Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "h100-sxm5-80gb-2026-11-23"
             / "traces" / "gpt2_small_bf16.json.gz")
    forecast = Forecast.load(trace, ["H100"])
    seen = forecast.latest.step_ms("H100")
    assert seen > 1.2 * forecast.latest.time_ms("H100")  # host-bound on the H100
    one = forecast_on_cluster(forecast, Cluster("H100", 1))
    assert one.time_ms == pytest.approx(seen, rel=1e-9)
    ddp = forecast_on_cluster(forecast, Cluster("H100", 8))
    assert ddp.host_bound
    # DDP on 8 keeps the step as seen, adds what is exposed and what DDP issues on the host
    # (its reducer over the 148 gradient tensors, the buckets' launches): host-bound, all of it
    from dataclasses import replace

    from habitat.analysis.step_work import step_work_from_step

    work = step_work_from_step(forecast.latest, "H100-SXM5-80GB")
    fw = work.framework
    assert fw.tensors == 148
    bare = parallel_step(replace(work, framework=None), Cluster("H100", 8), "ddp")
    assert bare.time_ms == pytest.approx(seen + bare.exposed_comm_us / 1e3, rel=1e-9)
    # the host's added time lengthens the host-bound passes; the optimizer, device-bound on one
    # GPU, takes the reducer's copies back in its slack first
    added = fw.reducer_host_backward_us + fw.reducer_host_finalize_us + 14 * fw.bucket_launch_us
    slack = work.optimizer_us - work.host_optimizer_us
    assert (added - slack) / 1e3 == pytest.approx(ddp.time_ms - bare.time_ms, rel=0.01)


def test_a_recorded_steps_tensor_parallel_ranks_run_narrower_less_efficient_gemms():
    """GPT-2 small bf16 (recorded on an H100): each rank's split work, forecast at Megatron's
    shard shapes (habitat.analysis.step_shards), takes more than the split time / t and less
    than all of it; the cluster forecast of tensor parallelism uses it."""
    from dataclasses import replace
    from pathlib import Path

    from habitat import Forecast
    from habitat.analysis.cluster_compare import _detailed_step, forecast_on_cluster
    from habitat.analysis.step_work import step_work_from_step

    trace = (Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "h100-sxm5-80gb-2026-11-23"
             / "traces" / "gpt2_small_bf16.json.gz")
    forecast = Forecast.load(trace, ["H100"])
    step = _detailed_step(forecast, "H100-SXM5-80GB")
    work = step_work_from_step(step, "H100-SXM5-80GB", (2, 4), forecast.origin)
    assert set(work.tp_sharded_us) == {2, 4}
    for t, (forward, backward) in work.tp_sharded_us.items():
        assert work.tp_split_forward_us / t < forward < work.tp_split_forward_us
        assert work.tp_split_backward_us / t < backward < work.tp_split_backward_us
    assert step_work_from_step(step, "H100-SXM5-80GB").tp_sharded_us == {}  # no degrees asked
    c = Cluster("H100", 4)
    tp = forecast_on_cluster(forecast, c, "tp")
    ideal = parallel_step(replace(work, tp_sharded_us={}), c, "tp")
    assert tp.compute_us > ideal.compute_us
