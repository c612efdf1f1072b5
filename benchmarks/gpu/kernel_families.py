"""The op families of the kernel collector (collect_kernels.py --families): for each, its shapes,
its cases, how many shapes by default and its share of the time budget."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cases_conv import batchnorm_cases, conv3d_cases, conv_cases, gconv_cases, pointwise_cases, stem_cases
from cases_matmul import attention_cases, encoder_attention_cases, gemm_cases, netgemm_cases, vocab_cases
from cases_memory import (
    activation_cases,
    elementwise_cases,
    large_norm_cases,
    layernorm_cases,
    reduction_cases,
    rmsnorm_cases,
    softmax_cases,
)
from cases_training import adamw_cases, crossentropy_cases, embedding_cases, multitensor_cases
from kernel_case import Case
from kernel_shapes import (
    activation_shapes,
    adamw_shapes,
    attention_shapes,
    batchnorm_shapes,
    conv3d_shapes,
    conv_shapes,
    crossentropy_shapes,
    embedding_shapes,
    encoder_attention_shapes,
    gconv_shapes,
    gemm_shapes,
    large_memory_shapes,
    memory_shapes,
    netgemm_shapes,
    pointwise_shapes,
    reduction_shapes,
    stem_shapes,
    vocab_shapes,
)


@dataclass(frozen=True)
class Family:
    shapes: Callable[..., list[Any]]            # (n, random.Random, small) -> shapes
    cases: Callable[[list[Any], str], list[Case]]  # (shapes, device) -> cases
    count: str            # the option giving the number of shapes: gemm, conv, attention or memory
    weight: float         # share of --budget-s (renormalised over the selected families)
    # --batch / this = shapes per profiler pass: an attention shape is up to 48 cases (backends x
    # precisions x causal x phases), an encoder's 72 (x 3 variants, not causal), a conv shape 15
    # holding their own tensors
    pass_divisor: int = 1


# In the default order of --families (all of them): the families of the 2026-11 collections
# first, as they ran then.
FAMILIES: dict[str, Family] = {
    "gemm": Family(gemm_shapes, gemm_cases, "gemm", 0.07),
    "conv": Family(conv_shapes, conv_cases, "conv", 0.12, 2),
    "attention": Family(attention_shapes, attention_cases, "attention", 0.06, 4),
    "elementwise": Family(activation_shapes, elementwise_cases, "memory", 0.02),
    "layernorm": Family(memory_shapes, layernorm_cases, "memory", 0.03),
    "softmax": Family(memory_shapes, softmax_cases, "memory", 0.03),
    "reduction": Family(reduction_shapes, reduction_cases, "memory", 0.03),
    "batchnorm": Family(batchnorm_shapes, batchnorm_cases, "memory", 0.05),
    "gconv": Family(gconv_shapes, gconv_cases, "conv", 0.08, 2),
    "pointwise": Family(pointwise_shapes, pointwise_cases, "conv", 0.08, 2),
    "activation": Family(activation_shapes, activation_cases, "memory", 0.04),
    "embedding": Family(embedding_shapes, embedding_cases, "memory", 0.03),
    "crossentropy": Family(crossentropy_shapes, crossentropy_cases, "memory", 0.04),
    "adamw": Family(adamw_shapes, adamw_cases, "memory", 0.04),
    "stem": Family(stem_shapes, stem_cases, "conv", 0.06, 2),
    "encoder": Family(encoder_attention_shapes, encoder_attention_cases, "attention", 0.04, 6),
    "rmsnorm": Family(memory_shapes, rmsnorm_cases, "memory", 0.02),
    "largenorm": Family(large_memory_shapes, large_norm_cases, "memory", 0.02),
    "conv3d": Family(conv3d_shapes, conv3d_cases, "conv", 0.04, 2),
    "vocab": Family(vocab_shapes, vocab_cases, "gemm", 0.04),
    "multitensor": Family(adamw_shapes, multitensor_cases, "memory", 0.03),
    "netgemm": Family(netgemm_shapes, netgemm_cases, "gemm", 0.03),
}
