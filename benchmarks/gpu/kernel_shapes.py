"""Shapes per op family of the kernel collector (collect_kernels.py): each generator takes a count,
a random.Random and `small` (a dry run's tiny shapes) and returns dicts of the CSV's shape
columns, the same for the same seed. Tensors stay under per-family element caps (the cap names
the largest a device pass must hold). The new families draw about a third of their shapes from
the layers of real networks (network_shapes.py) with a random batch, the rest log-uniformly from
ranges that contain those layers. Torch-free.
"""
from __future__ import annotations

import math
import random
from typing import Any

from network_shapes import (
    ACTIVATIONS,
    BATCHNORM,
    CROSS_ENTROPY,
    DEPTHWISE,
    EMBEDDINGS,
    GROUPED,
    PARAMETER_LISTS,
    POINTWISE,
    REDUCTIONS,
    layers,
    resnet,
    transformer,
)

# Share of a new family's shapes taken from real networks' layers (none in a dry run).
REAL_SHARE = 1 / 3
# The new families' random ranges (log-uniform, inclusive), each containing its real networks'
# values (network_shapes.py; the tests check it). B of the CNN families is the batch.
RANGES = {
    "gconv": {"B": (1, 256), "Input_Channel": (8, 4096), "Input_Size": (4, 200), "Groups": (2, 64)},
    "pointwise": {"B": (1, 256), "Input_Channel": (4, 4096), "Output_Channel": (4, 4096), "Input_Size": (1, 112)},
    "batchnorm": {"B": (1, 256), "Input_Channel": (8, 2560), "Input_Size": (2, 160)},
    "activation": {"B": (1, 2**16), "H": (1, 2**21)},  # 2^16 tokens; EfficientNet's 96@112 is 1.2M an image
    "reduction": {"B": (1, 2**19), "H": (1, 2**17)},   # global pooling over 256 x 2048 channels
    "embedding": {"Vocab": (2, 2**18), "Dim": (16, 8192), "Tokens": (1, 2**16)},
    "crossentropy": {"Tokens": (1, 2**16), "Classes": (2, 2**18)},  # up to a multilingual vocabulary
}
GROUP_WIDTHS = (2, 4, 8, 16, 24, 32, 48, 64, 128)  # channels per group of a grouped (not depthwise) conv
# Element caps: the largest tensor of a shape (conv-like: batch x channels x size^2; flat: rows x
# columns; embeddings: the table, and tokens x dim; cross-entropy: the logits; AdamW: all
# parameters together). Real networks' layers fit them at a training batch (the tests check it).
CAPS = {"gconv": 2**28, "pointwise": 2**28, "stem": 2**28, "conv3d": 2**27, "batchnorm": 2**28, "flat": 2**28,
        "embedding": 2**28,
        "embedding_tokens": 2**27, "crossentropy": 2**29, "adamw": 2**29}
# PyTorch's multi_tensor_apply (kChunkSize of its CUDA sources) splits each tensor of a foreach or
# fused optimizer step into chunks of this many elements.
OPTIMIZER_CHUNK = 65536
Shape = dict[str, Any]


