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


def attention_cases(shapes: list[dict[str, int]], device: str,
                    backends: dict[str, Callable[[], contextlib.AbstractContextManager]] | None = None) -> list[Case]:
    """Every backend x precision x causal x {fwd, fwd+bwd} of each shape. A combination the
    backend does not run (dtype, head dim, device) fails its warm-up and is dropped then."""
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
                for causal in (False, True):
                    shape = {**s, "Causal": int(causal), "Backend": name}

                    def fwd(q=q, k=k, v=v, force=force, causal=causal):
                        with force():
                            return sdpa(q, k, v, is_causal=causal)

                    def fwd_bwd(fwd=fwd, q=q, k=k, v=v, grad=grad):
                        return torch.autograd.grad(fwd(), (q, k, v), grad)
                    cases.append(Case("sdpa", "fwd", prec, dict(shape), fwd))
                    cases.append(Case("sdpa", "fwd+bwd", prec, dict(shape), fwd_bwd))
    return cases
