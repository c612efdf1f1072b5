"""predict_on in steady state: detailed steps first and on new fingerprints, reused forecasts
for repeated steps, no global hooks outside detailed steps, a worker that never blocks."""
from __future__ import annotations

import json
import threading
import time
import warnings
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch import nn
from torch.nn.modules import module as nn_module
from torch.optim import optimizer as optim_module

import habitat
from habitat import _C
from habitat.capture import modules as habitat_modules
from habitat.capture import phase as habitat_phase
from habitat.capture.predict import HabitatWarning, record_step
from habitat.data.forecast import read_step_history

TARGET = "A100"


@pytest.fixture(autouse=True)
def _no_hooks_left_by_other_tests() -> None:
    # Predictors other tests left open with compiled code keep Habitat's hooks installed.
    habitat_modules.uninstall()
    habitat_phase.uninstall()


def _habitat_hooks() -> list[object]:
    """Habitat's hooks among torch's global module and optimizer hook tables."""
    tables = [nn_module._global_forward_pre_hooks, nn_module._global_forward_hooks,
              optim_module._global_optimizer_pre_hooks, optim_module._global_optimizer_post_hooks]
    ours = {habitat_modules._pre_hook, habitat_modules._post_hook, habitat_phase._pre_hook,
            habitat_phase._post_hook}
    return [h for table in tables for h in table.values() if h in ours]


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _setup(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = _Model()
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> torch.Tensor:
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def _batches(n: int, batch: int = 4) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(batch, 8, generator=g) for _ in range(n)]


# ----- fingerprints ----------------------------------------------------------------------
def test_fingerprint_is_the_same_in_steady_and_detailed_steps_and_follows_shapes() -> None:
    model, _ = _setup()
    x4, x8 = torch.randn(4, 8), torch.randn(8, 8)

    def fp(x: torch.Tensor, detailed: bool) -> tuple[int, int]:
        with record_step(detailed=detailed) as rec:
            model(x).sum()
        return rec.fingerprint, rec.fingerprint_ops

    detailed, steady = fp(x4, True), fp(x4, False)
    assert detailed == steady and detailed[0] != 0 and detailed[1] > 0
    assert fp(x4, False) == steady  # repeated step, same fingerprint
    assert fp(x8, False)[0] != steady[0]  # a new batch size
    with record_step(detailed=False) as rec:
        torch.add(x4, 1)
    a = rec.fingerprint
    with record_step(detailed=False) as rec:
        torch.add(x4.double(), 1)
    assert rec.fingerprint != a  # a new dtype
    with record_step(detailed=False) as rec:
        torch.mul(x4, 1)
    assert rec.fingerprint != a  # another op


def test_a_steady_step_records_no_ops_and_installs_no_hooks() -> None:
    model, _ = _setup()
    with record_step(detailed=False) as rec:
        assert not _habitat_hooks()
        model(torch.randn(2, 8)).sum()
    assert rec.captured.num_ops == 0 and rec.captured.wall_ms > 0
    assert rec.fingerprint_ops > 0


def test_a_steady_window_inside_a_detailed_one_leaves_the_outer_step_complete() -> None:
    model, opt = _setup()
    x = torch.randn(4, 8)
    inner = habitat.predict_on(TARGET, fingerprint_every=1)  # its steady steps: fingerprinted
    for _ in range(4):
        with inner:
            _step(model, opt, x)
    with record_step() as alone:
        _step(model, opt, x)
    with record_step() as outer:
        with inner:
            _step(model, opt, x)
    names = [op["name"] for op in alone.step["ops"]]
    assert [op["name"] for op in outer.step["ops"]] == names
    assert outer.fingerprint == alone.fingerprint
    assert inner.step_counts["reused"] >= 3
    inner.close()


