"""What real networks run, per op family of the kernel collector: the layers of MobileNet-v2/v3,
EfficientNet-B0, ConvNeXt-T, ResNet-50, ResNeXt, RegNetY, and the tensors of BERT, GPT-2, ViT and
T5 at common training sizes. The shape generators (kernel_shapes.py) draw part of their shapes
from these tables and size their random ranges to contain them; the tests check both. Torch-free.

Layer tables are per sample, at a 224x224 input (torchvision's definitions: inverted residual
blocks expand, filter depthwise, squeeze-excite on a 1x1 map, project); the generators pick the
batch. Flat tables (element-wise, reductions, embeddings, losses) are at a training batch:
BERT-base 32 x 512 tokens, GPT-2 8 x 1024, ViT-B/16 256 x 197, T5-small 32 x 512, CNNs 128-256
images.
"""
from __future__ import annotations

# Depthwise convolutions: (channels, input size, kernel, stride), groups == channels.
DEPTHWISE = {
    "mobilenet_v2": [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 3, 2), (192, 28, 3, 1),
                     (192, 28, 3, 2), (384, 14, 3, 1), (576, 14, 3, 1), (576, 14, 3, 2), (960, 7, 3, 1)],
    "mobilenet_v3_large": [(16, 112, 3, 1), (64, 112, 3, 2), (72, 56, 3, 1), (72, 56, 5, 2), (120, 28, 5, 1),
                           (240, 28, 3, 2), (200, 14, 3, 1), (184, 14, 3, 1), (480, 14, 3, 1), (672, 14, 3, 1),
                           (672, 14, 5, 2), (960, 7, 5, 1)],
    "efficientnet_b0": [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 5, 2), (240, 28, 5, 1),
                        (240, 28, 3, 2), (480, 14, 3, 1), (480, 14, 5, 1), (672, 14, 5, 1), (672, 14, 5, 2),
                        (1152, 7, 5, 1), (1152, 7, 3, 1)],
    "convnext_tiny": [(96, 56, 7, 1), (192, 28, 7, 1), (384, 14, 7, 1), (768, 7, 7, 1)],
}
# Grouped 3x3 convolutions: (channels, groups, input size, stride), in == out channels.
GROUPED = {
    "resnext50_32x4d": [(128, 32, 56, 1), (256, 32, 56, 2), (256, 32, 28, 1), (512, 32, 28, 2), (512, 32, 14, 1),
                        (1024, 32, 14, 2), (1024, 32, 7, 1)],
    "resnext101_32x8d": [(256, 32, 56, 1), (512, 32, 56, 2), (512, 32, 28, 1), (1024, 32, 28, 2),
                         (1024, 32, 14, 1), (2048, 32, 14, 2), (2048, 32, 7, 1)],
    "regnet_y_400mf": [(48, 6, 112, 2), (104, 13, 56, 2), (104, 13, 28, 1), (208, 26, 28, 2), (208, 26, 14, 1),
                       (440, 55, 14, 2), (440, 55, 7, 1)],
}
# 1x1 convolutions: (in, out, input size, stride); size 1: squeeze-excitation on pooled maps.
POINTWISE = {
    "resnet50": [(64, 64, 56, 1), (64, 256, 56, 1), (256, 64, 56, 1), (256, 128, 56, 1), (128, 512, 28, 1),
                 (256, 512, 56, 2), (512, 128, 28, 1), (512, 256, 28, 1), (256, 1024, 14, 1), (512, 1024, 28, 2),
                 (1024, 256, 14, 1), (1024, 512, 14, 1), (512, 2048, 7, 1), (1024, 2048, 14, 2), (2048, 512, 7, 1)],
    "resnext50_32x4d": [(64, 128, 56, 1), (128, 256, 56, 1), (256, 128, 56, 1), (256, 256, 56, 1),
                        (256, 512, 28, 1), (512, 256, 28, 1), (512, 512, 28, 1), (512, 1024, 14, 1),
                        (1024, 512, 14, 1), (1024, 1024, 14, 1), (1024, 2048, 7, 1), (2048, 1024, 7, 1)],
    "mobilenet_v2": [(32, 16, 112, 1), (16, 96, 112, 1), (96, 24, 56, 1), (24, 144, 56, 1), (144, 24, 56, 1),
                     (144, 32, 28, 1), (32, 192, 28, 1), (192, 32, 28, 1), (192, 64, 14, 1), (64, 384, 14, 1),
                     (384, 64, 14, 1), (384, 96, 14, 1), (96, 576, 14, 1), (576, 96, 14, 1), (576, 160, 7, 1),
                     (160, 960, 7, 1), (960, 160, 7, 1), (960, 320, 7, 1), (320, 1280, 7, 1)],
    "mobilenet_v3_large": [(16, 16, 112, 1), (16, 64, 112, 1), (64, 24, 56, 1), (24, 72, 56, 1), (72, 24, 56, 1),
                           (72, 40, 28, 1), (40, 120, 28, 1), (120, 40, 28, 1), (40, 240, 28, 1), (240, 80, 14, 1),
                           (80, 200, 14, 1), (200, 80, 14, 1), (80, 184, 14, 1), (184, 80, 14, 1), (80, 480, 14, 1),
                           (480, 112, 14, 1), (112, 672, 14, 1), (672, 112, 14, 1), (672, 160, 7, 1),
                           (160, 960, 7, 1), (960, 160, 7, 1),
                           (72, 24, 1, 1), (24, 72, 1, 1), (120, 32, 1, 1), (32, 120, 1, 1), (480, 120, 1, 1),
                           (120, 480, 1, 1), (672, 168, 1, 1), (168, 672, 1, 1), (960, 240, 1, 1), (240, 960, 1, 1)],
    "efficientnet_b0": [(32, 16, 112, 1), (16, 96, 112, 1), (96, 24, 56, 1), (24, 144, 56, 1), (144, 24, 56, 1),
                        (144, 40, 28, 1), (40, 240, 28, 1), (240, 40, 28, 1), (240, 80, 14, 1), (80, 480, 14, 1),
                        (480, 80, 14, 1), (480, 112, 14, 1), (112, 672, 14, 1), (672, 112, 14, 1), (672, 192, 7, 1),
                        (192, 1152, 7, 1), (1152, 192, 7, 1), (1152, 320, 7, 1), (320, 1280, 7, 1),
                        (32, 8, 1, 1), (8, 32, 1, 1), (96, 4, 1, 1), (4, 96, 1, 1), (144, 6, 1, 1), (6, 144, 1, 1),
                        (240, 10, 1, 1), (10, 240, 1, 1), (480, 20, 1, 1), (20, 480, 1, 1), (672, 28, 1, 1),
                        (28, 672, 1, 1), (1152, 48, 1, 1), (48, 1152, 1, 1)],
}
# Batch norm inputs: (channels, size).
BATCHNORM = {
    "resnet50": [(64, 112), (64, 56), (256, 56), (128, 56), (128, 28), (512, 28), (256, 28), (256, 14),
                 (1024, 14), (512, 14), (512, 7), (2048, 7)],
    "mobilenet_v2": [(32, 112), (16, 112), (96, 112), (96, 56), (24, 56), (144, 56), (144, 28), (32, 28),
                     (192, 28), (192, 14), (64, 14), (384, 14), (96, 14), (576, 14), (576, 7), (160, 7), (960, 7),
                     (320, 7), (1280, 7)],
    "efficientnet_b0": [(32, 112), (16, 112), (96, 112), (96, 56), (24, 56), (144, 56), (144, 28), (40, 28),
                        (240, 28), (240, 14), (80, 14), (480, 14), (112, 14), (672, 14), (672, 7), (192, 7),
                        (1152, 7), (320, 7), (1280, 7)],
    "resnext101_32x8d": [(256, 56), (512, 56), (512, 28), (1024, 28), (1024, 14), (2048, 14), (2048, 7)],
}
# Element-wise and activation inputs, (rows, columns): tokens x features, or images x C*H*W.
ACTIVATIONS = {
    "bert_base": [(16384, 3072), (16384, 768)],            # GELU on the FFN, residual adds
    "gpt2_small": [(8192, 3072), (8192, 768)],             # GELU (tanh)
    "vit_b16": [(50432, 3072), (50432, 768)],
    "t5_small": [(16384, 2048), (16384, 512)],             # ReLU on the FFN
    "resnet50": [(256, 802816), (256, 200704), (256, 100352)],  # ReLU at 64@112, 64@56, 2048@7
    "mobilenet_v2": [(128, 1204224), (128, 47040)],        # ReLU6 at 96@112, 960@7
    "mobilenet_v3_large": [(128, 200704), (128, 188160), (128, 72), (128, 960)],  # hardswish; SE hardsigmoid
    "efficientnet_b0": [(128, 401408), (128, 1204224), (128, 56448), (128, 96), (128, 1152)],  # SiLU; SE sigmoid
}
# Reductions (rows, columns), summed or averaged over either: bias gradients (over tokens),
# squeeze-excitation and global pooling (over H*W), RMS norm statistics, a loss's mean.
REDUCTIONS = {
    "bert_base": [(16384, 3072), (16384, 768)],
    "gpt2_small": [(8192, 2304), (1, 8192)],
    "vit_b16": [(50432, 768)],
    "t5_small": [(16384, 512), (1, 16384)],
    "resnet50": [(524288, 49)],                            # 256 x 2048 channels x 7x7
    "efficientnet_b0": [(4096, 12544), (12288, 3136), (147456, 49)],
    "mobilenet_v3_large": [(122880, 49)],
}
# Embeddings: (vocabulary, dimension, tokens).
EMBEDDINGS = {
    "bert_base": [(30522, 768, 16384), (512, 768, 16384), (2, 768, 16384)],
    "gpt2": [(50257, 768, 8192), (1024, 768, 8192), (50257, 1024, 8192), (50257, 1600, 4096)],
    "t5": [(32128, 512, 16384), (32128, 768, 16384)],
    "llama_7b": [(32000, 4096, 4096)],
    "xlm_roberta_base": [(250002, 768, 8192)],
}
# Cross-entropy: (tokens, classes).
CROSS_ENTROPY = {
    "imagenet": [(256, 1000), (32, 1000)], "cifar10": [(128, 10)], "bert_base_mlm": [(16384, 30522)],
    "gpt2": [(8192, 50257)], "t5_small": [(16384, 32128), (4096, 32128)], "llama_7b": [(4096, 32000)],
}


