"""The real-model workloads built from configs (benchmarks/accuracy/config_models.py,
mobilenet_v3.py, t5.py): the published layer sizes, a captured step of each, the op classes
their kernel time is split into (op_classes.py), and traces at a large batch extrapolated from
small ones (batch_scale.py)."""
from __future__ import annotations

import collections

import pytest
import torch


@pytest.fixture(scope="module")
def rm(real_models):
    return real_models


@pytest.fixture(scope="module")
def workloads(rm):
    return rm.load_workloads("cpu")


def _params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_models_have_the_published_parameter_counts(rm) -> None:
    """Each count is the reference implementation's (torchvision's mobilenet_v3_large and
    vit_b_16, transformers' BertForMaskedLM for bert-base-uncased and T5ForConditionalGeneration
    for t5-small): the layer shapes are the real ones."""
    import config_models
    import mobilenet_v3
    import t5

    assert _params(mobilenet_v3.MobileNetV3Large()) == 5_483_032
    assert _params(config_models.ViT()) == 86_567_656
    assert _params(config_models.BertMLM()) == 109_514_298
    assert _params(t5.T5()) == 60_506_624


def test_mobilenet_has_its_depthwise_and_squeeze_excitation_layers(rm) -> None:
    import mobilenet_v3

    net = mobilenet_v3.MobileNetV3Large()
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    depthwise = [c for c in convs if c.groups > 1]
    assert len(depthwise) == 15 and all(c.groups == c.in_channels == c.out_channels for c in depthwise)
    assert sorted({c.kernel_size[0] for c in depthwise}) == [3, 5]
    se = [m for m in net.modules() if isinstance(m, mobilenet_v3.SqueezeExcitation)]
    assert [s.fc1.out_channels for s in se] == [24, 32, 32, 120, 168, 168, 240, 240]
    assert sum(isinstance(m, torch.nn.Hardswish) for m in net.modules()) == 21  # as torchvision
    assert mobilenet_v3.make_divisible(18) == 24 and mobilenet_v3.make_divisible(30) == 32


def test_t5_has_relative_bias_in_the_first_layer_of_each_stack_only(rm) -> None:
    import t5

    net = t5.T5()
    for stack in (net.encoder, net.decoder):
        has_bias = [b.attn.body.relative_bias is not None for b in stack.blocks]
        assert has_bias == [True] + [False] * 5
    assert all(b.cross is not None for b in net.decoder.blocks)
    assert all(b.cross is None for b in net.encoder.blocks)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in net.modules())  # RMS norm only
    assert all(getattr(m, "bias", None) is None for m in net.modules() if isinstance(m, torch.nn.Linear))


def test_relative_position_buckets_match_t5s_table() -> None:
    """T5's bidirectional buckets: 16 per direction, exact below 8, logarithmic to 128."""
    import t5

    rel = torch.tensor([-200, -128, -20, -8, -7, -1, 0, 1, 7, 8, 20, 128, 200])
    buckets = t5.relative_position_bucket(rel, True, 32, 128).tolist()
    assert buckets == [15, 15, 10, 8, 7, 1, 0, 17, 23, 24, 26, 31, 31]
    causal = t5.relative_position_bucket(rel, False, 32, 128).tolist()
    assert causal[:7] == [31, 31, 17, 8, 7, 1, 0] and causal[7:] == [0] * 6


def test_every_workload_states_its_real_batch(workloads) -> None:
    batches = {name: w.batch for name, w in workloads.items()}
    assert batches == {"resnet50": 64, "gpt2_small": 8, "lstm_seq2seq": 128, "dcgan": 128,
                       "mobilenet_v3_large": 128, "vit_b16": 64, "bert_base_mlm": 32, "t5_small": 16}


@pytest.fixture(scope="module")
def smoke_classes(rm, smoke_trace):
    """op class -> forecast ms on an H100 of a captured fp32 smoke step of each new network."""
    out = {}
    for name, batch in (("mobilenet_v3_large", 3), ("t5_small", 2), ("bert_base_mlm", 2)):
        doc = smoke_trace(name, "fp32", batch)
        step = doc["steps"][0]
        forecast = rm.classify(doc["origin"], step, ["H100-SXM5-80GB"])
        classes = rm.op_classes.classify_step(step["ops"], rm.op_classes.engine_classes(forecast))
        out[name] = rm.op_classes.sum_by_class(classes, rm.op_classes.forecast_us(forecast, 0))
        assert sum(out[name].values()) == pytest.approx(forecast["totals"][0]["total_ms"], rel=1e-6)
    return out


def test_mobilenet_step_splits_into_its_convolution_kinds(smoke_classes) -> None:
    by = smoke_classes["mobilenet_v3_large"]
    for cls in ("conv", "conv depthwise/grouped", "conv 1x1", "batch norm", "activation", "pooling", "gemm",
                "loss", "optimizer"):
        assert by.get(cls, 0) > 0, cls
    assert "attention" not in by and "embedding" not in by