# ----- reuse -----------------------------------------------------------------------------
def test_repeated_steps_reuse_the_forecast_with_their_own_time() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, detail_steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HabitatWarning)
        for x in _batches(6):
            with predictor:
                _step(model, opt, x)
    forecast = predictor.forecast
    assert predictor.step_counts == {"detailed": 2, "reused": 4, "skipped": 0, "coalesced": 0}
    assert forecast.step_counts is predictor.step_counts
    assert [s.index for s in forecast.steps] == list(range(6))
    target = forecast.targets[0]
    # Adam's first step creates its state (other ops): step 1 is the repeating step.
    for step in forecast.steps[2:]:
        assert step.total_ms[target] == forecast.steps[1].total_ms[target]
        assert step.measured_ms > 0
    assert len({s.measured_ms for s in forecast.steps}) > 1  # each step its own time
    latest = forecast.latest
    assert latest.trace["index"] == 5 and latest.ops
    assert {op.phase for op in latest.ops} >= {"forward", "backward", "optimizer"}
    assert "Steps: 2 recorded in detail, 4 reused the forecast of an identical step" in str(forecast)
    predictor.close()


def test_reused_steps_share_one_decode_and_save_the_same_document() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, detail_steps=2, fingerprint_every=1)
    for x in _batches(6):
        with predictor:
            _step(model, opt, x)
    forecast = predictor.forecast
    predictor.close()
    reused = [s.trace for s in forecast.steps[2:]]
    assert [t["index"] for t in reused] == [2, 3, 4, 5]
    assert all(t["ops"] is reused[0]["ops"] for t in reused)  # decoded once, shared
    # forecast.json encodes the shared ops once per fingerprint: the same document as a
    # plain encoding of every step.
    assert json.loads(forecast.to_json()) == json.loads(forecast.to_json(indent=1))
    assert json.loads(forecast.to_json())["steps"][3]["wall_ms"] == forecast.steps[3].measured_ms


def test_slow_sinks_of_reused_steps_are_coalesced_within_their_share(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    from habitat.capture import worker as worker_module

    monkeypatch.setattr(worker_module, "SINK_ALLOWANCE_S", 0.02)
    seen: list[int] = []

    def slow_sink(forecast: object, step: object) -> None:  # 5 ms of CPU on the forecast thread
        seen.append(step.index)  # type: ignore[attr-defined]
        end = time.thread_time() + 0.005
        while time.thread_time() < end:
            pass

    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, detail_steps=2, on_step=slow_sink, log_dir=tmp_path)
    for x in _batches(40):
        with predictor:
            _step(model, opt, x)
    predictor.close()
    counts = predictor.step_counts
    assert counts["coalesced"] > 0 and counts["skipped"] == 0
    # Coalesced steps are forecast and counted, only not sent to the sinks; detailed ones are.
    assert len(predictor.forecast.steps) == 40 == counts["detailed"] + counts["reused"]
    assert len(seen) == 40 - counts["coalesced"] and seen[:2] == [0, 1]
    assert (f"{counts['coalesced']} of the reused only in the step history and TensorBoard's "
            "scalars") in str(predictor.forecast)
    # The step history still has every step (crash-safe record of the run).
    assert [r["index"] for r in read_step_history(tmp_path / "steps.jsonl")] == list(range(40))
    # So does TensorBoard's step scalars (coalesced steps included), with the measured times.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    events = EventAccumulator(str(run_dir))
    events.Reload()
    from habitat.present.tensorboard import MEASURED

    measured = events.Scalars(MEASURED)
    assert [e.step for e in measured] == list(range(40))
    assert [e.value for e in measured] == pytest.approx(
        [s.measured_ms for s in predictor.forecast.steps], rel=1e-6)


