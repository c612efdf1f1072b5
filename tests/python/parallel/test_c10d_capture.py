"""The capture sees the collectives a distributed step runs (c10d ops through the dispatcher),
and forecasting a DDP step changes none of its results: 4 gloo processes on CPU."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

import c10d_workers as W  # noqa: E402


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return W.start(W.worker, tmp_path_factory.mktemp("c10d"))


@pytest.fixture(scope="module")
def ddp_ranks(ranks):
    return [r["ddp"] for r in ranks]


def test_forecasting_a_ddp_step_changes_nothing(ddp_ranks):
    for rank, r in enumerate(ddp_ranks):
        assert r["bitwise_equal"], f"rank {rank}: parameters differ after a forecast step"
        assert r["sent"] == r["sent_without_habitat"]


def test_captured_collectives_match_what_ddp_sent(ddp_ranks):
    for rank, r in enumerate(ddp_ranks):
        reduces = [c for c in r["captured"] if c["kind"] == "all_reduce"]
        assert len(r["sent"]) >= 2, "the test wants several buckets"
        assert len(reduces) == len(r["sent"])
        assert sorted(c["bytes"] for c in reduces) == sorted(r["sent"])
        for c in reduces:
            assert c["op"] == "c10d::allreduce_"
            assert c["group_size"] == W.WORLD and c["rank"] == rank
            assert c["dtypes"] == ["float32"]
            assert c["phase"] == "backward"
        # Buckets are sent while the backward pass goes on: the first has compute after it.
        assert reduces[0]["overlap_ops"] > 0


def test_fsdp_collectives_are_captured_where_gloo_runs_them(ranks):
    fsdp = [r["fsdp"] for r in ranks]
    if "unsupported" in fsdp[0]:
        pytest.skip("FSDP on gloo (CPU) in this torch: " + fsdp[0]["unsupported"])
    for rank, r in enumerate(fsdp):
        kinds = {c["kind"] for c in r["captured"]}
        assert "all_gather" in kinds, kinds
        assert "reduce_scatter" in kinds, kinds
        for c in r["captured"]:
            assert c["group_size"] == W.WORLD and c["rank"] == rank
            assert c["bytes"] > 0
