"""The kernel collector's shapes (benchmarks/gpu/kernel_shapes.py): every family's shapes are
reproducible and bounded, and cover what real networks run (benchmarks/gpu/network_shapes.py)."""
from __future__ import annotations

import math
import random
import sys

import pytest
from bench_scripts import loaded_script

DRAWS = 3000  # enough for every real layer of a table to be drawn (a third of the shapes are real ones)


@pytest.fixture(scope="module")
def ks():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels"):
        yield sys.modules["kernel_shapes"]


@pytest.fixture(scope="module")
def nets():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels"):
        yield sys.modules["network_shapes"]


@pytest.fixture(scope="module")
def families():
    with loaded_script("benchmarks/gpu/collect_kernels.py", "collect_kernels"):
        yield sys.modules["kernel_families"].FAMILIES


NAMES = ["gemm", "conv", "attention", "elementwise", "layernorm", "softmax", "reduction", "batchnorm", "gconv",
         "pointwise", "activation", "embedding", "crossentropy", "adamw", "stem", "encoder", "rmsnorm", "largenorm",
         "conv3d", "vocab", "multitensor", "netgemm"]


def test_every_family_is_tested(families):
    assert list(families) == NAMES


def _plain(shapes: list) -> list:
    return [(s[0], dict(s[1])) if isinstance(s, tuple) else dict(s) for s in shapes]


@pytest.mark.parametrize("name", NAMES)
def test_every_family_reproducible_from_its_seed(families, name):
    family = families[name]
    a, b = family.shapes(200, random.Random(7)), family.shapes(200, random.Random(7))
    assert _plain(a) == _plain(b) and len(a) == 200
    assert _plain(family.shapes(200, random.Random(8))) != _plain(a)
    small = family.shapes(20, random.Random(7), True)
    assert len(small) == 20 and _plain(small) != _plain(a[:20])


def _elements(name: str, s) -> int:
    """The largest tensor of a shape (what its family caps)."""
    if name in ("gemm", "vocab", "netgemm"):
        op, d = s
        return d["B"] * max(d["M"] * d["N"], d["N"] * d["K"], d["M"] * d["K"])
    if name == "stem":  # the image or the output, whichever is larger
        out = (s["Input_Size"] + 2 * s["Padding"] - s["Kernel_Szie"]) // s["Stride"] + 1
        return s["B"] * max(s["Input_Channel"] * s["Input_Size"] ** 2, s["Output_Channel"] * out ** 2)
    if name == "conv3d":
        return s["B"] * max(s["Input_Channel"], s["Output_Channel"]) * s["Depth"] * s["Input_Size"] ** 2
    if name in ("conv", "gconv", "pointwise", "batchnorm"):
        return s["B"] * max(s["Input_Channel"], s.get("Output_Channel", 0)) * s["Input_Size"] ** 2
    if name in ("attention", "encoder"):
        return s["B"] * s["H"] * s["L"] * s["S"]
    if name == "embedding":
        return max(s["Vocab"], s["Tokens"]) * s["Dim"]
    if name == "crossentropy":
        return s["Tokens"] * s["Classes"]
    if name in ("adamw", "multitensor"):
        return s["Elements"]
    return s["B"] * s["H"]


# Each family's bound on _elements: what one pass of the device must hold per tensor (conv: the
# 2026-11 collections' cap; flat tensors up to ResNet-50's first ReLU at batch 256; the logits of
# BERT's masked-LM head at 32 x 512 tokens; the parameters of a GPT-2 large).
BOUNDS = {"gemm": 2**28, "conv": 2**27, "attention": 2**28, "layernorm": 2**25, "softmax": 2**25,
          "gconv": 2**28, "pointwise": 2**28, "batchnorm": 2**28, "elementwise": 2**28, "activation": 2**28,
          "reduction": 2**28, "embedding": 2**28, "crossentropy": 2**29, "adamw": 2**29, "stem": 2**28,
          "encoder": 2**27, "rmsnorm": 2**25, "largenorm": 2**29, "conv3d": 2**27, "vocab": 2**28,
          "multitensor": 2**29, "netgemm": 2**28}


@pytest.mark.parametrize("name", NAMES)
def test_every_family_bounded_and_small_in_a_dry_run(families, name):
    family = families[name]
    shapes = family.shapes(DRAWS, random.Random(0))
    sizes = [_elements(name, s) for s in shapes]
    assert max(sizes) <= BOUNDS[name] and min(sizes) >= 1
    assert max(sizes) > BOUNDS[name] / 64  # the ranges reach large tensors, not only small ones
    assert all(_elements(name, s) <= 2**20 for s in family.shapes(50, random.Random(0), True))