def test_training_is_bitwise_identical_with_steady_steps() -> None:
    batches = _batches(6)
    model_a, opt_a = _setup()
    plain = [_step(model_a, opt_a, x) for x in batches]
    model_b, opt_b = _setup()
    predictor = habitat.predict_on(TARGET)
    ours = []
    for x in batches:
        with predictor:
            ours.append(_step(model_b, opt_b, x))
    predictor.close()
    assert predictor.step_counts["reused"] > 0
    assert all(torch.equal(a, b) for a, b in zip(plain, ours))
    assert all(torch.equal(a, b) for a, b in zip(model_a.parameters(), model_b.parameters()))


def test_forecast_follows_a_new_batch_size() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, fingerprint_every=1)  # every step fingerprinted
    for x in _batches(4, batch=4):
        with predictor:
            _step(model, opt, x)
    small = predictor.forecast.latest.total_ms
    for x in _batches(4, batch=256):
        with predictor:
            _step(model, opt, x)
    forecast = predictor.forecast
    counts = predictor.step_counts
    # The first step at the new size is measured, not forecast (its fingerprint is new); the
    # next one is recorded in detail, the rest reuse it.
    assert counts == {"detailed": 3, "reused": 4, "skipped": 1, "coalesced": 0}
    big = forecast.latest.total_ms
    assert big != small
    assert forecast.latest.trace["ops"][0]  # detail of the new shape
    shapes = {tuple(s) for op in forecast.latest.ops for s in op.input_shapes}
    assert any(256 in s for s in shapes)
    # The same as a predictor that records every step in detail.
    fresh_model, fresh_opt = _setup()
    check = habitat.predict_on(TARGET, detail_every=1)
    for x in _batches(4, batch=4) + _batches(4, batch=256):
        with check:
            _step(fresh_model, fresh_opt, x)
        check.wait()  # never behind: every step detailed
    assert check.step_counts["reused"] == 0
    assert check.forecast.latest.total_ms == pytest.approx(big, rel=1e-9)
    predictor.close()
    check.close()


def test_train_and_eval_steps_each_reuse_their_own_forecast() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, fingerprint_every=1)
    x = torch.randn(4, 8)
    train, evals = [], []
    for _ in range(5):
        model.train()
        with predictor:
            _step(model, opt, x)
        train.append(predictor.forecast.latest.total_ms)
        model.eval()
        with predictor, torch.no_grad():
            model(x)
        evals.append(predictor.forecast.latest.total_ms)
    counts = predictor.step_counts
    assert counts["reused"] >= 5 and counts["detailed"] <= 4
    assert sum(counts.values()) == 10
    assert train[-1] != evals[-1]
    assert train[-1] == train[-2] and evals[-1] == evals[-2]
    predictor.close()


def test_detail_every_resamples_steps_in_detail() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, detail_steps=1, detail_every=3, fingerprint_every=1)
    for x in _batches(7):
        with predictor:
            _step(model, opt, x)
        predictor.wait()  # never behind: every step's kind is as asked
    # Detailed: step 0 (detail_steps), step 1 (its fingerprint is new after Adam's first
    # step: measured, then step 2 detailed), and steps 3 and 6 (detail_every).
    assert predictor.step_counts["detailed"] == 4
    assert sum(predictor.step_counts.values()) == 7
    predictor.close()


def test_invalid_detail_arguments_raise() -> None:
    with pytest.raises(ValueError):
        habitat.predict_on(TARGET, detail_steps=0)
    with pytest.raises(ValueError):
        habitat.predict_on(TARGET, detail_every=-1)
    with pytest.raises(ValueError):
        habitat.predict_on(TARGET, fingerprint_every=0)


def _forget_compiled_code() -> None:
    """Code compiled by earlier tests would keep the key on the thread (dynamo guards on it)."""
    import sys

    if "torch._dynamo" in sys.modules:
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()


