"""_engine.learned_op_parts: the learned-family parts the engine forecasts each op of a trace
from, for trainers that read measured rows out of GPU traces."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from habitat import _engine

TRACES = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "h100-sxm5-80gb" / "traces"


def _parts(name: str) -> dict[int, tuple[str, list]]:
    with gzip.open(TRACES / name, "rt", encoding="utf-8") as f:
        text = f.read()
    return {op_id: (op_class, parts) for op_id, op_class, parts in _engine.learned_op_parts(text, -1)}


def test_gpt2_fp32_efficient_attention_is_its_real_problem() -> None:
    # GPT-2 small, batch 8, 12 heads, 512 causal tokens: the kernel entry points' [B, S, H, D]
    # layout is read as such (not 4096 heads of 12 tokens).
    attention = [parts for op_class, parts in _parts("gpt2_small_fp32.json.gz").values() if op_class == "attention"]
    assert attention
    for parts in attention:
        (family, shape, precision, scale), = parts
        assert family == "attention" and precision == "fp32" and scale == 1.0
        assert (shape["batch_heads"], shape["l"], shape["s"], shape["causal"]) == (96, 512, 512, 1)


def test_bf16_gemms_are_tensor_core_parts_and_memory_bound_ones_fp32() -> None:
    by_class: dict[str, set[str]] = {}
    for op_class, parts in _parts("gpt2_small_bf16.json.gz").values():
        for family, _shape, precision, _scale in parts:
            by_class.setdefault(f"{op_class}/{family}", set()).add(precision)
    assert "bf16" in by_class["gemm/gemm"]  # autocast's GEMMs (a few stay fp32 outside it)
    assert by_class["elementwise/elementwise"] == {"fp32"}  # the SIMT models' precision


def test_a_bad_step_is_named() -> None:
    with gzip.open(TRACES / "dcgan_fp32.json.gz", "rt", encoding="utf-8") as f:
        text = f.read()
    with pytest.raises(IndexError, match="out of range"):
        _engine.learned_op_parts(text, 5)
