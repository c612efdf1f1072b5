"""The C++ capture (dispatcher fallback) seen through habitat.capture.predict.record_step."""
from __future__ import annotations

import resource
import threading
from collections import Counter
from typing import Any

import pytest
import torch
from models import OPTIMIZERS, WORKLOADS, make_workload
from threads import run_in_threads
from torch.utils._python_dispatch import TorchDispatchMode

from habitat import _C
from habitat.capture.predict import record_step
from habitat.data.trace import tensor_args


def full_name(op: dict[str, Any]) -> str:
    return f"{op['name']}.{op['overload']}" if op.get("overload") else op["name"]


def capture(fn, **kwargs: Any) -> dict[str, Any]:
    with record_step(**kwargs) as rec:
        fn()
    assert rec.step is not None
    return rec.step


def arg(op: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in op["args"] if a["name"] == name)


class OpLog(TorchDispatchMode):
    """What a TorchDispatchMode sees: ops below autograd, after composite decomposition."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        schema = func._schema
        # record_function markers are not work; detach is issued by the mode machinery when
        # autograd saves tensors below the Autograd key (a view: no work either).
        if schema.name.startswith("profiler::") or schema.name == "aten::detach":
            return func(*args, **(kwargs or {}))
        self.names.append(f"{schema.name}.{schema.overload_name}" if schema.overload_name
                          else schema.name)
        return func(*args, **(kwargs or {}))


def is_subsequence(needle: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(x == y for y in it) for x in needle)


def test_capture_key_is_the_generic_mode_key() -> None:
    assert _C.CAPTURE_KEY == "TESTING_ONLY_GenericMode"
    capture(lambda: torch.ones(2) + 1)
    assert _C._capture_key_included()  # stays included: repeated steps keep the TLS key set


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("name", WORKLOADS)
def test_every_op_the_profiler_sees_is_captured(name: str, optimizer: str) -> None:
    work = make_workload(name, optimizer)
    work.step()  # optimizer state exists, as in a steady training step
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step = capture(work.step)
    # RecordFunction fires for calls entering the dispatcher from the top, the calls our key
    # sees, except that the profiler keeps one event where an op calls another overload of
    # itself (div_.Scalar -> div_.Tensor): count those pairs once.
    seen = Counter(e.name for e in prof.events() if e.name.startswith("aten::"))
    by_id = {op["id"]: op for op in step["ops"]}
    ours = Counter(op["name"] for op in step["ops"]
                   if "parent" not in op or by_id[op["parent"]]["name"] != op["name"])
    assert ours == seen
    assert not any(op["name"].startswith("profiler::") for op in step["ops"])


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("name", WORKLOADS)
def test_every_op_a_dispatch_mode_sees_is_captured_in_order(name: str, optimizer: str) -> None:
    work = make_workload(name, optimizer)
    work.step()
    step = capture(work.step)
    reference = make_workload(name, optimizer)
    reference.step()
    with OpLog() as log:
        reference.step()
    ours = [as_seen_under_a_mode(op) for op in step["ops"]]
    assert log.names and is_subsequence(log.names, ours)


def as_seen_under_a_mode(op: dict[str, Any]) -> str:
    # Autograd sums the gradients of a tensor used twice in place (add_) unless the tensor is
    # "subclass-like", which every tensor is while a dispatch mode is active
    # (at::isTensorSubclassLike): the reference step then runs an out-of-place add instead.
    name = full_name(op)
    if name == "aten::add_.Tensor" and op.get("phase") == "backward" and "parent" not in op:
        return "aten::add.Tensor"
    return name


@pytest.mark.parametrize("name", WORKLOADS)
def test_backward_ops_are_labelled_with_their_autograd_node(name: str) -> None:
    work = make_workload(name, "sgd")
    step = capture(work.step)
    backward = [op for op in step["ops"] if op.get("phase") == "backward"]
    assert backward
    assert all(op.get("autograd_node") for op in backward)
    nodes = {op["autograd_node"] for op in backward}
    expected = {
        "mlp": {"AddmmBackward0", "ReluBackward0"},
        "cnn": {"ConvolutionBackward0", "NativeBatchNormBackward0", "AddmmBackward0"},
        "transformer": {"EmbeddingBackward0", "NativeLayerNormBackward0", "SoftmaxBackward0",
                        "BmmBackward0", "GeluBackward0"},
    }[name]
    assert expected <= nodes
    names = {op["name"] for op in backward}
    assert {"mlp": "aten::threshold_backward", "cnn": "aten::convolution_backward",
            "transformer": "aten::embedding_dense_backward"}[name] in names
    # Forward ops are never labelled with a node.
    assert not any(op.get("autograd_node") for op in step["ops"] if op.get("phase") != "backward")


@pytest.mark.parametrize("name, expected", [
    ("mlp", {("aten::linear", "fc1"), ("aten::relu", "act"), ("aten::linear", "fc2")}),
    ("cnn", {("aten::conv2d", "features.0"), ("aten::batch_norm", "features.1"),
             ("aten::conv2d", "features.3"), ("aten::adaptive_avg_pool2d", "pool"),
             ("aten::linear", "head")}),
    ("transformer", {("aten::embedding", "embed"), ("aten::layer_norm", "layers.0.ln1"),
                     ("aten::linear", "layers.0.attn.qkv"), ("aten::softmax", "layers.1.attn"),
                     ("aten::gelu", "layers.1.mlp.1"), ("aten::layer_norm", "norm"),
                     ("aten::linear", "head")}),
])
def test_forward_ops_carry_their_module_path(name: str, expected: set[tuple[str, str]]) -> None:
    work = make_workload(name, "sgd")
    step = capture(work.step)
    forward = {(op["name"], op.get("module_path", "")) for op in step["ops"]
               if op.get("phase") == "forward"}
    assert expected <= forward
    # The loss is computed outside any module but builds the autograd graph: forward, no path.
    loss = [op for op in step["ops"] if op["name"] == "aten::cross_entropy_loss"]
    assert loss and loss[0]["phase"] == "forward" and "module_path" not in loss[0]


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_optimizer_ops_are_labelled(optimizer: str) -> None:
    work = make_workload("mlp", optimizer)
    work.step()
    step = capture(work.step)
    opt = [op for op in step["ops"] if op.get("phase") == "optimizer"]
    assert opt
    assert all("module_path" not in op and "autograd_node" not in op for op in opt)
    names = {op["name"] for op in opt}
    assert any(n.startswith("aten::_foreach_") or n in ("aten::add_", "aten::mul_") for n in names)
    # Every op of the step is in one of the three phases or plainly "other".
    phases = Counter(op.get("phase", "other") for op in step["ops"])
    assert phases["forward"] and phases["backward"] and phases["optimizer"]


def test_composite_ops_name_their_pieces() -> None:
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    step = capture(lambda: lin(x))
    by_id = {op["id"]: op for op in step["ops"]}
    linear = next(op for op in step["ops"] if op["name"] == "aten::linear")
    children = [op for op in step["ops"] if op.get("parent") == linear["id"]]
    assert linear.get("has_children") and {c["name"] for c in children} >= {"aten::addmm"}
    assert all(c.get("depth", 0) == linear.get("depth", 0) + 1 for c in children)
    for op in step["ops"]:  # ids in start order, every parent started before its children
        if "parent" in op:
            assert op["parent"] < op["id"] and by_id[op["parent"]].get("has_children")
    assert [op["id"] for op in step["ops"]] == list(range(len(step["ops"])))
    # aten::linear does no work of its own: it is never a leaf. The CPU addmm kernel itself
    # calls expand and copy_ (the bias broadcast into the output), so addmm is a parent too;
    # the predictor forecasts such an op from its own shape, not again from its pieces.
    leaves = {op["name"] for op in step["ops"] if not op.get("has_children")}
    assert "aten::linear" not in leaves
    addmm = next(op for op in step["ops"] if op["name"] == "aten::addmm")
    assert addmm["parent"] == linear["id"]
    assert {op["name"] for op in step["ops"] if op.get("parent") == addmm["id"]} >= {
        "aten::expand", "aten::copy_"}


def test_cost_arguments_and_tensor_metadata() -> None:
    conv = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1, dilation=1, groups=2)
    x = torch.randn(1, 4, 9, 9)
    y = torch.randn(5, 3)

    def work() -> None:
        conv(x)
        y.t().contiguous()
        y.sum(dim=[0], keepdim=True, dtype=torch.float64)

    step = capture(work)
    c = next(op for op in step["ops"] if op["name"] == "aten::convolution")
    assert arg(c, "stride")["ints"] == [2, 2] and arg(c, "padding")["ints"] == [1, 1]
    assert arg(c, "dilation")["ints"] == [1, 1] and arg(c, "groups")["int"] == 2
    assert arg(c, "transposed")["bool"] is False
    inp = arg(c, "input")["tensor"]
    assert inp["shape"] == [1, 4, 9, 9] and inp["dtype"] == "float32" and inp["device"] == "cpu"
    assert c["outputs"][0]["shape"] == [1, 8, 5, 5]
    t = next(op for op in step["ops"] if op["name"] == "aten::t")
    transposed = t["outputs"][0]
    assert transposed["shape"] == [3, 5] and transposed["strides"] == [1, 3]
    assert transposed.get("contiguous") is False
    assert transposed["storage"] == arg(t, "self")["tensor"]["storage"]  # a view of y
    s = next(op for op in step["ops"] if op["name"] == "aten::sum")
    assert s["overload"] == "dim_IntList"
    assert arg(s, "dim")["ints"] == [0] and arg(s, "keepdim")["bool"] is True
    assert arg(s, "dtype")["str"] == "float64"


def test_measured_times_are_positive_and_nested() -> None:
    a = torch.randn(64, 64)
    step = capture(lambda: torch.nn.functional.linear(a, a, a[0]))
    assert step["wall_ms"] > 0
    by_id = {op["id"]: op for op in step["ops"]}
    for op in step["ops"]:
        assert op.get("wall_us", 0) > 0
        if "parent" in op:
            assert op["wall_us"] <= by_id[op["parent"]]["wall_us"]


def test_fake_meta_and_functional_tensors_pass_through() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functionalize

    real = torch.randn(3, 3)

    def work() -> None:
        m = torch.empty(4, 4, device="meta")
        (m @ m).sum()
        with FakeTensorMode():
            f = torch.randn(5, 5)
            (f @ f).relu()
        functionalize(lambda t: t.add_(1).mul(2))(torch.zeros(2))
        real.exp()

    step = capture(work)
    names = [op["name"] for op in step["ops"]]
    assert "aten::exp" in names
    for op in step["ops"]:
        metas = [meta for _, meta in tensor_args(op)]
        assert all(m.get("device", "cpu") != "meta" for m in metas)
        assert all(m.get("shape") != [5, 5] for m in metas)
    assert "aten::mm" not in names and "aten::relu" not in names


def test_profiler_record_function_is_not_captured() -> None:
    def work() -> None:
        with torch.profiler.record_function("user-range"):
            torch.ones(3).mul(2)

    step = capture(work)
    names = {op["name"] for op in step["ops"]}
    assert "aten::mul" in names
    assert not any(n.startswith("profiler::") for n in names)


def test_ops_outside_the_window_are_not_recorded() -> None:
    x = torch.randn(4)
    x.cos()  # before any window
    step = capture(lambda: x.sin())
    x.tan()  # after: the key stays included, the fallback passes it through
    again = capture(lambda: x.abs())
    # On CPU abs is composite (empty + abs.out): its pieces are children of the call.
    assert {op["name"] for op in step["ops"] if "parent" not in op} == {"aten::sin"}
    assert {op["name"] for op in again["ops"] if "parent" not in op} == {"aten::abs"}
    assert len(step["ops"]) == 1


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("name", WORKLOADS)
def test_losses_and_parameters_are_bitwise_identical(name: str, optimizer: str) -> None:
    plain, captured = make_workload(name, optimizer), make_workload(name, optimizer)
    for _ in range(3):
        expected = plain.step()
        with record_step():
            got = captured.step()
        assert torch.equal(expected, got)
    for (n, p), q in zip(plain.model.named_parameters(), captured.model.parameters()):
        assert torch.equal(p, q), n
    for p, q in zip(plain.model.buffers(), captured.model.buffers()):
        assert torch.equal(p, q)


def test_exception_propagates_and_leaves_state_clean() -> None:
    model = make_workload("mlp").model
    bad = torch.randn(2, 5)  # wrong width for fc1

    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied") as info:
        with record_step() as rec:
            model(bad)
    assert rec.step is None
    assert isinstance(info.value, RuntimeError)
    # The next window records normally, with module paths from a clean stack.
    step = capture(lambda: model(torch.randn(2, 32)))
    linear = [op for op in step["ops"] if op["name"] == "aten::linear"]
    assert [op["module_path"] for op in linear] == ["fc1", "fc2"]
    assert all(op.get("depth", 0) == 0 for op in linear)


def test_exception_inside_optimizer_step_resets_the_phase() -> None:
    work = make_workload("mlp", "sgd")
    work.model(work.inputs).sum().backward()

    def failing_closure() -> float:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        with record_step():
            work.optimizer.step(failing_closure)
    step = capture(lambda: work.model(work.inputs))
    assert all(op.get("phase") != "optimizer" for op in step["ops"])


def test_nested_windows_both_see_the_inner_ops() -> None:
    x = torch.randn(8)
    with record_step() as outer:
        x.sin()
        with record_step() as inner:
            x.cos()
        x.tan()
    assert [op["name"] for op in inner.step["ops"]] == ["aten::cos"]
    assert [op["name"] for op in outer.step["ops"]] == ["aten::sin", "aten::cos", "aten::tan"]
    assert [op["id"] for op in outer.step["ops"]] == [0, 1, 2]


def test_two_threads_record_their_own_steps() -> None:
    results: dict[int, dict[str, Any]] = {}
    barrier = threading.Barrier(2)

    def worker(width: int) -> None:
        lin = torch.nn.Linear(width, width)
        x = torch.randn(3, width)
        barrier.wait()
        with record_step() as rec:
            for _ in range(50):
                lin(x).sum().backward()
        results[width] = rec.step

    run_in_threads(worker, (5, 7))
    for width, step in results.items():
        mms = [op for op in step["ops"] if op["name"] == "aten::addmm"]
        assert len(mms) == 50
        assert all(arg(op, "mat1")["tensor"]["shape"] == [3, width] for op in mms)
        assert any(op.get("phase") == "backward" for op in step["ops"])


def test_step_is_bounded_and_memory_does_not_grow() -> None:
    x = torch.randn(4)
    step = capture(lambda: [x.add(1) for _ in range(100)], max_ops=10)
    # Every dispatcher call counts, nested ones too: what the cap refused is the rest of an
    # uncapped recording of the same work.
    uncapped = capture(lambda: [x.add(1) for _ in range(100)])
    assert len(uncapped["ops"]) >= 100 and "dropped_ops" not in uncapped
    assert len(step["ops"]) == 10 and step["dropped_ops"] == len(uncapped["ops"]) - 10

    def rss_kb() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    for _ in range(50):  # warm up allocator pools
        capture(lambda: [x.add(1) for _ in range(200)])
    before = rss_kb()
    for _ in range(2000):
        capture(lambda: [x.add(1) for _ in range(200)])
    assert rss_kb() - before < 20_000  # 400k records over the loop; none retained


def test_a_user_dispatch_mode_does_not_double_count() -> None:
    x = torch.randn(4)
    with OpLog():
        step = capture(lambda: x.exp())
    exps = [op for op in step["ops"] if op["name"] == "aten::exp"]
    leaves = [op for op in exps if not op.get("has_children")]
    assert len(leaves) == 1  # the mode's re-dispatch is the child that does the work


def test_module_subtree_names_match_named_modules():
    """The hooks' fast walk names every module as named_modules(remove_duplicate=False) does
    (first path in pre-order, _orig_mod levels left out), shared modules included."""
    from habitat.capture import modules as habitat_modules

    shared = torch.nn.Linear(2, 2)
    inner = torch.nn.Sequential(torch.nn.ReLU(), shared)
    model = torch.nn.ModuleDict({"a": inner, "b": torch.nn.Sequential(shared, torch.nn.Tanh()),
                                 "c": shared})
    wrapped = torch.nn.Module()
    wrapped._orig_mod = model  # as torch.compile's OptimizedModule holds the original
    wrapped.add_module("empty", None)
    for parent in (model, inner, wrapped, torch.nn.Linear(1, 1)):
        assert habitat_modules._subtree_names(parent) == habitat_modules._subtree_names_slow(parent)
    assert habitat_modules._subtree_names(wrapped)[id(shared)] == "a.1"
