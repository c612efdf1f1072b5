"""Real networks built from their published configurations (no downloads, no torchvision or
transformers import), each a ``step(autocast)`` of one AdamW training iteration as
benchmarks/gpu/models.py writes its workloads, at the batch sizes and sequence lengths users
train them with (CONFIG_WORKLOADS states them; the builders' defaults):

- MobileNetV3-Large (mobilenet_v3.py): depthwise and 1x1 convolutions, squeeze-excitation,
  hardswish/hardsigmoid, batch norm; batch 128 at 224x224 (torchvision's recipe, per GPU);
- ViT-B/16 (Dosovitskiy et al. 2021; torchvision's vit_b_16 sizes, attention dropout 0): batch
  64 at 224x224 (torchvision's recipe: 64 per GPU);
- BERT-base with its masked-LM head (Devlin et al. 2019; transformers' BertConfig defaults:
  attention and hidden dropout 0.1, GELU, tied decoder): batch 32 x 128 tokens (phase-1
  pre-training length);
- T5-small (t5.py): encoder-decoder, batch 16, 512 source and 128 target tokens (transformers'
  summarisation/translation fine-tuning lengths).

BERT's attention dropout makes scaled_dot_product_attention take its unfused math path on the
CPU, which a CUDA GPU runs as one fused kernel.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

if str(Path(__file__).resolve().parent) not in sys.path:  # its sibling model files
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from mobilenet_v3 import MobileNetV3Large  # noqa: E402
from t5 import T5  # noqa: E402


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


class TrainStep:
    """One iteration, ``step(autocast)``: forward and loss under bf16 autocast or not, backward,
    AdamW. ``prime()`` creates the optimiser state with one AdamW step on zero gradients, so the
    next call is a steady-state step without running a whole warm-up step (minutes on a CPU)."""

    def __init__(self, model: nn.Module, loss_of: Callable[[], torch.Tensor], device: torch.device,
                 lr: float, weight_decay: float) -> None:
        self.model, self.loss_of, self.device = model, loss_of, device
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)

    def __call__(self, autocast: bool) -> None:
        with _autocast(self.device, autocast):
            loss = self.loss_of()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def prime(self) -> None:
        for p in self.model.parameters():
            p.grad = torch.zeros_like(p)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def _image_classifier(model: nn.Module, device: torch.device, batch: int, image: int, lr: float,
                      weight_decay: float) -> TrainStep:
    model = model.to(device)
    x = torch.randn(batch, 3, image, image, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    return TrainStep(model, lambda: F.cross_entropy(model(x).float(), y), device, lr, weight_decay)


def mobilenet_v3_large(device: torch.device, batch: int = 128, image: int = 224) -> TrainStep:
    return _image_classifier(MobileNetV3Large(), device, batch, image, 1e-3, 1e-5)


def vit_b16(device: torch.device, batch: int = 64, image: int = 224) -> TrainStep:
    return _image_classifier(ViT(image=image), device, batch, image, 3e-3, 0.3)


def bert_base_mlm(device: torch.device, batch: int = 32, length: int = 128) -> TrainStep:
    model = BertMLM().to(device)
    idx = torch.randint(0, 30522, (batch, length), device=device)
    labels = torch.randint(0, 30522, (batch, length), device=device)

    def loss() -> torch.Tensor:
        return F.cross_entropy(model(idx).flatten(0, 1).float(), labels.flatten())

    return TrainStep(model, loss, device, 1e-4, 0.01)


def t5_small(device: torch.device, batch: int = 16, source: int = 512, target: int = 128) -> TrainStep:
    model = T5().to(device)
    src = torch.randint(0, 32128, (batch, source), device=device)
    labels = torch.randint(0, 32128, (batch, target), device=device)
    return TrainStep(model, lambda: model(src, labels), device, 3e-4, 0.01)


#: (name, builder, description, smoke sizes: the builder's keyword arguments for a seconds-long
#: CPU run, for tests)
CONFIG_WORKLOADS: tuple[tuple[str, Callable[..., TrainStep], str, dict[str, int]], ...] = (
    ("mobilenet_v3_large", mobilenet_v3_large, "MobileNetV3-Large, batch 128, 224x224, AdamW",
     {"batch": 2, "image": 32}),
    ("vit_b16", vit_b16, "ViT-B/16, batch 64, 224x224, AdamW", {"batch": 2, "image": 32}),
    ("bert_base_mlm", bert_base_mlm, "BERT-base masked LM, batch 32 x 128 tokens, AdamW, dropout 0.1",
     {"batch": 2, "length": 16}),
    ("t5_small", t5_small, "T5-small, batch 16 x 512 source / 128 target tokens, AdamW, dropout 0.1",
     {"batch": 2, "source": 16, "target": 8}),
)