def test_transformer_steps_split_into_their_classes(smoke_classes) -> None:
    t5_by, bert_by = smoke_classes["t5_small"], smoke_classes["bert_base_mlm"]
    for cls in ("gemm", "softmax", "dropout", "embedding", "loss", "optimizer"):
        assert t5_by.get(cls, 0) > 0, cls
    assert "layer norm" not in t5_by  # T5's RMS norm is element-wise work
    for cls in ("gemm", "attention", "layer norm", "activation", "embedding", "loss", "optimizer"):
        assert bert_by.get(cls, 0) > 0, cls


def test_cudas_softmax_backward_is_softmax_with_its_mul(rm) -> None:
    """CUDA's softmax backward (SoftMax.cu) first multiplies the gradient by the output, a `mul`
    op of its own below _softmax_backward_data; the CPU's does it inside. Both are "softmax"."""
    t = {"shape": [16, 8, 512, 512], "dtype": "float32"}
    ops = [{"id": 0, "name": "aten::_softmax_backward_data", "phase": "backward",
            "args": [{"name": "grad_output", "tensor": t}]},
           {"id": 1, "parent": 0, "name": "aten::mul", "phase": "backward",
            "args": [{"name": "self", "tensor": t}, {"name": "other", "tensor": t}]}]
    classes = rm.op_classes.classify_step(ops, {0: "softmax", 1: "elementwise"})
    assert classes == {0: "softmax", 1: "softmax"}


def test_the_cpus_dropout_backward_is_classed_with_the_dropout(rm) -> None:
    """The CPU's dropout backward is a `mul` of the gradient by the forward's noise; CUDA's is
    native_dropout_backward: both are "dropout"."""
    def t(storage: int) -> dict:
        return {"shape": [4, 8], "dtype": "float32", "storage": storage}
    ops = [{"id": 0, "name": "aten::dropout", "phase": "forward", "args": [{"name": "input", "tensor": t(1)}]},
           {"id": 1, "parent": 0, "name": "aten::bernoulli_", "phase": "forward",
            "args": [{"name": "self", "tensor": t(7)}]},
           {"id": 2, "name": "aten::mul", "phase": "backward",
            "args": [{"name": "self", "tensor": t(9)}, {"name": "other", "tensor": t(7)}]},
           {"id": 3, "name": "aten::mul", "phase": "backward",
            "args": [{"name": "self", "tensor": t(9)}, {"name": "other", "tensor": t(5)}]}]
    classes = rm.op_classes.classify_step(ops, {2: "elementwise", 3: "elementwise"})
    assert classes[2] == "dropout" and classes[3] == "elementwise"


def test_primed_step_records_the_same_ops_as_after_a_whole_step(workloads) -> None:
    """steady() creates AdamW's state without a forward/backward: the traced step that follows
    is the one a full warm-up step would have left (same ops, same phases)."""
    import workloads as wl

    from habitat.capture.record import record_step

    counts = []
    for warm in ("step", "prime"):
        torch.manual_seed(0)
        step = workloads["mobilenet_v3_large"].step(torch.device("cpu"), smoke=True)
        step(True) if warm == "step" else wl.steady(step, True)
        with record_step(0) as rec:
            step(True)
        counts.append(collections.Counter((o["name"], o.get("phase")) for o in rec.step["ops"]))
    assert counts[0] == counts[1]


def test_extrapolated_trace_matches_one_traced_at_its_batch(rm, smoke_trace) -> None:
    """The batch-7 trace from batches 3, 4 and 5 has the ops and shapes of the step traced at
    batch 7 (at these tiny images only the strides of some size-1 dimensions differ, which no
    cost reads), and the same forecast."""
    docs = {b: smoke_trace("mobilenet_v3_large", "fp32", b) for b in (3, 4, 5, 7)}
    scaled = rm.batch_scale.extrapolate({b: docs[b] for b in (3, 4, 5)}, 7)
    diffs = rm.batch_scale.differences(scaled, docs[7])
    assert all(".strides" in where or ".ints" in where for where, _, _ in diffs), diffs[:5]
    assert len(diffs) < 0.01 * len(docs[7]["steps"][0]["ops"])
    shapes = [w for w, _, _ in diffs if ".shape" in w]
    assert not shapes
    forecasts = [rm.classify(d["origin"], d["steps"][0], ["H100-SXM5-80GB"])["totals"][0]["total_ms"]
                 for d in (scaled, docs[7])]
    assert forecasts[0] == pytest.approx(forecasts[1], rel=1e-9)
    assert scaled["batch_scale"] == {"batch": 7, "traced_batches": [3, 4, 5]}
