"""Memory forecast: categories, lifetimes, recycled storage ids, measured peaks and fit."""
from __future__ import annotations

import copy
import json

import pytest
import torch

from habitat.analysis.memory import CUBLAS_WORKSPACE_DEFAULT, CUBLAS_WORKSPACE_HOPPER, GiB, estimate_step_memory


def t(sid: int, shape: list[int], strides: list[int] | None = None, device: str = "cpu",
      dtype: str = "float32") -> dict:
    meta = {"shape": shape, "dtype": dtype, "device": device, "storage": sid}
    if strides is not None:
        meta["strides"] = strides
    return meta


def op(i: int, name: str, phase: str, args: list[tuple[str, object]], outputs: list[dict]) -> dict:
    encoded = []
    for arg_name, value in args:
        encoded.append({"name": arg_name, "tensors" if isinstance(value, list) else "tensor": value})
    return {"id": i, "name": name, "phase": phase, "args": encoded, "outputs": outputs}


def sgd_step(device: str = "cpu") -> dict:
    """Linear(4 -> 3) + ReLU + sum on a batch of 2, then plain SGD (float32 throughout).

    W = storage 1 (48 B), b = 2 (12 B), x = 3 (32 B). Hand-computed: activations peak at
    52 B (op 6), the live total at 176 B (op 8: persistent 92 + relu out 24 + dW 48 + db 12).
    """
    d = device
    ops = [
        op(0, "aten::t", "forward", [("self", t(1, [3, 4], device=d))], [t(1, [4, 3], [1, 4], d)]),
        op(1, "aten::addmm", "forward", [("self", t(2, [3], device=d)), ("mat1", t(3, [2, 4], device=d)),
                                         ("mat2", t(1, [4, 3], [1, 4], d))], [t(4, [2, 3], device=d)]),
        op(2, "aten::relu", "forward", [("self", t(4, [2, 3], device=d))], [t(5, [2, 3], device=d)]),
        op(3, "aten::sum", "forward", [("self", t(5, [2, 3], device=d))], [t(6, [], device=d)]),
        op(4, "aten::ones_like", "backward", [("self", t(6, [], device=d))], [t(7, [], device=d)]),
        op(5, "aten::expand", "backward", [("self", t(7, [], device=d))], [t(7, [2, 3], [0, 0], d)]),
        op(6, "aten::threshold_backward", "backward",
           [("grad_output", t(7, [2, 3], [0, 0], d)), ("self", t(5, [2, 3], device=d))],
           [t(8, [2, 3], device=d)]),
        op(7, "aten::mm", "backward", [("self", t(8, [3, 2], [1, 3], d)), ("mat2", t(3, [2, 4], device=d))],
           [t(9, [3, 4], device=d)]),
        op(8, "aten::sum", "backward", [("self", t(8, [2, 3], device=d))], [t(10, [3], device=d)]),
        op(9, "aten::add_", "optimizer", [("self", t(1, [3, 4], device=d)), ("other", t(9, [3, 4], device=d))],
           [t(1, [3, 4], device=d)]),
        op(10, "aten::add_", "optimizer", [("self", t(2, [3], device=d)), ("other", t(10, [3], device=d))],
           [t(2, [3], device=d)]),
    ]
    return {"index": 0, "wall_ms": 1.0, "ops": ops}


def test_categories_and_peak_of_a_hand_computed_step():
    est = estimate_step_memory(sgd_step())
    assert est.parameters == 48 + 12
    assert est.gradients == 48 + 12
    assert est.optimizer_state == 0
    assert est.inputs == 32
    assert est.activations == 52
    assert est.live_peak == 176
    assert (est.peak_op, est.peak_phase) == ("aten::sum", "backward")
    assert est.uses_matmul and est.workspace() == CUBLAS_WORKSPACE_DEFAULT
    assert est.estimated_peak() == 176 + CUBLAS_WORKSPACE_DEFAULT
    assert est.measured_peak_bytes is None and est.source == "estimated"
    assert est.notes == []