def _transformer_layer(d: int, ffn: int, fused_qkv: bool) -> list[int]:
    """One pre- or post-norm encoder layer with biases: attention, two norms, the MLP."""
    attention = [3 * d * d, 3 * d] if fused_qkv else [d * d, d] * 3
    return attention + [d * d, d, d, d, ffn * d, ffn, ffn * d, d, d, d]


def bert_base() -> list[int]:
    embeddings = [30522 * 768, 512 * 768, 2 * 768, 768, 768]
    return embeddings + _transformer_layer(768, 3072, False) * 12 + [768 * 768, 768]  # + pooler


def gpt2_small() -> list[int]:
    return [50257 * 768, 1024 * 768] + _transformer_layer(768, 3072, True) * 12 + [768, 768]


def vit_b16() -> list[int]:
    stem = [768 * 3 * 16 * 16, 768, 768, 197 * 768]  # patch conv, its bias, class token, positions
    return stem + _transformer_layer(768, 3072, True) * 12 + [768, 768, 1000 * 768, 1000]


def t5_small() -> list[int]:
    """No biases, RMS norms, relative position biases, the embedding shared with the LM head."""
    d, ffn = 512, 2048
    encoder = ([d * d] * 4 + [d] + [ffn * d, ffn * d] + [d]) * 6 + [32 * 8, d]
    decoder = ([d * d] * 4 + [d] + [d * d] * 4 + [d] + [ffn * d, ffn * d] + [d]) * 6 + [32 * 8, d]
    return [32128 * d] + encoder + decoder