def test_timed_steps_run_without_the_capture_key_and_reuse_the_forecast() -> None:
    _forget_compiled_code()
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, fingerprint_every=3)
    keyed = []
    for x in _batches(9):
        with predictor:
            keyed.append(_C._capture_key_included())
            _step(model, opt, x)
    counts = predictor.step_counts
    assert counts == {"detailed": 2, "reused": 7, "skipped": 0, "coalesced": 0}
    # Steps 0-1 detailed, then at least every 3rd step fingerprinted (4, 7; more when a step's
    # time jumps), the rest only timed: their ops do not go through Habitat at all.
    assert keyed[:2] == [True, True] and False in keyed
    assert "FFF" not in "".join("T" if k else "F" for k in keyed)
    steps = predictor.forecast.steps
    assert [s.index for s in steps] == list(range(9))
    assert len({s.total_ms[steps[0].targets[0]] for s in steps[1:]}) == 1
    predictor.close()


def test_a_new_shape_is_caught_within_fingerprint_every_steps() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, fingerprint_every=3)
    for x in _batches(5, batch=4):
        with predictor:
            _step(model, opt, x)
    small = predictor.forecast.latest.total_ms
    for x in _batches(6, batch=256):
        with predictor:
            _step(model, opt, x)
    latest = predictor.forecast.latest
    assert latest.total_ms != small
    assert any(256 in s for op in latest.ops for s in op.input_shapes)
    predictor.close()


def _kinds(predictor: habitat.predict_on, run: Callable[[], None], steps: int) -> str:
    """The kind of each of the next `steps` steps: D detailed, F fingerprinted, T timed."""
    out = []
    for _ in range(steps):
        before = dict(predictor._schedule.kind_counts)
        with predictor:
            run()
        kind = next(k for k, v in predictor._schedule.kind_counts.items() if v != before[k])
        out.append(kind[0].upper())
    return "".join(out)


def test_the_fingerprint_gap_doubles_up_to_fingerprint_every() -> None:
    model, opt = _setup()
    x = torch.randn(4, 8)
    predictor = habitat.predict_on(TARGET, fingerprint_every=8)
    kinds = _kinds(predictor, lambda: model(x).sum(), 40)  # no optimizer: every step alike
    # Two detailed steps, then gaps of 2, 4, 8, 8, ... between fingerprinted steps while the
    # fingerprint repeats (a timed step off its usual time may add one, never remove one).
    assert kinds.startswith("DD"), kinds
    hashed = [i for i, kind in enumerate(kinds) if kind != "T"]
    gaps = [b - a for a, b in zip(hashed, hashed[1:])]
    assert gaps[1] <= 2 and gaps[2] <= 4, kinds  # short gaps first (the back-off)
    assert max(gaps) == 8 and gaps.count(8) >= 2, kinds
    assert kinds.count("F") <= 12, kinds
    predictor.close()


def test_defaults_follow_a_new_batch_size_within_fingerprint_every_steps() -> None:
    from habitat.capture.predict import DEFAULT_FINGERPRINT_EVERY

    model, opt = _setup()
    predictor = habitat.predict_on(TARGET)
    for x in _batches(40, batch=4):  # long enough for the longest gap
        with predictor:
            _step(model, opt, x)
    small = predictor.forecast.latest.total_ms
    big_x = _batches(1, batch=256)[0]
    for _ in range(DEFAULT_FINGERPRINT_EVERY + 2):  # fingerprinted, then recorded in detail
        with predictor:
            _step(model, opt, big_x)
    latest = predictor.forecast.latest
    assert latest.total_ms != small
    assert any(256 in s for op in latest.ops for s in op.input_shapes)
    predictor.close()


def test_defaults_follow_alternating_train_and_eval_steps() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET)  # the default fingerprint_every
    x = torch.randn(4, 8)
    train, evals = [], []
    for _ in range(12):
        model.train()
        with predictor:
            _step(model, opt, x)
        train.append(predictor.forecast.latest.time_ms())
        model.eval()
        with predictor, torch.no_grad():
            model(x)
        evals.append(predictor.forecast.latest.time_ms())
    # Fingerprints that differ from one step to the next keep every step fingerprinted: each
    # kind of step keeps its own forecast.
    assert train[-1] != evals[-1]
    assert len(set(train[3:])) == 1 and len(set(evals[3:])) == 1
    assert predictor._schedule.kind_counts["timed"] == 0
    predictor.close()


