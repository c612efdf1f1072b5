"""Matrix products and attention cases of the kernel collector: bmm and linear (family gemm) and
F.scaled_dot_product_attention forced to each backend (attention)."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

import torch
from kernel_case import DTYPES, Case

GEMM_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
SDPA_PRECISIONS = ("bf16", "fp16", "fp32")
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")


def gemm_cases(shapes: list[tuple[str, dict[str, int]]], device: str) -> list[Case]:
    cases = []
    for op, s in shapes:
        b, m, k_red, n_out = s["B"], s["M"], s["N"], s["K"]
        for prec in GEMM_PRECISIONS:
            dt = DTYPES[prec]
            if op == "bmm":
                a = torch.randn(b, m, k_red, device=device, dtype=dt)
                w = torch.randn(b, k_red, n_out, device=device, dtype=dt)
                run = (lambda a=a, w=w: torch.bmm(a, w))
            else:
                a = torch.randn(m, k_red, device=device, dtype=dt)
                w = torch.randn(n_out, k_red, device=device, dtype=dt)
                run = (lambda a=a, w=w: torch.nn.functional.linear(a, w))
            cases.append(Case(op, "fwd", prec, dict(s), run))
    return cases


def vocab_cases(shapes: list[tuple[str, dict[str, int]]], device: str) -> list[Case]:
    """gemm's cases of a language-model head's shapes (kernel_shapes.vocab_shapes), in their own
    files, linearvocab_<precision>.csv (OPName linear: the GEMM model's linear rows)."""
    return [dataclasses.replace(c, stem="linearvocab") for c in gemm_cases(shapes, device)]


def netgemm_cases(shapes: list[tuple[str, dict[str, int]]], device: str) -> list[Case]:
    """gemm's cases of transformer layers' shapes (kernel_shapes.netgemm_shapes), in their own
    files, gemmnet_<precision>.csv (OPName linear or bmm: the GEMM model's rows)."""
    return [dataclasses.replace(c, stem="gemmnet") for c in gemm_cases(shapes, device)]


def sdpa_backends() -> dict[str, Callable[[], contextlib.AbstractContextManager]]:
    """Backend name -> a context manager forcing it, for the backends this torch has."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3: the older flag-based API (no cuDNN backend)
        flags = {"flash": "enable_flash", "efficient": "enable_mem_efficient", "math": "enable_math"}

        def legacy(name: str) -> Callable[[], contextlib.AbstractContextManager]:
            kw = {f: f == flags[name] for f in flags.values()}
            return lambda: torch.backends.cuda.sdp_kernel(**kw)
        return {name: legacy(name) for name in SDPA_BACKENDS if name in flags}
    members = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
               "cudnn": "CUDNN_ATTENTION", "math": "MATH"}

    def forcing(backend: object) -> Callable[[], contextlib.AbstractContextManager]:
        return lambda: sdpa_kernel([backend])
    return {name: forcing(getattr(SDPBackend, members[name]))
            for name in SDPA_BACKENDS if hasattr(SDPBackend, members[name])}


# An encoder's attention variants (mask, dropout probability): as measured by the attention
# family, with transformers' padding mask, and with training's attention dropout (BERT's and
# GPT-2's attention_probs_dropout_prob / attn_pdrop, 0.1), which the fused kernels draw inside.
PLAIN = ((False, 0.0),)
ENCODER_VARIANTS = ((False, 0.0), (True, 0.0), (False, 0.1))


def _sdpa_cases(shapes: list[dict[str, int]], device: str,
                backends: dict[str, Callable[[], contextlib.AbstractContextManager]] | None,
                causals: tuple[bool, ...], variants: tuple[tuple[bool, float], ...],
                stem: str | None) -> list[Case]:
    """Every backend x precision x causal x variant x {fwd, fwd+bwd} of each shape. A combination
    the backend does not run (dtype, head dim, mask, dropout, device) fails its warm-up and is
    dropped then. A masked case is op sdpa_mask, its shape's `Mask` 1; a dropout case op
    sdpa_dropout, its `Dropout` the probability (no model reads either yet)."""
    backends = sdpa_backends() if backends is None else backends
    sdpa = torch.nn.functional.scaled_dot_product_attention
    cases = []
    for s in shapes:
        for prec in SDPA_PRECISIONS:
            dt = DTYPES[prec]
            q = torch.randn(s["B"], s["H"], s["L"], s["E"], device=device, dtype=dt, requires_grad=True)
            k, v = (torch.randn(s["B"], s["H"], s["S"], s["E"], device=device, dtype=dt, requires_grad=True)
                    for _ in range(2))
            grad = torch.randn(s["B"], s["H"], s["L"], s["E"], device=device, dtype=dt)
            for name, force in backends.items():
                for causal in causals:
                    for mask, dropout in variants:
                        shape = {**s, "Causal": int(causal), "Backend": name}
                        bias = padding_mask(s, dt, device) if mask else None
                        if len(variants) > 1:
                            shape["Mask"] = int(mask)
                            shape["Dropout"] = dropout

                        def fwd(q=q, k=k, v=v, force=force, causal=causal, bias=bias, dropout=dropout):
                            with force():
                                return sdpa(q, k, v, attn_mask=bias, dropout_p=dropout, is_causal=causal)

                        def fwd_bwd(fwd=fwd, q=q, k=k, v=v, grad=grad):
                            return torch.autograd.grad(fwd(), (q, k, v), grad)
                        op = "sdpa_mask" if mask else "sdpa_dropout" if dropout else "sdpa"
                        cases.append(Case(op, "fwd", prec, dict(shape), fwd, stem))
                        cases.append(Case(op, "fwd+bwd", prec, dict(shape), fwd_bwd, stem))
    return cases


def padding_mask(s: dict[str, int], dtype: torch.dtype, device: str) -> torch.Tensor:
    """The additive mask an encoder pads its batch with, as transformers' SDPA path builds it: 0
    for the keys a sample has, the dtype's least value for its padding (the last eighth of the
    keys here), [B, 1, 1, S] expanded to [B, 1, L, S] (stride 0 along the queries)."""
    keep = torch.zeros(s["B"], 1, 1, s["S"], device=device, dtype=dtype)
    keep[..., s["S"] - s["S"] // 8:] = torch.finfo(dtype).min
    return keep.expand(s["B"], 1, s["L"], s["S"])


def attention_cases(shapes: list[dict[str, int]], device: str,
                    backends: dict[str, Callable[[], contextlib.AbstractContextManager]] | None = None) -> list[Case]:
    """Every backend x precision x causal x {fwd, fwd+bwd} of each shape (sdpa_<precision>.csv)."""
    return _sdpa_cases(shapes, device, backends, (False, True), PLAIN, None)


def encoder_attention_cases(shapes: list[dict[str, int]], device: str,
                            backends: dict[str, Callable[[], contextlib.AbstractContextManager]] | None = None
                            ) -> list[Case]:
    """Every backend x precision x ENCODER_VARIANTS x {fwd, fwd+bwd} of each shape, not causal
    (sdpa_enc_<precision>.csv: the plain rows read as the attention family's)."""
    return _sdpa_cases(shapes, device, backends, (False,), ENCODER_VARIANTS, "sdpa_enc")