def transformer(depth: int, hidden: int, ffn: int, vocab: int, fused_qkv: bool) -> list[int]:
    """A token embedding (none for vocab 0), `depth` layers, a final norm."""
    return ([vocab * hidden] if vocab else []) + _transformer_layer(hidden, ffn, fused_qkv) * depth + [hidden, hidden]


def resnet(widths: tuple[int, ...], blocks: tuple[int, ...], classes: int) -> list[int]:
    """A bottleneck ResNet (torchvision's): conv weights (no biases), a batch norm's weight and
    bias after each, a projection shortcut in each stage's first block, the classifier."""
    stem = widths[0]
    sizes = [stem * 3 * 7 * 7, stem, stem]
    cin = stem
    for width, count in zip(widths, blocks):
        out = 4 * width
        for b in range(count):
            sizes += [width * cin, width, width, width * width * 9, width, width, out * width, out, out]
            if b == 0:
                sizes += [out * cin, out, out]
            cin = out
    return sizes + [classes * cin, classes]


def resnet50() -> list[int]:
    return resnet((64, 128, 256, 512), (3, 4, 6, 3), 1000)


# AdamW parameter lists (one entry per tensor: its element count).
PARAMETER_LISTS = {"bert_base": bert_base, "gpt2_small": gpt2_small, "vit_b16": vit_b16, "t5_small": t5_small,
                   "resnet50": resnet50}


def layers(table: dict[str, list[tuple]]) -> list[tuple]:
    """Every distinct layer of a table, in order."""
    return list(dict.fromkeys(layer for net in table.values() for layer in net))