def test_vocab_family_holds_unaligned_heads_both_ways(ks):
    """An LM head's GEMMs: real vocabularies and drawn ones with every remainder modulo 8, as the
    output and as the reduction; the gemm family's linear rows are all multiples of 8."""
    shapes = ks.vocab_shapes(DRAWS, random.Random(0))
    assert {op for op, _ in shapes} == {"linear"}
    as_output = [d["K"] for _, d in shapes if d["K"] > d["N"]]
    as_reduction = [d["N"] for _, d in shapes if d["N"] > d["K"]]
    vocabs = as_output + as_reduction
    assert len(vocabs) == DRAWS and as_output and as_reduction
    assert {v % 8 for v in vocabs} >= {0, 1, 2, 4} and set(ks.VOCABULARIES) & set(vocabs)
    assert all(d["B"] == 1 and d["M"] % 8 == 0 for _, d in shapes)
    assert all(d["K"] % 8 == 0 and d["N"] % 8 == 0 for op, d in ks.gemm_shapes(DRAWS, random.Random(0))
               if op == "linear")


def test_conv_family_shapes(ks):
    for s in ks.gconv_shapes(DRAWS, random.Random(0)):
        c, g = s["Input_Channel"], s["Groups"]
        assert c == s["Output_Channel"] and c % g == 0 and 1 <= s["B"] <= 256
        assert g == c or c // g in ks.GROUP_WIDTHS
        assert s["Kernel_Szie"] in (3, 5, 7) and s["Padding"] == s["Kernel_Szie"] // 2 and s["Stride"] in (1, 2)
        assert s["Input_Size"] >= s["Kernel_Szie"] or s["Input_Size"] >= ks.RANGES["gconv"]["Input_Size"][0]
    gconv = ks.gconv_shapes(DRAWS, random.Random(0))
    depthwise = sum(s["Groups"] == s["Input_Channel"] for s in gconv) / len(gconv)
    assert 0.4 < depthwise < 0.6
    point = ks.pointwise_shapes(DRAWS, random.Random(0))
    assert all(s["Kernel_Szie"] == 1 and s["Padding"] == 0 and s["Stride"] in (1, 2) for s in point)
    assert any(s["Input_Size"] == 1 for s in point) and any(s["Stride"] == 2 for s in point)


def test_adamw_parameter_lists(ks, nets):
    shapes = ks.adamw_shapes(DRAWS, random.Random(0))
    for s in shapes:
        sizes = s["sizes"]
        assert (s["Tensors"], s["Elements"], s["Largest"]) == (len(sizes), sum(sizes), max(sizes))
        assert s["Chunks"] == sum(math.ceil(n / 65536) for n in sizes) and min(sizes) >= 1
    counts = [s["Tensors"] for s in shapes]
    assert min(counts) <= 8 and max(counts) >= 400  # a few tensors to a deep model's hundreds
    # real models' lists (network_shapes.PARAMETER_LISTS), exactly
    real = {(s["Tensors"], s["Elements"]) for s in shapes}
    expected = {"bert_base": (199, 109482240), "gpt2_small": (148, 124439808), "vit_b16": (152, 86567656),
                "t5_small": (131, 60506624), "resnet50": (161, 25557032)}
    assert {k: (len(f()), sum(f())) for k, f in nets.PARAMETER_LISTS.items()} == expected
    assert set(expected.values()) <= real


# family -> (generator, real networks' table, a real layer -> the generated shape's key, the shape's key)
COVERAGE = {
    "gconv/depthwise": ("gconv_shapes", "DEPTHWISE", lambda c, s, k, st: (c, c, s, k, st),
                        lambda x: (x["Input_Channel"], x["Groups"], x["Input_Size"], x["Kernel_Szie"], x["Stride"])),
    "gconv/grouped": ("gconv_shapes", "GROUPED", lambda c, g, s, st: (c, g, s, 3, st),
                      lambda x: (x["Input_Channel"], x["Groups"], x["Input_Size"], x["Kernel_Szie"], x["Stride"])),
    "pointwise": ("pointwise_shapes", "POINTWISE", lambda i, o, s, st: (i, o, s, st),
                  lambda x: (x["Input_Channel"], x["Output_Channel"], x["Input_Size"], x["Stride"])),
    "batchnorm": ("batchnorm_shapes", "BATCHNORM", lambda c, s: (c, s), lambda x: (x["Input_Channel"], x["Input_Size"])),
    "activation": ("activation_shapes", "ACTIVATIONS", lambda r, c: (r, c), lambda x: (x["B"], x["H"])),
    "reduction": ("reduction_shapes", "REDUCTIONS", lambda r, c: (r, c), lambda x: (x["B"], x["H"])),
    "embedding": ("embedding_shapes", "EMBEDDINGS", lambda v, d, t: (v, d, t),
                  lambda x: (x["Vocab"], x["Dim"], x["Tokens"])),
    "crossentropy": ("crossentropy_shapes", "CROSS_ENTROPY", lambda t, c: (t, c), lambda x: (x["Tokens"], x["Classes"])),
}


