"""Small training workloads for tests: an MLP, a CNN (conv + batch norm) and a transformer
block (embedding + attention + layer norm), each with a fixed batch and a training step."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 32, hidden: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 100, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


@dataclass
class Workload:
    name: str
    model: nn.Module
    inputs: torch.Tensor
    targets: torch.Tensor
    optimizer: torch.optim.Optimizer

    def step(self) -> torch.Tensor:
        """One training step (zero_grad, forward, loss, backward, optimizer step)."""
        self.optimizer.zero_grad()
        out = self.model(self.inputs)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), self.targets.reshape(-1))
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def _optimizer(kind: str, model: nn.Module) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if kind == "adam":
        return torch.optim.Adam(model.parameters(), lr=1e-3)
    raise ValueError(f"unknown optimizer {kind!r}: use 'sgd' or 'adam'")


def make_workload(name: str, optimizer: str = "sgd", seed: int = 0) -> Workload:
    """A fresh, seeded workload: identical weights and data for the same arguments."""
    gen = torch.Generator().manual_seed(seed + 1)
    torch.manual_seed(seed)
    builders: dict[str, Callable[[], tuple[nn.Module, torch.Tensor, torch.Tensor]]] = {
        "mlp": lambda: (MLP(), torch.randn(8, 32, generator=gen), torch.randint(0, 10, (8,), generator=gen)),
        "cnn": lambda: (SmallCNN(), torch.randn(4, 3, 16, 16, generator=gen),
                        torch.randint(0, 10, (4,), generator=gen)),
        "transformer": lambda: (TinyTransformer(), torch.randint(0, 100, (2, 16), generator=gen),
                                torch.randint(0, 100, (2, 16), generator=gen)),
    }
    if name not in builders:
        raise ValueError(f"unknown workload {name!r}: use one of {sorted(builders)}")
    model, inputs, targets = builders[name]()
    return Workload(name, model, inputs, targets, _optimizer(optimizer, model))


WORKLOADS = ("mlp", "cnn", "transformer")
OPTIMIZERS = ("sgd", "adam")
