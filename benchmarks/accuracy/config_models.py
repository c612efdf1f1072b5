"""Transformer workloads built from their published configurations (no downloads, no
torchvision or transformers import): ViT-B/16 (Dosovitskiy et al. 2021; torchvision's
vit_b_16 sizes, attention dropout 0) and BERT-base with its masked-LM head (Devlin et al. 2019;
transformers' BertConfig defaults: attention and hidden dropout 0.1, GELU, tied decoder).
Each builder returns ``step(autocast)``, one AdamW training iteration, as benchmarks/gpu/
models.py does. BERT's attention dropout makes scaled_dot_product_attention take its unfused
math path on the CPU, which a CUDA GPU runs as one fused kernel.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

Step = Callable[[bool], None]


class Attention(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, w = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, s, w))


class Block(nn.Module):
    """Pre-norm (ViT) or post-norm (BERT) transformer layer."""

    def __init__(self, width: int, heads: int, attn_dropout: float, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.attn = Attention(width, heads, attn_dropout)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.drop(self.attn(self.norm1(x)))
            return x + self.drop(self.mlp(self.norm2(x)))
        x = self.norm1(x + self.drop(self.attn(x)))
        return self.norm2(x + self.drop(self.mlp(x)))


class ViT(nn.Module):
    def __init__(self, image: int = 224, patch: int = 16, width: int = 768, layers: int = 12,
                 heads: int = 12, classes: int = 1000) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, width, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, width))
        self.blocks = nn.Sequential(*[Block(width, heads, 0.0, 0.0, True) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class BertMLM(nn.Module):
    def __init__(self, vocab: int = 30522, width: int = 768, layers: int = 12, heads: int = 12,
                 positions: int = 512) -> None:
        super().__init__()
        self.words, self.positions = nn.Embedding(vocab, width), nn.Embedding(positions, width)
        self.types = nn.Embedding(2, width)
        self.norm = nn.LayerNorm(width)
        self.drop = nn.Dropout(0.1)
        self.layers = nn.Sequential(*[Block(width, heads, 0.1, 0.1, False) for _ in range(layers)])
        self.transform = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.words(idx) + self.positions(pos) + self.types(torch.zeros_like(idx))
        x = self.layers(self.drop(self.norm(x)))
        return F.linear(self.transform(x), self.words.weight, self.bias)  # tied decoder


def _autocast(device: torch.device, enabled: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def vit_b16(device: torch.device, batch: int = 8) -> Step:
    model = ViT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    x = torch.randn(batch, 3, 224, 224, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)

    def step(autocast: bool) -> None:
        with _autocast(device, autocast):
            loss = F.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def bert_base_mlm(device: torch.device, batch: int = 8, length: int = 128) -> Step:
    model = BertMLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    idx = torch.randint(0, 30522, (batch, length), device=device)
    labels = torch.randint(0, 30522, (batch, length), device=device)

    def step(autocast: bool) -> None:
        with _autocast(device, autocast):
            logits = model(idx)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


#: name -> (builder, description)
CONFIG_WORKLOADS: dict[str, tuple[Callable[[torch.device], Step], str]] = {
    "vit_b16": (vit_b16, "ViT-B/16, batch 8, 224x224, AdamW"),
    "bert_base_mlm": (bert_base_mlm, "BERT-base masked LM, batch 8 x 128 tokens, AdamW, dropout 0.1"),
}