def test_a_jump_in_step_time_is_checked_at_once_and_only_once() -> None:
    import time

    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, fingerprint_every=1000)
    x4 = torch.randn(4, 8)
    for _ in range(12):  # reaches timed steps
        with predictor:
            _step(model, opt, x4)
    # A bigger batch whose step is much slower: caught after 3 timed steps, not 1000.
    big = torch.randn(20_000, 8)
    kinds = _kinds(predictor, lambda: _step(model, opt, big), 8)
    # TTTFD: three slow timed steps, then a fingerprinted one (new: measured, not forecast),
    # then one in detail. A shared machine's hiccups move the check a step or two either
    # way (a slow step just before the change counts towards the three; a spike inflates
    # the usual time), never to fingerprint_every.
    assert "FD" in kinds[:7], kinds
    latest = predictor.forecast.latest
    assert any(20_000 in s for op in latest.ops for s in op.input_shapes)
    # A lasting slowdown without new shapes (a busier machine) costs one fingerprinted step,
    # not one per step until the usual time catches up.
    fast = _kinds(predictor, lambda: model(x4).sum(), 12)
    slow = _kinds(predictor, lambda: (model(x4).sum(), time.sleep(0.03)), 24)
    assert slow.count("F") <= fast.count("F") + 2, (fast, slow)
    predictor.close()


# ----- the worker never blocks training --------------------------------------------------
def test_a_slow_worker_never_makes_training_wait() -> None:
    model, opt = _setup()
    release = threading.Event()
    blocked = []

    def slow_sink(forecast: object, step: object) -> None:
        blocked.append(step)
        release.wait(60)  # training must go on meanwhile

    predictor = habitat.predict_on(TARGET, on_step=slow_sink, detail_every=1)
    for x in _batches(12):
        with predictor:
            _step(model, opt, x)
    # Had a step waited for the worker, the loop would have stalled on the sink above.
    assert not release.is_set()
    release.set()
    predictor.wait()
    counts = predictor.step_counts
    assert sum(counts.values()) == 12
    # Behind on detailed steps, later ones were recorded in steady state instead.
    assert counts["detailed"] < 12
    assert len(predictor.forecast.steps) == counts["detailed"] + counts["reused"]
    predictor.close()


def test_steps_beyond_the_workers_queue_are_skipped_and_counted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from habitat.capture import worker as worker_module

    monkeypatch.setattr(worker_module, "MAX_QUEUED_STEPS", 4)
    release = threading.Event()

    def stuck_sink(forecast: object, step: object) -> None:
        release.wait(60)  # the worker is stuck on the first step it forecasts

    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, on_step=stuck_sink)
    for x in _batches(30):
        with predictor:
            _step(model, opt, x)
    assert not release.is_set()  # the loop never waited for the worker
    release.set()
    counts = predictor.step_counts
    assert sum(counts.values()) == 30
    # Two detailed steps and a queue of 4 reused ones wait for the worker; the rest were
    # measured, counted as skipped, never queued without bound.
    assert counts["skipped"] >= 30 - 2 - 4 - 1 and counts["reused"] <= 5
    assert len(predictor.forecast.steps) == counts["detailed"] + counts["reused"]
    predictor.close()


# ----- no cost outside predict_on --------------------------------------------------------
def test_no_global_hooks_remain_after_close() -> None:
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET)
    for i, x in enumerate(_batches(5)):
        with predictor:
            if i < 2:
                assert _habitat_hooks()  # detailed steps record module paths
            else:
                assert not _habitat_hooks()  # steady steps run without hooks
            _step(model, opt, x)
        assert not _habitat_hooks()  # none between steps (eager model)
    predictor.close()
    assert not _habitat_hooks()
    assert predictor.forecast.latest.ops[0].module_path is not None


