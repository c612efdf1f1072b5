"""A DDP step forecast from a step captured on one rank, against the same step captured under
DDP on gloo ranks (CPU): the reducer's work and the buckets' launches that the one-rank step
lacks are added (habitat.analysis.distributed_host), so both forecasts agree."""
from __future__ import annotations

import collections
import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

import c10d_workers  # noqa: E402
import ddp_host_workers as W  # noqa: E402

from habitat.analysis.cluster import Cluster  # noqa: E402
from habitat.analysis.cluster_compare import forecast_on_cluster  # noqa: E402
from habitat.analysis.distributed_host import gradient_tensors, reducer_ops  # noqa: E402
from habitat.analysis.parallel import ddp_buckets, parallel_step  # noqa: E402
from habitat.analysis.step_work import step_work_from_step  # noqa: E402
from habitat.data.forecast import Forecast  # noqa: E402


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp_host")
    ranks = c10d_workers.start(W.worker, tmp, timeout_s=240, world=W.WORLD)
    assert all(r.get("ok") for r in ranks)
    return {name: json.loads((tmp / "out" / f"{name}.json").read_text()) for name in ("one_rank", "ddp")}


def _top_level_counts(step: dict) -> collections.Counter:
    return collections.Counter((o["name"], o.get("overload", ""), o.get("phase", "other"), o.get("depth", 0))
                               for o in step["ops"])


def test_the_reducer_ops_written_for_one_rank_are_what_ddp_ran(traces):
    one, ddp = traces["one_rank"]["steps"][-1], traces["ddp"]["steps"][-1]
    grads = gradient_tensors(one)
    assert len(grads) == 2 * W.LAYERS
    assert sum(g.nbytes for g in grads) == W.LAYERS * (W.FEATURES + 1) * W.FEATURES * 4
    added = _top_level_counts(ddp) - _top_level_counts(one)
    buckets = ddp_buckets([(g.nbytes, 0.0) for g in grads])
    expected = _top_level_counts({"ops": reducer_ops(grads, W.WORLD)})
    expected[("c10d::allreduce_", "", "backward", 0)] = len(buckets)
    # the steady-state DDP step holds exactly the reducer's ops and one all-reduce per bucket
    assert added == expected
    assert _top_level_counts(one) - _top_level_counts(ddp) == collections.Counter()


def test_a_ddp_step_forecast_from_one_rank_matches_the_ddp_capture(traces):
    one = Forecast.from_trace(traces["one_rank"], ["H100", "A100"])
    ddp = Forecast.from_trace(traces["ddp"], ["H100", "A100"])
    for gpu in ("H100", "A100"):
        cluster = Cluster(gpu, W.WORLD)
        from_one = forecast_on_cluster(one, cluster, "ddp")
        captured = forecast_on_cluster(ddp, cluster, "ddp")
        assert from_one.time_ms == pytest.approx(captured.time_ms, rel=0.10), gpu
        assert from_one.host_bound and captured.host_bound  # a small step: the host's cadence is the step
        assert [r["count"] for r in from_one.collectives] == [r["count"] for r in captured.collectives]
        # without what the framework adds, the one-rank forecast is short by the reducer's host time
        work = step_work_from_step(one.latest, cluster.gpu)
        bare = parallel_step(replace(work, framework=None), cluster, "ddp")
        assert bare.time_ms < 0.85 * captured.time_ms
        assert work.framework.tensors == 2 * W.LAYERS