def test_recycled_storage_address_starts_a_new_storage():
    # The relu input (storage 4) is dead after op 2; threshold_backward's output lands at the
    # same address. Read as one storage it would live from op 1 to op 8.
    step = sgd_step()
    text = json.dumps(step).replace('"storage": 8', '"storage": 4')
    recycled = estimate_step_memory(json.loads(text))
    assert recycled.to_dict() == estimate_step_memory(step).to_dict()


def test_composite_ops_are_read_through_their_sub_ops():
    step = sgd_step()
    # A composite aten::linear wrapping t + addmm: outputs what addmm outputs.
    linear = op(100, "aten::linear", "forward", [("input", t(3, [2, 4])), ("weight", t(1, [3, 4])),
                                                 ("bias", t(2, [3]))], [t(4, [2, 3])])
    linear["has_children"] = True
    step["ops"][0]["parent"] = step["ops"][1]["parent"] = 100
    step["ops"].insert(0, linear)
    assert estimate_step_memory(step).to_dict() == estimate_step_memory(sgd_step()).to_dict()


def test_gpu_trace_counts_only_device_tensors_and_uses_the_measured_peak():
    step = sgd_step("cuda:0")
    step["ops"][3]["args"].append({"name": "host_copy", "tensor": t(50, [1000, 1000], device="cpu")})
    est = estimate_step_memory(step)
    assert est.live_peak == 176  # the 4 MB host tensor is not device memory
    step["measured_peak_bytes"] = 3 * GiB
    est = estimate_step_memory(step)
    assert est.source == "measured" and est.peak_bytes() == 3 * GiB
    assert est.estimated_peak() == 176 + CUBLAS_WORKSPACE_DEFAULT


def adam_step(first: bool) -> dict:
    """A parameter p (storage 1, 4 floats) updated by foreach-style Adam.

    First step: exp_avg and exp_avg_sq are made by zeros_like inside the optimizer; later
    steps: they exist before the step. The sqrt temporary is neither.
    """
    p, g = t(1, [4]), t(3, [4])
    ops = [op(0, "aten::mul", "forward", [("self", p), ("other", t(2, [4]))], [t(4, [4])]),
           op(1, "aten::mul", "backward", [("self", t(2, [4])), ("other", t(4, [4]))], [g])]
    i = 2
    if first:
        ops += [op(2, "aten::zeros_like", "optimizer", [("self", p)], [t(5, [4])]),
                op(3, "aten::zeros_like", "optimizer", [("self", p)], [t(6, [4])])]
        i = 4
    ops += [
        op(i, "aten::_foreach_lerp_", "optimizer", [("self", [t(5, [4])]), ("tensors1", [g])], [t(5, [4])]),
        op(i + 1, "aten::_foreach_addcmul_", "optimizer",
           [("self", [t(6, [4])]), ("tensor1", [g]), ("tensor2", [g])], [t(6, [4])]),
        op(i + 2, "aten::_foreach_sqrt", "optimizer", [("self", [t(6, [4])])], [t(7, [4])]),
        op(i + 3, "aten::_foreach_add_", "optimizer", [("self", [t(7, [4])])], [t(7, [4])]),
        op(i + 4, "aten::_foreach_addcdiv_", "optimizer",
           [("self", [p]), ("tensor1", [t(5, [4])]), ("tensor2", [t(7, [4])])], [p]),
    ]
    return {"index": 0, "wall_ms": 1.0, "ops": ops}


@pytest.mark.parametrize("first", [True, False])
def test_adam_state_is_optimizer_state_and_its_temporaries_are_not(first):
    est = estimate_step_memory(adam_step(first))
    assert est.parameters == 16
    assert est.gradients == 16
    assert est.optimizer_state == 32
    assert est.inputs == 16  # the other mul operand (a buffer)
    assert est.notes == []