def test_the_capture_key_is_off_the_thread_between_steps_and_after_close() -> None:
    _forget_compiled_code()
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, fingerprint_every=1)
    for x in _batches(3):
        with predictor:
            assert _C._capture_key_included()  # every step is captured or fingerprinted
            _step(model, opt, x)
        assert not _C._capture_key_included()  # code between steps skips Habitat entirely
    predictor.close()
    assert not _C._capture_key_included()  # ops after training skip Habitat entirely
    x = _batches(1)[0]
    with predictor:  # usable again
        _step(model, opt, x)
    assert len(predictor.forecast.steps) == 4


def test_hooks_of_a_compiled_model_stay_idle_until_close_without_recompiles() -> None:
    import torch._dynamo

    torch._dynamo.reset()
    model, opt = _setup()
    compiled = torch.compile(model, backend="eager")
    predictor = habitat.predict_on(TARGET, fingerprint_every=2)
    for i, x in enumerate(_batches(5)):
        with torch._dynamo.config.patch(error_on_recompile=i > 0):
            with predictor:
                assert _C._capture_key_included()  # dynamo guards on it: never taken off
                loss = compiled(x).pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
    assert _habitat_hooks()  # compiled code guards on them: kept, idle, while predicting
    predictor.close()
    assert not _habitat_hooks()
    assert predictor.step_counts["reused"] > 0


def test_code_compiled_between_steady_steps_never_recompiles() -> None:
    import torch._dynamo

    _forget_compiled_code()
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET, fingerprint_every=2)
    for x in _batches(8):  # eager training steps: detailed, then fingerprinted and timed
        with predictor:
            _step(model, opt, x)
    assert not _C._capture_key_included()  # off between the steps of an eager model
    evaluate = torch.compile(lambda x: model(x).sum(), backend="eager")
    x = torch.randn(4, 8)
    with torch.no_grad():
        evaluate(x)  # validation, compiled between two steps (and run once, unguarded)
    # The key went on before dynamo built its guards (dynamo then restored the thread's keys);
    # from the next step on it stays on, so no step kind and no call between steps recompiles.
    with torch._dynamo.config.patch(error_on_recompile=True):
        for batch in _batches(8):
            with predictor:
                _step(model, opt, batch)
            assert _C._capture_key_included()
            with torch.no_grad():
                evaluate(x)
    predictor.close()
    assert predictor.step_counts["reused"] > 0


def test_nvtx_ranges_only_on_request_and_only_until_close() -> None:
    assert not _C.nvtx_requested()  # the default: no per-op NVTX cost
    predictor = habitat.predict_on(TARGET, nvtx=True)
    other = habitat.predict_on(TARGET, nvtx=True)
    try:
        with predictor:
            assert _C.nvtx_requested()
            torch.add(torch.ones(2), 1)
        with other:
            torch.add(torch.ones(2), 1)
        predictor.close()
        assert _C.nvtx_requested()  # the other predictor still wants them
        other.close()
        assert not _C.nvtx_requested()  # nobody asks: the per-op cost is gone
        with predictor:  # a predictor used again after close() asks again
            assert _C.nvtx_requested()
    finally:
        predictor.close()
        other.close()
    assert not _C.nvtx_requested()


def test_steady_steps_do_not_trace_kernels() -> None:
    calls = []

    class Tracing:
        tracing = False

        def begin_step(self) -> bool:
            calls.append("begin")
            return False

        def close(self) -> None:
            pass

    model, opt = _setup()
    predictor = habitat.predict_on(TARGET)
    predictor._tracing = Tracing()  # type: ignore[assignment]
    for x in _batches(5):
        with predictor:
            _step(model, opt, x)
    predictor.close()
    # Only the detailed steps ask for kernel tracing (and its device synchronisation).
    assert len(calls) == predictor.step_counts["detailed"] == 2