def _dim(rng: random.Random, lo: int, hi: int, align: bool) -> int:
    x = math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * rng.random())
    v = max(lo, int(round(x)))
    return max(8, (v // 8) * 8) if align and v >= 8 else v


def gemm_shapes(n: int, rng: random.Random, small: bool = False) -> list[tuple[str, dict[str, int]]]:
    """(op, {B, M, N, K}); N is the reduction dimension."""
    out = []
    hi = 256 if small else 8192
    for i in range(n):
        op = "bmm" if i % 2 else "linear"
        align = i % 4 != 3  # mostly tensor-core friendly sizes, some odd ones
        b = _dim(rng, 1, 16 if small else 256, False) if op == "bmm" else 1
        m, k_red, n_out = (_dim(rng, 16, hi, align) for _ in range(3))
        while b * (m * k_red + k_red * n_out + m * n_out) > 2**28:  # keep operands < 1 GiB in fp32
            m = max(8, m // 2)
            n_out = max(8, n_out // 2)
        out.append((op, {"B": b, "M": m, "N": k_red, "K": n_out}))
    return out


def conv_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    out = []
    for _ in range(n):
        ksize = rng.choice([1, 3, 5, 7])
        stride = 1 if rng.random() < 0.7 else 2
        size = _dim(rng, 7, 32 if small else 224, False)
        cin, cout = _dim(rng, 3, 64 if small else 1024, True), _dim(rng, 8, 64 if small else 1024, True)
        batch = _dim(rng, 1, 4 if small else 64, False)
        while batch * max(cin, cout) * size * size > 2**27:
            batch = max(1, batch // 2)
            size = max(ksize, size // 2) if batch == 1 else size
        out.append({"B": batch, "Input_Channel": cin, "Output_Channel": cout, "Kernel_Szie": ksize,
                    "Input_Size": size, "Stride": stride, "Padding": ksize // 2})
    return out


def attention_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    """{B, H, L, S, E}: batch, heads, query and key lengths, head dim. Each shape is measured
    causal and not, so causality is not part of it."""
    out = []
    for _ in range(n):
        batch, heads = _dim(rng, 1, 2 if small else 64, False), _dim(rng, 1 if small else 8, 2 if small else 32, False)
        hi = 256 if small else 8192
        length = _dim(rng, 16 if small else 128, hi, True)
        # Mostly self-attention (S == L), some cross-attention lengths.
        source = length if rng.random() < 0.7 else _dim(rng, 16 if small else 128, hi, True)
        e = rng.choice([32, 64] if small else [64, 128])
        # The math backend materialises B*H*L*S scores (a few copies in fwd+bwd): cap them.
        while batch * heads * length * source > 2**28:
            if batch > 1:
                batch = max(1, batch // 2)
            elif heads > 1:
                heads = max(1, heads // 2)
            else:
                length, source = max(16, length // 2), max(16, source // 2)
        out.append({"B": batch, "H": heads, "L": length, "S": source, "E": e})
    return out


# Encoders' sequence lengths (BERT's 128 / 256 / 512, ViT-B/16's 197 at 224 px and 577 at 384 px,
# ViT-B/14's 257, Swin's 49-token windows, T5's 512) and head widths.
ENCODER_LENGTHS = (49, 64, 128, 197, 256, 257, 384, 512, 577)
ENCODER_HEADS = (8, 12, 16)


def encoder_attention_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    """{B, H, L, S, E} of self-attention in an encoder: the short and odd sequence lengths the
    attention family's 128-8192 draws rarely hit, at the batch sizes that train them. Each shape
    is measured without a mask and with a padding mask."""
    out = []
    for _ in range(n):
        length = rng.choice(ENCODER_LENGTHS[:3] if small else ENCODER_LENGTHS)
        heads = 2 if small else rng.choice(ENCODER_HEADS)
        batch = _dim(rng, 1, 2 if small else 256, False)
        while batch > 1 and batch * heads * length * length > 2**27:
            batch //= 2
        out.append({"B": batch, "H": heads, "L": length, "S": length, "E": 32 if small else 64})
    return out


def memory_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    """{B, H}: rows and columns of a memory-bound op's tensor (NeuSight's columns)."""
    out = []
    for i in range(n):
        align = i % 4 != 3
        rows, cols = _dim(rng, 1, 64 if small else 65536, False), _dim(rng, 1, 256 if small else 16384, align)
        while rows * cols > 2**25:  # 128 MiB per fp32 tensor
            rows = max(1, rows // 2)
        out.append({"B": rows, "H": cols})
    return out


# Model widths a norm or softmax runs over in the largenorm family (hidden sizes 768-8192, a
# 1024-token attention row, vocabularies of 32000 and 50257).
LARGE_ROW_WIDTHS = (768, 1024, 2048, 4096, 5120, 8192, 32000, 50257)


def large_memory_shapes(n: int, rng: random.Random, small: bool = False) -> list[dict[str, int]]:
    """{B, H} of 2^25 to 2^29 elements (2^10 to 2^14 in a dry run), H a model width: the sizes
    past memory_shapes' cap, where the layer-norm and softmax models are extended from their
    slope (python/habitat/learned/extent.py), to check that extension."""
    lo, hi = (10, 14) if small else (25, 29)
    out = []
    for _ in range(n):
        cols = rng.choice(LARGE_ROW_WIDTHS[:3] if small else LARGE_ROW_WIDTHS)
        elements = 2.0 ** rng.uniform(lo, hi)
        out.append({"B": max(1, int(elements // cols)), "H": cols})
    return out


def _real(rng: random.Random, small: bool, table: dict[str, list[tuple]]) -> tuple | None:
    """A real network's layer for about REAL_SHARE of the shapes; None for a random one."""
    if small or rng.random() >= REAL_SHARE:
        return None
    return rng.choice(layers(table))


def _draw(rng: random.Random, family: str, column: str, small_hi: int, small: bool, align: bool = False) -> int:
    """A log-uniform draw from RANGES[family][column] (up to small_hi in a dry run)."""
    lo, hi = RANGES[family][column]
    return _dim(rng, lo, min(hi, small_hi) if small else hi, align)


def _fit(batch: int, size: int, per_pixel: int, cap: int, least: int = 1) -> tuple[int, int]:
    """(batch, size) with batch x per_pixel x size^2 under the cap: the batch halved first, then
    the size (down to `least`)."""
    while batch > 1 and batch * per_pixel * size * size > cap:
        batch //= 2
    while size > least and batch * per_pixel * size * size > cap:
        size = max(least, size // 2)
    return batch, size


def gconv_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """Grouped convolutions, in == out channels: half depthwise (Groups == channels; kernel 3, 5
    or 7, as MobileNet, EfficientNet and ConvNeXt run them), half grouped (channels per group in
    GROUP_WIDTHS, as ResNeXt and RegNet)."""
    out = []
    for i in range(n):
        depthwise = rng.random() < 0.5
        real = _real(rng, small, DEPTHWISE if depthwise else GROUPED)
        if real and depthwise:
            channels, size, ksize, stride = real
            groups = channels
        elif real:
            (channels, groups, size, stride), ksize = real, 3
        else:
            ksize, stride = rng.choice([3, 5, 7]), 1 if rng.random() < 0.7 else 2
            size = _draw(rng, "gconv", "Input_Size", 16, small)
            if depthwise:
                channels = groups = _draw(rng, "gconv", "Input_Channel", 32, small, i % 4 != 3)
            else:
                width = rng.choice(GROUP_WIDTHS[:2] if small else GROUP_WIDTHS)
                groups = _draw(rng, "gconv", "Groups", 4, small)
                while groups > 2 and width * groups > RANGES["gconv"]["Input_Channel"][1]:
                    groups //= 2
                channels = width * groups
        batch, size = _fit(_draw(rng, "gconv", "B", 4, small), size, channels, CAPS["gconv"], ksize)
        out.append({"B": batch, "Input_Channel": channels, "Output_Channel": channels, "Kernel_Szie": ksize,
                    "Input_Size": size, "Stride": stride, "Padding": ksize // 2, "Groups": groups})
    return out


def pointwise_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """1x1 convolutions (conv rows, Kernel_Szie 1): bottleneck and inverted-residual expansions and
    projections, ResNet's strided shortcuts, squeeze-excitation on 1x1 maps (size 1, about one
    in seven random shapes)."""
    out = []
    for i in range(n):
        real = _real(rng, small, POINTWISE)
        if real:
            cin, cout, size, stride = real
        else:
            cin = _draw(rng, "pointwise", "Input_Channel", 32, small, i % 4 != 3)
            cout = _draw(rng, "pointwise", "Output_Channel", 32, small, i % 4 != 3)
            size = 1 if rng.random() < 0.15 else _draw(rng, "pointwise", "Input_Size", 8, small)
            stride = 2 if size > 1 and rng.random() < 0.15 else 1
        batch, size = _fit(_draw(rng, "pointwise", "B", 4, small), size, max(cin, cout), CAPS["pointwise"])
        out.append({"B": batch, "Input_Channel": cin, "Output_Channel": cout, "Kernel_Szie": 1,
                    "Input_Size": size, "Stride": stride, "Padding": 0})
    return out


# Filter sizes of patch embeddings (filter = stride, no padding): Swin's 4, ViT-B/8's 8, ViT-H/14,
# ViT-B/16, ViT-B/32; and the image sides they cut.
PATCH_FILTERS = (4, 8, 14, 16, 32)
IMAGE_SIDES = (224, 256, 384, 448, 512)


def stem_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """Dense convolutions the conv family's odd filters miss: two shapes in three patch
    embeddings (filter = stride, no padding, 1 to 6 image channels: ViT-B/16's 16x16/16 over 3
    channels runs at a tenth of cuDNN's usual rate), the rest 4x4 stride-2 padding-1 filters
    (DCGAN's and pix2pix's encoders, and the transposed decoders, whose passes they are)."""
    out = []
    for i in range(n):
        if i % 3 != 2:
            k = rng.choice(PATCH_FILTERS)
            cin = rng.choice((1, 3, 3, 3, 4, 6))
            cout = _dim(rng, 32, 64 if small else 1536, True)
            size = max(k, (rng.choice(IMAGE_SIDES) if not small else 2 * k) // k * k)
            stride, padding = k, 0
        else:
            k, stride, padding = 4, 2, 1
            cin, cout = (_dim(rng, 3, 32 if small else 1024, True) for _ in range(2))
            size = _dim(rng, 4, 16 if small else 256, True)
        batch = _dim(rng, 1, 4 if small else 256, False)
        out_size = (size + 2 * padding - k) // stride + 1
        while batch > 1 and batch * max(cin * size * size, cout * out_size * out_size) > CAPS["stem"]:
            batch //= 2  # the largest tensor under the cap, the image or the output
        out.append({"B": batch, "Input_Channel": cin, "Output_Channel": cout, "Kernel_Szie": k,
                    "Input_Size": size, "Stride": stride, "Padding": padding})
    return out


# Output vocabularies of language models' heads, most not a multiple of 8 (cuBLAS then runs
# narrower-load kernels on the rows that dimension strides): BERT 30522, BERT-cased 28996, Chinese
# BERT 21128, GPT-2 50257, RoBERTa 50265, Whisper 51865, CLIP 49408, XLM-R 250002, T5 32128,
# Llama-2 32000. Hidden sizes of the layers before them.
VOCABULARIES = (30522, 28996, 21128, 50257, 50265, 51865, 49408, 250002, 32128, 32000)
HEAD_WIDTHS = (512, 768, 1024, 1280, 1600, 2048, 2560, 3072, 4096)
# A vocabulary's remainder modulo 8 (its alignment in 16-bit elements: 1, 2, 4 and the aligned
# control), the drawn half of the vocab family cycling through them.
VOCAB_REMAINDERS = (1, 2, 4, 0)


def vocab_shapes(n: int, rng: random.Random, small: bool = False) -> list[tuple[str, Shape]]:
    """A language-model head's GEMMs, as the gemm family's linear rows ((op, {B, M, N, K}), N the
    reduction): the vocabulary as the output (the forward; the weight gradient shares its
    alignment) or as the reduction (the input gradient), alternately. Half the vocabularies are
    real ones, half drawn log-uniformly from 8k-256k with each remainder modulo 8 in turn; the
    gemm family's linear rows are all multiples of 8, so the unaligned ones are these."""
    out = []
    for i in range(n):
        if i % 2 == 0:
            vocab = rng.choice(VOCABULARIES) if not small else _dim(rng, 64, 512, False)
        else:
            vocab = _dim(rng, 8000 if not small else 64, 2**18 if not small else 512, False)
            vocab = vocab - vocab % 8 + VOCAB_REMAINDERS[(i // 2) % len(VOCAB_REMAINDERS)]
        hidden = rng.choice(HEAD_WIDTHS) if not small else rng.choice((32, 64))
        while hidden > HEAD_WIDTHS[0] and hidden * vocab > CAPS["flat"] // 2:
            hidden //= 2  # XLM-R's 250002 x 4096 table would not leave room for the tokens
        tokens = _dim(rng, 16 if small else 256, 256 if small else 16384, True)
        while tokens > 16 and tokens * (vocab + hidden) + vocab * hidden > CAPS["flat"]:
            tokens = max(16, tokens // 16 * 8)  # halved, still a multiple of 8
        shape = {"B": 1, "M": tokens, "N": hidden, "K": vocab} if (i // 2) % 2 == 0 else \
            {"B": 1, "M": tokens, "N": vocab, "K": hidden}
        out.append(("linear", shape))
    return out


# Transformer layers as real networks size them: hidden widths, their feed-forward widths (4x, or
# LLaMA's SwiGLU width, 8/3 x rounded up to 256), heads of 64, and training's tokens per step.
NET_HIDDEN = (512, 768, 1024, 1280, 1536, 2048, 2560, 4096)
NET_TOKENS = (1024, 2048, 4096, 8192, 16384)
NET_SEQUENCES = (128, 256, 512, 1024, 2048)


def netgemm_shapes(n: int, rng: random.Random, small: bool = False) -> list[tuple[str, Shape]]:
    """The GEMMs a transformer layer's training step runs, at real networks' widths (all multiples
    of 128: whole tiles, which the gemm family's draws, multiples of 8, seldom are), as the gemm
    family's rows (op, {B, M, N, K}), N the reduction: a linear layer's forward, data gradient
    (M tokens, reducing its output width) and weight gradient (M its output width, reducing the
    tokens), in turn, over the QKV, attention output and feed-forward layers; every fourth an
    attention bmm (scores, reducing the 64-wide head, or scores times values, reducing the
    sequence). T5-small's fp32 [8192, 512] x [512, 512] GEMMs ran 15 % faster in its training step
    than the forecast from the collections' rows of that size (benchmarks/results/
    real-models-cpu-trace.md)."""
    out = []
    for i in range(n):
        hidden = rng.choice(NET_HIDDEN) if not small else rng.choice((32, 64))
        if i % 4 == 3:
            seq = rng.choice(NET_SEQUENCES) if not small else rng.choice((16, 32))
            heads = hidden // 64 if not small else 2
            b = heads * max(1, (rng.choice(NET_TOKENS) if not small else 64) // seq)
            while b > 1 and b * seq * (seq + 128) > CAPS["flat"]:
                b //= 2
            shape = {"B": b, "M": seq, "N": 64, "K": seq} if (i // 4) % 2 == 0 else \
                {"B": b, "M": seq, "N": seq, "K": 64}
            out.append(("bmm", shape))
            continue
        ffn = rng.choice((4 * hidden, -(-8 * hidden // 3 // 256) * 256))
        d_in, d_out = rng.choice(((hidden, 3 * hidden), (hidden, hidden), (hidden, ffn), (ffn, hidden)))
        tokens = rng.choice(NET_TOKENS) if not small else rng.choice((32, 64))
        while tokens > 128 and tokens * (d_in + d_out) + d_in * d_out > CAPS["flat"]:
            tokens //= 2
        pass_ = i % 4  # 0 forward, 1 data gradient, 2 weight gradient
        shape = ({"B": 1, "M": tokens, "N": d_in, "K": d_out} if pass_ == 0 else
                 {"B": 1, "M": tokens, "N": d_out, "K": d_in} if pass_ == 1 else
                 {"B": 1, "M": d_out, "N": tokens, "K": d_in})
        out.append(("linear", shape))
    return out


# 3-D convolutions of video networks (R3D-18, R(2+1)D, X3D, SlowFast's slow path, VideoMAE's
# tubelet embedding) and volumetric ones (3-D U-Nets): frames per clip, and cube filters.
CONV3D_DEPTHS = (2, 4, 8, 16, 32)
CONV3D_FILTERS = (1, 3, 3, 3)


def conv3d_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """B x Input_Channel x Depth x Input_Size^2 inputs of a 3-D convolution by a cube filter
    (Kernel_Szie on every side, stride on every side, 'same' padding), the input and output under
    CAPS["conv3d"]."""
    out = []
    for _ in range(n):
        k = rng.choice(CONV3D_FILTERS)
        stride = 1 if rng.random() < 0.7 else 2
        depth = rng.choice(CONV3D_DEPTHS[:2] if small else CONV3D_DEPTHS)
        size = _dim(rng, 4, 16 if small else 112, False)
        cin, cout = _dim(rng, 3, 32 if small else 512, True), _dim(rng, 8, 32 if small else 512, True)
        batch, size = _fit(_dim(rng, 1, 2 if small else 32, False), size, max(cin, cout) * depth, CAPS["conv3d"], k)
        out.append({"B": batch, "Input_Channel": cin, "Output_Channel": cout, "Kernel_Szie": k,
                    "Input_Size": size, "Stride": stride, "Padding": k // 2, "Depth": depth})
    return out


def batchnorm_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """B x Input_Channel x Input_Size^2 inputs of a 2-D batch norm."""
    out = []
    for _ in range(n):
        real = _real(rng, small, BATCHNORM)
        if real:
            channels, size = real
        else:
            channels = _draw(rng, "batchnorm", "Input_Channel", 32, small, True)
            size = _draw(rng, "batchnorm", "Input_Size", 16, small)
        batch, size = _fit(_draw(rng, "batchnorm", "B", 4, small), size, channels, CAPS["batchnorm"])
        out.append({"B": batch, "Input_Channel": channels, "Input_Size": size})
    return out


def _flat(n: int, rng: random.Random, small: bool, family: str, table: dict[str, list[tuple]]) -> list[Shape]:
    """{B, H}: rows and columns, mostly aligned to 8, their product under CAPS["flat"]."""
    out = []
    for i in range(n):
        real = _real(rng, small, table)
        if real:
            rows, cols = real
        else:
            rows, cols = _draw(rng, family, "B", 64, small), _draw(rng, family, "H", 256, small, i % 4 != 3)
        while rows * cols > CAPS["flat"]:
            if rows > 1:
                rows //= 2
            else:
                cols //= 2
        out.append({"B": rows, "H": cols})
    return out


def activation_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """Inputs of element-wise ops and activations: tokens x features or images x C*H*W."""
    return _flat(n, rng, small, "activation", ACTIVATIONS)


def reduction_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """Inputs of sum and mean (reduced over either dimension)."""
    return _flat(n, rng, small, "reduction", REDUCTIONS)


def embedding_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """{Vocab, Dim, Tokens}: the table's rows and width, and the tokens looked up."""
    out = []
    for i in range(n):
        real = _real(rng, small, EMBEDDINGS)
        if real:
            vocab, dim, tokens = real
        else:
            vocab = _draw(rng, "embedding", "Vocab", 64, small)
            dim = _draw(rng, "embedding", "Dim", 32, small, i % 4 != 3)
            tokens = _draw(rng, "embedding", "Tokens", 64, small)
        while vocab * dim > CAPS["embedding"]:
            vocab //= 2
        while tokens > 1 and tokens * dim > CAPS["embedding_tokens"]:
            tokens //= 2
        out.append({"Vocab": vocab, "Dim": dim, "Tokens": tokens})
    return out


def crossentropy_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """{Tokens, Classes}: the logits' rows (images or tokens) and classes."""
    out = []
    for _ in range(n):
        real = _real(rng, small, CROSS_ENTROPY)
        if real:
            tokens, classes = real
        else:
            tokens = _draw(rng, "crossentropy", "Tokens", 64, small)
            classes = _draw(rng, "crossentropy", "Classes", 64, small)
        while tokens * classes > CAPS["crossentropy"]:
            if tokens > 1:
                tokens //= 2
            else:
                classes //= 2
        out.append({"Tokens": tokens, "Classes": classes})
    return out


def _random_transformer(rng: random.Random, small: bool) -> list[int]:
    hidden = 8 * _dim(rng, 1, 4, False) if small else 64 * _dim(rng, 1, 32, False)
    vocab = 0 if rng.random() < 0.3 else _dim(rng, 16 if small else 1000, 64 if small else 2**16, False)
    depth, fused = _dim(rng, 1, 2 if small else 48, False), rng.random() < 0.5
    sizes = transformer(depth, hidden, 4 * hidden, vocab, fused)
    while depth > 1 and sum(sizes) > CAPS["adamw"]:
        depth //= 2
        sizes = transformer(depth, hidden, 4 * hidden, vocab, fused)
    return sizes


def _random_cnn(rng: random.Random, small: bool) -> list[int]:
    base = 2 * _dim(rng, 1, 2, False) if small else 8 * _dim(rng, 2, 16, False)
    blocks = tuple(_dim(rng, 1, 1 if small else 8, False) for _ in range(4))
    return resnet(tuple(base * 2**s for s in range(4)), blocks, 10 if small else rng.choice([10, 1000]))


def _random_list(rng: random.Random, small: bool) -> list[int]:
    sizes = [_dim(rng, 1, 2**8 if small else 2**22, False) for _ in range(_dim(rng, 2, 8 if small else 512, False))]
    total = sum(sizes)
    return sizes if total <= CAPS["adamw"] else [max(1, s * CAPS["adamw"] // total) for s in sizes]


def adamw_shapes(n: int, rng: random.Random, small: bool = False) -> list[Shape]:
    """Parameter lists of one optimizer step: {Tensors, Elements, Largest, Chunks} (Chunks: the
    OPTIMIZER_CHUNK pieces the multi-tensor kernels walk) and `sizes`, each tensor's elements
    (not a column). About a third are real models' lists (network_shapes.PARAMETER_LISTS), the
    rest transformers and ResNets of random depth and width, and random lists."""
    out = []
    for _ in range(n):
        if not small and rng.random() < REAL_SHARE:
            sizes = PARAMETER_LISTS[rng.choice(sorted(PARAMETER_LISTS))]()
        else:
            sizes = rng.choice([_random_transformer, _random_cnn, _random_list])(rng, small)
        out.append({"Tensors": len(sizes), "Elements": sum(sizes), "Largest": max(sizes),
                    "Chunks": sum(math.ceil(s / OPTIMIZER_CHUNK) for s in sizes), "sizes": tuple(sizes)})
    return out