def test_no_optimizer_and_dropped_ops_are_noted():
    step = sgd_step()
    step["ops"] = [o for o in step["ops"] if o["phase"] != "optimizer"]
    step["dropped_ops"] = 12
    est = estimate_step_memory(step)
    assert est.parameters == 0 and est.inputs == 32 + 48 + 12
    assert any("no optimizer" in n for n in est.notes)
    assert any("12 op(s)" in n for n in est.notes)


def test_fit_on_a_target_uses_its_memory_and_workspace():
    from habitat.data.devices import get_device

    step = sgd_step("cuda:0")
    step["measured_peak_bytes"] = 30 * GiB
    est = estimate_step_memory(step)
    a100_40 = get_device("A100-SXM4-40GB")
    fits, margin = est.fits("A100-SXM4-40GB")
    assert fits and margin == int(a100_40.memory_gb * GiB) - GiB - 30 * GiB
    fits, margin = est.fits("T4", reserve_bytes=0)
    assert not fits and margin == int(get_device("T4").memory_gb * GiB) - 30 * GiB
    assert est.workspace("H100") == CUBLAS_WORKSPACE_HOPPER
    assert est.workspace("A100") == CUBLAS_WORKSPACE_DEFAULT


def _allocator_peak_of_step(run_step) -> int:
    """Peak bytes the CPU allocator held during one step, plus what existed before it.

    From the profiler's memory events ("Total Allocated" counts from the profile's start).
    """
    import os
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run_step()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]
    return max(e["args"]["Total Allocated"] for e in events)


def _captured_step(model_kind: str):
    """(estimate of a captured steady-state step, model, optimizer, batch, run_step)."""
    from torch import nn

    import habitat

    torch.manual_seed(0)
    if model_kind == "mlp_adam":
        model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 10))
        opt = torch.optim.Adam(model.parameters())
        x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
    else:
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))

    def run_step():
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    run_step()  # optimizer state exists from here on
    predictor = habitat.predict_on("A100")
    for _ in range(2):
        with predictor as forecast:
            run_step()
    return estimate_step_memory(forecast.latest.trace), model, opt, (x, y), run_step


@pytest.mark.parametrize("model_kind", ["mlp_adam", "conv_sgd"])
def test_categories_of_a_captured_step_are_exact(model_kind):
    # CPU kernels allocate results outside the dispatcher (addmm, convolution) and update
    # arguments inside composite in-place ops (add_ of a step counter): still exact.
    est, model, opt, _, _ = _captured_step(model_kind)
    params = sum(p.numel() * 4 for p in model.parameters())
    assert est.parameters == params
    assert est.gradients == params
    state = est.optimizer_state - sum(s["step"].numel() * s["step"].element_size()
                                      for s in opt.state.values() if torch.is_tensor(s.get("step")))
    assert state == params * (2 if model_kind == "mlp_adam" else 1)
    assert copy.deepcopy(est.to_dict())["peak_bytes"] == est.estimated_peak()


@pytest.mark.parametrize("model_kind", ["mlp_adam", "conv_sgd"])
def test_estimate_matches_the_cpu_allocator_on_a_captured_step(model_kind):
    est, model, opt, (x, y), run_step = _captured_step(model_kind)
    before = sum(p.numel() * 4 for p in model.parameters()) + x.numel() * 4 + y.numel() * 8
    before += sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                  if torch.is_tensor(v))
    before += sum(b.numel() * b.element_size() for b in model.buffers())
    measured = before + _allocator_peak_of_step(run_step)
    assert est.live_peak == pytest.approx(measured, rel=0.05)


def test_the_golden_trace_without_a_model(golden_trace):
    """The saved MLP step (tests/python/models.py: 32->64->10, Adam, batch 8 of float32):
    its memory is read from the trace alone."""
    from habitat.data.trace import load_trace

    steps = load_trace(golden_trace)["steps"]
    params = (32 * 64 + 64 + 64 * 10 + 10) * 4
    first, second = (estimate_step_memory(step) for step in steps)
    for est in (first, second):
        assert est.parameters == params
        assert est.gradients == params
        assert est.inputs >= 8 * 32 * 4
    assert second.optimizer_state >= 2 * params  # Adam's two moments, created in step 0