@pytest.mark.parametrize("what", sorted(COVERAGE))
def test_generators_draw_every_real_layer(ks, nets, what):
    generator, table, layer_key, shape_key = COVERAGE[what]
    want = {layer_key(*layer) for layer in nets.layers(getattr(nets, table))}
    for seed in (0, 1):
        got = {shape_key(s) for s in getattr(ks, generator)(DRAWS, random.Random(seed))}
        assert want <= got, f"{what}: never drawn: {sorted(want - got)[:5]}"


# Real layers -> the values of the random ranges' columns (kernel_shapes.RANGES), at a batch
CNN_BATCH = 128  # a training batch every CNN layer must fit under its family's cap unshrunk
RANGE_COLUMNS = {
    "gconv": [("DEPTHWISE", lambda c, s, k, st: {"Input_Channel": c, "Input_Size": s}),
              ("GROUPED", lambda c, g, s, st: {"Input_Channel": c, "Input_Size": s, "Groups": g})],
    "pointwise": [("POINTWISE", lambda i, o, s, st: {"Input_Channel": i, "Output_Channel": o, "Input_Size": s})],
    "batchnorm": [("BATCHNORM", lambda c, s: {"Input_Channel": c, "Input_Size": s})],
    "activation": [("ACTIVATIONS", lambda r, c: {"B": r, "H": c})],
    "reduction": [("REDUCTIONS", lambda r, c: {"B": r, "H": c})],
    "embedding": [("EMBEDDINGS", lambda v, d, t: {"Vocab": v, "Dim": d, "Tokens": t})],
    "crossentropy": [("CROSS_ENTROPY", lambda t, c: {"Tokens": t, "Classes": c})],
}


@pytest.mark.parametrize("family", sorted(RANGE_COLUMNS))
def test_random_ranges_contain_real_networks_and_caps_fit_their_batches(ks, nets, family):
    """The random part of each generator spans the real layers (so a model trained on it
    interpolates there), and a real layer at a training batch is measured as it is."""
    assert set(ks.RANGES) == set(RANGE_COLUMNS)
    for table, columns in RANGE_COLUMNS[family]:
        for layer in nets.layers(getattr(nets, table)):
            for column, value in columns(*layer).items():
                lo, hi = ks.RANGES[family][column]
                assert lo <= value <= hi, f"{family} {table} {layer}: {column} {value} outside {lo}..{hi}"
    if family in ("gconv", "pointwise", "batchnorm"):
        for table, columns in RANGE_COLUMNS[family]:
            for layer in nets.layers(getattr(nets, table)):
                c = columns(*layer)
                per_image = max(c["Input_Channel"], c.get("Output_Channel", 0)) * c["Input_Size"] ** 2
                assert CNN_BATCH * per_image <= ks.CAPS[family]
    for group in nets.GROUPED.values():
        assert all(c // g in ks.GROUP_WIDTHS and c % g == 0 for c, g, _, _ in group)
    assert all(r * c <= ks.CAPS["flat"] for r, c in nets.layers(nets.ACTIVATIONS) + nets.layers(nets.REDUCTIONS))
    assert all(v * d <= ks.CAPS["embedding"] and t * d <= ks.CAPS["embedding_tokens"]
               for v, d, t in nets.layers(nets.EMBEDDINGS))
    assert all(t * c <= ks.CAPS["crossentropy"] for t, c in nets.layers(nets.CROSS_ENTROPY))
    assert all(sum(f()) <= ks.CAPS["adamw"] for f in nets.PARAMETER_LISTS.values())


def test_existing_generators_unchanged(ks):
    """gemm, conv, attention and layer norm / softmax keep the 2026-11 collections' shapes."""
    g1 = ks.gemm_shapes(40, random.Random(3))
    assert {op for op, _ in g1} == {"bmm", "linear"}
    for op, s in g1:
        assert s["B"] * (s["M"] * s["N"] + s["N"] * s["K"] + s["M"] * s["K"]) <= 2**28
        assert op == "bmm" or s["B"] == 1
    for s in ks.conv_shapes(40, random.Random(1)):
        assert s["Padding"] == s["Kernel_Szie"] // 2 and s["Stride"] in (1, 2)
    shapes = ks.attention_shapes(200, random.Random(0))
    assert {s["E"] for s in shapes} == {64, 128}
    assert any(s["L"] != s["S"] for s in shapes) and any(s["L"] == s["S"] for s in shapes)
    assert all(128 <= s["L"] <= 8192 for s in shapes)
    memory = ks.memory_shapes(50, random.Random(0))
    assert all(s["B"] * s["H"] <= 2**25 for s in memory) and max(s["H"] for s in memory) > 1024