# ----- detailed steps are forecast when no other one records ----------------------------------
def _spy_forecasts(monkeypatch: pytest.MonkeyPatch) -> dict[int, list[float]]:
    """When each detailed step's engine forecast began (perf_counter), by the id of the origin
    dict of the forecast it was for: a worker another test left running (its predictor not
    closed yet) calls the same function, and its calls must not count here."""
    from habitat.capture import worker as worker_module

    began: dict[int, list[float]] = {}
    real = worker_module.forecast_captured

    def spy(capsule: object, origin: object, *args: object, **kwargs: object) -> object:
        began.setdefault(id(origin), []).append(time.perf_counter())
        return real(capsule, origin, *args, **kwargs)

    monkeypatch.setattr(worker_module, "forecast_captured", spy)
    return began


def test_a_detailed_step_is_not_forecast_while_the_next_one_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine forecasting step 0 beside step 1's capture would slow step 1's traced host
    (worker.DEFER_LIMIT_S): step 0 waits until step 1, detailed too, has ended."""
    began = _spy_forecasts(monkeypatch)
    model, opt = _setup()
    predictor = habitat.predict_on(TARGET)  # detail_steps=2: steps 0 and 1 are detailed
    windows = []
    for x in _batches(3):
        start = time.perf_counter()
        with predictor:
            _step(model, opt, x)
            time.sleep(0.05)  # room for a forecast that should not start here
        windows.append((start, time.perf_counter()))
    predictor.wait()
    assert predictor.step_counts["detailed"] == 2
    mine = began[id(predictor.forecast.origin)]
    assert len(mine) == 2
    assert mine[0] >= windows[1][1]  # after step 1 ended, not during it
    predictor.close()


def test_reading_the_forecast_inside_a_detailed_step_does_not_wait_for_it_to_end() -> None:
    from habitat.capture.worker import DEFER_LIMIT_S

    model, opt = _setup()
    predictor = habitat.predict_on(TARGET)
    x0, x1 = _batches(2)
    with predictor:
        _step(model, opt, x0)
    with predictor as forecast:
        _step(model, opt, x1)
        t0 = time.perf_counter()
        latest = forecast.latest  # step 0's: the worker goes ahead for a reader
        assert time.perf_counter() - t0 < DEFER_LIMIT_S  # not held back to the limit
    assert latest.index == 0
    assert forecast.latest.index == 1
    predictor.close()


def test_a_reused_step_keeps_the_untraced_wall_it_was_calibrated_to() -> None:
    """Saved, a calibrated steady-state step carries uninstrumented_wall_ms, so read back it
    forecasts as it did live (the calibration itself runs for GPU origins only)."""
    import gzip

    from habitat.capture.reuse import _DecodedStep, _ReusedStep
    from habitat.data import engine
    from habitat.data.forecast import Forecast

    path = Path(__file__).resolve().parents[3] / "benchmarks/results/h100-sxm5-80gb-2026-11-26/traces/dcgan_bf16.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    detailed = {k: v for k, v in doc["steps"][-1].items() if k not in ("index", "wall_ms")}
    decoded = _DecodedStep({"index": 1, "wall_ms": 25.0, **detailed})
    step = _ReusedStep(decoded, 7, 12.9, calibrated_to_ms=12.25)
    assert step["uninstrumented_wall_ms"] == 12.25
    assert json.loads(step.json_text()) == dict(step)
    assert "uninstrumented_wall_ms" not in _ReusedStep(decoded, 8, 12.9)
    live = Forecast.from_trace(engine.trace_document(doc["origin"], [dict(step)]), ["H100"]).latest
    t = live.timeline["H100-SXM5-80GB"]
    assert t["host_scale"] < 1.0 and t["step_ms"] == pytest.approx(12.25, rel=0.02)
