"""predict_on(world_size=..., interconnect=...) and `habitat compare --cluster` (CPU only)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
from subprocess_env import subprocess_env  # noqa: E402

import habitat  # noqa: E402


def _transformer_like() -> torch.nn.Module:
    torch.manual_seed(0)
    blocks = []
    for _ in range(2):  # two "layers" of attention-projection and MLP pairs
        blocks += [torch.nn.Linear(64, 192), torch.nn.Linear(192, 64),
                   torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)]
    return torch.nn.Sequential(*blocks)


@pytest.fixture(scope="module")
def clustered_forecast():
    model = _transformer_like()
    opt = torch.optim.Adam(model.parameters())
    with habitat.predict_on(["H100", "A100"], world_size=8, interconnect="nvlink") as forecast:
        model(torch.randn(4, 32, 64)).square().mean().backward()
        opt.step()
    return forecast


def test_step_on_clusters(clustered_forecast):
    fcs = clustered_forecast.on_clusters()
    assert [f.cluster.label() for f in fcs] == ["8x H100-SXM5-80GB (nvlink4-nvswitch)",
                                                "8x A100-SXM4-80GB (nvlink3-nvswitch)"]
    for f in fcs:
        # the step as seen on one GPU (the host model's launch cadence): this tiny step is
        # host-bound, and DDP adds exposed communication to it, never removes work
        single = clustered_forecast.latest.step_ms(f.cluster.gpu)
        assert clustered_forecast.latest.host_bound(f.cluster.gpu)
        assert single > 2 * clustered_forecast.time_ms(f.cluster.gpu)
        assert f.time_ms >= single * 0.999
        assert any("host-bound" in n for n in f.notes)
        assert f.collectives and f.collectives[0]["kind"] == "all_reduce"
    assert "On clusters:" in str(clustered_forecast)
    tp = clustered_forecast.on_clusters("tp")
    assert all(f.parallelism.tensor == 8 for f in tp)
    # 4 row-parallel products: one all-reduce each, forward and backward
    assert sum(r["count"] for r in tp[0].collectives) == 2 * 4


def test_bad_cluster_arguments_fail_before_the_step():
    with pytest.raises(ValueError, match="no NVLink"):
        habitat.predict_on(["L4"], world_size=4, interconnect="nvlink")
    with pytest.raises(ValueError, match="world_size"):
        habitat.predict_on(["H100"], interconnect="nvlink")
    with pytest.raises(ValueError, match="uses 3 GPUs"):
        habitat.predict_on(["H100"], world_size=8, parallel="dp3")
    with pytest.raises(ValueError, match="not both"):
        habitat.predict_on(["H100"], world_size=8, cluster=habitat.Cluster("H100", 8))


def test_cli_ranks_clusters(clustered_forecast, tmp_path):
    path = tmp_path / "step.json"
    clustered_forecast.save(path)
    out = subprocess.run([sys.executable, "-m", "habitat", "compare", str(path), "--cluster", "8xH100",
                          "--cluster", "16xA100:nvlink:infiniband", "--json"],
                         capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["clusters"]
    # both host-bound at the single-GPU step's cadence: equal steps, the cheaper run first
    assert [r["gpus"] for r in rows] == [8, 16]
    assert all(r["host_bound"] for r in rows) and rows[0]["time_ms"] == pytest.approx(rows[1]["time_ms"])
    assert rows[0]["run_cost_usd"] < rows[1]["run_cost_usd"]
    assert rows[1]["ms_per_batch"] == pytest.approx(rows[1]["time_ms"] / 16, rel=1e-3)
    text = subprocess.run([sys.executable, "-m", "habitat", "compare", str(path), "--cluster", "8xH100"],
                          capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert "ms/batch" in text.stdout and "Host-bound (#1)" in text.stdout
    head = next(line for line in text.stdout.splitlines() if "ms/step" in line)
    assert head.split()[5:8] == ["comm", "host", "bubble"]
    shares = json.loads(out.stdout)["clusters"][0]["shares"]
    assert shares["host_bound"] > 0.3 and shares["bubble"] == 0
    bad = subprocess.run([sys.executable, "-m", "habitat", "compare", str(path), "--cluster", "eightH100"],
                         capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert bad.returncode != 0 and "GPUSxGPU" in bad.stderr


def test_a_one_gpu_cluster_is_the_step_as_seen(clustered_forecast):
    from habitat.analysis.cluster_compare import forecast_on_cluster

    for gpu in ("H100", "A100"):
        one = forecast_on_cluster(clustered_forecast, habitat.Cluster(gpu, 1))
        assert one.time_ms == pytest.approx(clustered_forecast.latest.step_ms(gpu), rel=1e-6)
        assert one.comm_us == 0
