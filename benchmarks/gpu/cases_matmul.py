"""Matrix products and attention cases of the kernel collector: bmm and linear (family gemm) and
F.scaled_dot_product_attention forced to each backend (attention)."""
from __future__ import annotations

import contextlib
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


def _sdpa_cases(shapes: list[dict[str, int]], device: str,
                backends: dict[str, Callable[[], contextlib.AbstractContextManager]] | None,
                causals: tuple[bool, ...], masked: tuple[bool, ...], stem: str | None) -> list[Case]:
    """Every backend x precision x causal x mask x {fwd, fwd+bwd} of each shape. A combination
    the backend does not run (dtype, head dim, mask, device) fails its warm-up and is dropped
    then. A masked case is op sdpa_mask (no model reads it yet), its shape's `Mask` 1."""
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
                    for mask in masked:
                        shape = {**s, "Causal": int(causal), "Backend": name}
                        bias = padding_mask(s, dt, device) if mask else None
                        if len(masked) > 1:
                            shape["Mask"] = int(mask)

                        def fwd(q=q, k=k, v=v, force=force, causal=causal, bias=bias):
                            with force():
                                return sdpa(q, k, v, attn_mask=bias, is_causal=causal)

                        def fwd_bwd(fwd=fwd, q=q, k=k, v=v, grad=grad):
                            return torch.autograd.grad(fwd(), (q, k, v), grad)
                        op = "sdpa_mask" if mask else "sdpa"
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
    return _sdpa_cases(shapes, device, backends, (False, True), (False,), None)


def encoder_attention_cases(shapes: list[dict[str, int]], device: str,
                            backends: dict[str, Callable[[], contextlib.AbstractContextManager]] | None = None
                            ) -> list[Case]:
    """Every backend x precision x {no mask, padding mask} x {fwd, fwd+bwd} of each shape, not
    causal (sdpa_enc_<precision>.csv: the unmasked rows read as the attention family's)."""
    return _sdpa_cases(shapes, device, backends, (False,), (False, True), "sdpa_enc")
