"""T5-small built from its configuration (Raffel et al. 2020; transformers' `T5Config` for
t5-small: d_model 512, d_ff 2048, 6 + 6 layers, 8 heads of 64, 32 relative-position buckets up
to distance 128, dropout 0.1, ReLU feed-forward (T5 v1.0; v1.1 has the gated GELU one), no
biases, tied and rescaled output embedding), written as transformers' eager T5 computes it:
RMS layer norm in fp32, unscaled attention scores plus a learned relative position bias
(computed by the first layer of each stack, reused by the others), softmax in fp32. Parameter
count 60,506,624, as t5-small. Plain torch: no transformers import, nothing downloaded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class T5Config:
    vocab: int = 32128
    width: int = 512
    ff: int = 2048
    heads: int = 8
    head_dim: int = 64
    layers: int = 6
    buckets: int = 32
    max_distance: int = 128
    dropout: float = 0.1
    eps: float = 1e-6


class RMSNorm(nn.Module):
    """T5's layer norm: scale only, no mean subtraction, no bias; statistics in fp32."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def relative_position_bucket(relative: torch.Tensor, bidirectional: bool, buckets: int,
                             max_distance: int) -> torch.Tensor:
    """Half the buckets for exact offsets, the rest logarithmic up to max_distance (T5, 2.1)."""
    out = torch.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        out += (relative > 0).to(torch.long) * buckets
        relative = torch.abs(relative)
    else:
        relative = -torch.min(relative, torch.zeros_like(relative))
    exact = buckets // 2
    large = exact + (torch.log(relative.float() / exact) / math.log(max_distance / exact)
                     * (buckets - exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return out + torch.where(relative < exact, relative, large)


class Attention(nn.Module):
    def __init__(self, cfg: T5Config, relative_bias: bool, bidirectional: bool) -> None:
        super().__init__()
        inner = cfg.heads * cfg.head_dim
        self.cfg, self.bidirectional = cfg, bidirectional
        self.q, self.k, self.v = (nn.Linear(cfg.width, inner, bias=False) for _ in range(3))
        self.o = nn.Linear(inner, cfg.width, bias=False)
        self.relative_bias = nn.Embedding(cfg.buckets, cfg.heads) if relative_bias else None

    def position_bias(self, queries: int, keys: int, device: torch.device) -> torch.Tensor:
        if self.relative_bias is None:  # cross-attention: no position bias, only the mask
            return torch.zeros(1, self.cfg.heads, queries, keys, device=device)
        relative = (torch.arange(keys, dtype=torch.long, device=device)[None, :]
                    - torch.arange(queries, dtype=torch.long, device=device)[:, None])
        bucket = relative_position_bucket(relative, self.bidirectional, self.cfg.buckets,
                                          self.cfg.max_distance)
        return self.relative_bias(bucket).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        b, s, _ = x.shape
        kv = x if memory is None else memory

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, -1, self.cfg.heads, self.cfg.head_dim).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(kv)), heads(self.v(kv))
        scores = torch.matmul(q, k.transpose(3, 2))  # T5 does not scale by 1/sqrt(head_dim)
        scores += bias
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        weights = F.dropout(weights, self.cfg.dropout, self.training)
        y = torch.matmul(weights, v).transpose(1, 2).contiguous().view(b, s, -1)
        return self.o(y)


class Sublayer(nn.Module):
    """Pre-norm residual sublayer: x + dropout(f(norm(x)))."""

    def __init__(self, cfg: T5Config, body: nn.Module) -> None:
        super().__init__()
        self.norm, self.body, self.drop = RMSNorm(cfg.width, cfg.eps), body, nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, *args: torch.Tensor | None) -> torch.Tensor:
        return x + self.drop(self.body(self.norm(x), *args))


class FeedForward(nn.Module):
    def __init__(self, cfg: T5Config) -> None:
        super().__init__()
        self.wi = nn.Linear(cfg.width, cfg.ff, bias=False)
        self.wo = nn.Linear(cfg.ff, cfg.width, bias=False)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wo(self.drop(F.relu(self.wi(x))))


class Block(nn.Module):
    def __init__(self, cfg: T5Config, first: bool, decoder: bool) -> None:
        super().__init__()
        self.attn = Sublayer(cfg, Attention(cfg, first, bidirectional=not decoder))
        self.cross = Sublayer(cfg, Attention(cfg, False, False)) if decoder else None
        self.ff = Sublayer(cfg, FeedForward(cfg))

    def forward(self, x: torch.Tensor, bias: torch.Tensor, memory: torch.Tensor | None = None,
                cross_bias: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attn(x, bias)
        if self.cross is not None:
            x = self.cross(x, cross_bias, memory)
        return self.ff(x)


class Stack(nn.Module):
    def __init__(self, cfg: T5Config, embed: nn.Embedding, decoder: bool) -> None:
        super().__init__()
        self.embed, self.decoder = embed, decoder
        self.blocks = nn.ModuleList(Block(cfg, i == 0, decoder) for i in range(cfg.layers))
        self.norm = RMSNorm(cfg.width, cfg.eps)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, idx: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        b, s = idx.shape
        x = self.drop(self.embed(idx))
        first = self.blocks[0]
        # transformers adds the (all-valid) padding mask, or the causal mask, to the bias once.
        if self.decoder:
            causal = torch.full((s, s), torch.finfo(x.dtype).min, device=idx.device).triu(1)
            bias = first.attn.body.position_bias(s, s, idx.device) + causal.expand(b, 1, s, s)
        else:
            bias = first.attn.body.position_bias(s, s, idx.device) + torch.zeros(b, 1, 1, s, device=idx.device)
        cross_bias = None
        if memory is not None:
            keys = memory.shape[1]
            cross_bias = first.cross.body.position_bias(s, keys, idx.device) + torch.zeros(
                b, 1, 1, keys, device=idx.device)
        for block in self.blocks:
            x = block(x, bias, memory, cross_bias)
        return self.drop(self.norm(x))


class T5(nn.Module):
    def __init__(self, cfg: T5Config = T5Config()) -> None:
        super().__init__()
        self.cfg = cfg
        self.shared = nn.Embedding(cfg.vocab, cfg.width)
        self.encoder = Stack(cfg, self.shared, decoder=False)
        self.decoder = Stack(cfg, self.shared, decoder=True)

    def forward(self, source: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The training loss: teacher forcing on `labels` shifted right (start token 0)."""
        target_in = labels.new_zeros(labels.shape)
        target_in[:, 1:] = labels[:, :-1].clone()
        memory = self.encoder(source)
        y = self.decoder(target_in, memory) * self.cfg.width ** -0.5  # tied output embedding
        logits = F.linear(y, self.shared.weight)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
