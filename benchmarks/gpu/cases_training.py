"""Cases of the kernel collector for the rest of a training step, in fp32 and bf16: embedding
lookups and their backward (family embedding), the cross-entropy loss (crossentropy), one
AdamW step over a parameter list, fused and foreach (adamw), and the other multi-tensor kernels
of a training step over such a list (multitensor): an SGD step with momentum, fused and
foreach, GradScaler's unscale and gradient clipping."""
from __future__ import annotations

from typing import Any

import torch
from kernel_case import DTYPES, MEMORY_PRECISIONS, Case, no_grad

F = torch.nn.functional
A = torch.ops.aten
ADAMW_IMPLEMENTATIONS = ("fused", "foreach")
IGNORE_INDEX = -100  # F.cross_entropy's default
MEAN = 1  # the reduction enum of aten's nll_loss (0 none, 1 mean, 2 sum)


def embedding_backward(grad: torch.Tensor, ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """The table's gradient as autograd computes it for F.embedding (no padding index, no
    scaling by frequency)."""
    return A.embedding_dense_backward(grad, ids, vocab, -1, False)


def embedding_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """F.embedding (fwd: a gather of Tokens rows of the Vocab x Dim table) and the aten op its
    backward runs, embedding_dense_backward (bwd: the gradient of the whole table from the
    tokens' gradients); uniformly drawn token ids. The table's dtype is the precision (autocast
    leaves embeddings in fp32; bf16 is a model cast to bf16)."""
    cases = []
    for s in shapes:
        vocab, dim, tokens = s["Vocab"], s["Dim"], s["Tokens"]
        for prec in MEMORY_PRECISIONS:
            table = torch.randn(vocab, dim, device=device, dtype=DTYPES[prec])
            ids = torch.randint(0, vocab, (tokens,), device=device)
            grad = torch.randn(tokens, dim, device=device, dtype=DTYPES[prec])
            cases.append(Case("embedding", "fwd", prec, dict(s), lambda t=table, i=ids: F.embedding(i, t)))
            cases.append(Case("embedding", "bwd", prec, dict(s),
                              lambda g=grad, i=ids, v=vocab: embedding_backward(g, i, v)))
    return cases


def crossentropy_cases(shapes: list[dict[str, int]], device: str) -> list[Case]:
    """F.cross_entropy (mean over Tokens, Classes logits) whole, fwd and fwd+bwd (autograd), and
    the aten ops a traced step sees it as: log_softmax and nll_loss, each fwd and bwd. All in
    crossentropy_<precision>.csv, OPName cross_entropy, log_softmax or nll_loss; the logits'
    dtype is the precision."""
    cases = []
    for s in shapes:
        tokens, classes = s["Tokens"], s["Classes"]
        for prec in MEMORY_PRECISIONS:
            dt = DTYPES[prec]
            logits = torch.randn(tokens, classes, device=device, dtype=dt, requires_grad=True)
            target = torch.randint(0, classes, (tokens,), device=device)
            plain = logits.detach()
            logp = A._log_softmax(plain, 1, False)
            _, total = A.nll_loss_forward(logp, target, None, MEAN, IGNORE_INDEX)
            seed = torch.ones((), device=device, dtype=dt)
            grad_logp = A.nll_loss_backward(seed, logp, target, None, MEAN, IGNORE_INDEX, total)

            def loss(z=logits, t=target):
                return F.cross_entropy(z, t)
            parts = [
                ("cross_entropy", "fwd", lambda loss=loss: no_grad(loss)),
                ("cross_entropy", "fwd+bwd", lambda loss=loss, z=logits: torch.autograd.grad(loss(), z)),
                ("log_softmax", "fwd", lambda z=plain: A._log_softmax(z, 1, False)),
                ("log_softmax", "bwd", lambda g=grad_logp, y=logp, dt=dt: A._log_softmax_backward_data(g, y, 1, dt)),
                ("nll_loss", "fwd", lambda y=logp, t=target: A.nll_loss_forward(y, t, None, MEAN, IGNORE_INDEX)),
                ("nll_loss", "bwd", lambda g=seed, y=logp, t=target, n=total:
                 A.nll_loss_backward(g, y, t, None, MEAN, IGNORE_INDEX, n)),
            ]
            cases += [Case(op, phase, prec, dict(s), run, "crossentropy") for op, phase, run in parts]
    return cases


def adamw_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    """One torch.optim.AdamW step (Phase step) over a list of parameters of the shape's `sizes`,
    with gradients, for each implementation (`Impl`: fused, one multi-tensor kernel for the
    whole update; foreach, a multi-tensor kernel per arithmetic step). Precision is the
    parameters' dtype (and so their gradients' and states'). The states are made by a first
    step here, so a pass counts their memory; an implementation this device or dtype lacks
    leaves its case out."""
    cases = []
    for s in shapes:
        columns = {k: v for k, v in s.items() if k != "sizes"}
        for prec in MEMORY_PRECISIONS:
            for impl in ADAMW_IMPLEMENTATIONS:
                params = [torch.randn(n, device=device, dtype=DTYPES[prec], requires_grad=True) for n in s["sizes"]]
                for p in params:
                    p.grad = torch.randn_like(p)
                opt = torch.optim.AdamW(params, lr=1e-4, **{impl: True})
                try:
                    opt.step()
                except (RuntimeError, NotImplementedError, ValueError):
                    continue
                cases.append(Case("adamw", "step", prec, {**columns, "Impl": impl}, opt.step))
    return cases


def multitensor_cases(shapes: list[dict[str, Any]], device: str) -> list[Case]:
    """The multi-tensor kernels of a step besides AdamW's, over the parameter lists of the adamw
    family (each tensor's gradient, in the precision's dtype), in multitensor_<precision>.csv:
    `sgd` (one torch.optim.SGD step with momentum 0.9, after a first step made the momentum
    buffers; `Impl` fused or foreach), `amp_unscale` (GradScaler's unscale of the gradients,
    torch._amp_foreach_non_finite_check_and_unscale_, on fp32 gradients only as GradScaler
    requires) and `clip_grad_norm` (torch.nn.utils.clip_grad_norm_ to 1.0 with foreach: a
    _foreach_norm, the norm of the norms and a _foreach_mul_). Phase step."""
    cases = []
    for s in shapes:
        columns = {k: v for k, v in s.items() if k != "sizes"}
        for prec in MEMORY_PRECISIONS:
            params = [torch.randn(n, device=device, dtype=DTYPES[prec], requires_grad=True) for n in s["sizes"]]
            for p in params:
                p.grad = torch.randn_like(p)
            for impl in ADAMW_IMPLEMENTATIONS:
                opt = torch.optim.SGD(params, lr=1e-4, momentum=0.9, **{impl: True})
                try:
                    opt.step()
                except (RuntimeError, NotImplementedError, ValueError):
                    continue
                cases.append(Case("sgd", "step", prec, {**columns, "Impl": impl}, opt.step, "multitensor"))
            grads = [p.grad for p in params]
            if prec == "fp32":
                found_inf = torch.zeros(1, device=device)
                inv_scale = torch.ones(1, device=device)
                cases.append(Case("amp_unscale", "step", prec, {**columns, "Impl": "foreach"},
                                  lambda g=grads, f=found_inf, i=inv_scale:
                                  torch._amp_foreach_non_finite_check_and_unscale_(g, f, i), "multitensor"))
            cases.append(Case("clip_grad_norm", "step", prec, {**columns, "Impl": "foreach"},
                              lambda ps=params: torch.nn.utils.clip_grad_norm_(ps, 1.0, foreach=True), "multitensor"))
    return cases
