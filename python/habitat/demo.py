"""The main job: forecast a real training step of a small bundled model on several GPUs.

    python -m habitat.demo [--target A100,H100 ...] [--steps 3] [--batch 8] [--save step.json]

The model is a small GPT-style language model (embedding, causal self-attention, layer
norm, MLP) trained with AdamW, defined here so nothing is downloaded.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

import torch
from torch import nn
from torch.nn import functional as F

import habitat

DEFAULT_TARGETS = ("A100", "H100", "L4", "T4", "RTX 4090")


class Block(nn.Module):
    """A pre-norm GPT block: causal self-attention and a GELU MLP, each with a residual."""

    def __init__(self, width: int, heads: int, gelu: str = "none") -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate=gelu),
                                 nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A GPT-style language model returning logits (GPT-2: tied head, tanh GELU)."""

    def __init__(self, vocab: int, width: int, layers: int, heads: int, context: int, *,
                 tie_weights: bool = False, gelu: str = "none") -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, gelu) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        if tie_weights:
            self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class TinyGPT(GPT):
    """The demo's model; its forward returns the loss."""

    def __init__(self, vocab: int = 4096, width: int = 256, layers: int = 4, heads: int = 4,
                 context: int = 128) -> None:
        super().__init__(vocab, width, layers, heads, context)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        logits = super().forward(idx)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m habitat.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--target", "-t", action="append", metavar="GPU",
                        help="GPU to forecast (repeat or comma-separate; `all` for every known GPU; "
                             f"default: {', '.join(DEFAULT_TARGETS)})")
    parser.add_argument("--targets", nargs="+", metavar="GPU", help=argparse.SUPPRESS)  # older spelling
    parser.add_argument("--steps", type=int, default=3, help="training steps to trace")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--save", help="write the trace and forecast to this JSON file")
    args = parser.parse_args(argv)
    names = [n.strip() for v in (args.target or []) + (args.targets or []) for n in v.split(",") if n.strip()]
    if any(n.lower() == "all" for n in names):
        names = [d.name for d in habitat.devices()]
    chosen = names or list(DEFAULT_TARGETS)

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TinyGPT(context=args.context).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    idx = torch.randint(0, 4096, (args.batch, args.context), device=device)
    targets = torch.randint(0, 4096, (args.batch, args.context), device=device)

    print(f"Tracing {args.steps} training steps of TinyGPT "
          f"({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, batch {args.batch}, "
          f"context {args.context}) on {device}; forecasting for {', '.join(chosen)}")
    predictor = habitat.predict_on(chosen)  # one predictor: each `with` adds a step
    forecast = predictor.forecast  # the same object each `with` returns
    for _ in range(args.steps):
        with predictor:
            loss = model(idx, targets)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        # The step's index and measured time as the forecast records them (print(forecast) too).
        step = forecast.latest
        print(f"  step {step.index}: loss {loss.item():.4f}, measured {step.measured_ms:.2f} ms on "
              f"{device}, as seen on " + ", ".join(f"{t} {step.step_ms(t):.2f} ms" for t in forecast.targets))
    predictor.close()
    print()
    print(forecast)
    print()
    if args.save:
        trace = str(forecast.save(args.save))
        print(f"Saved the trace and forecast to {trace}. Next:")
    else:
        trace = "step.json"
        print("Next: save the trace (in your script, forecast.save(\"step.json\"); here, "
              "--save step.json), then:")
    commands = [(f"habitat compare {trace}", "every GPU ranked by the step as seen, cost, memory fit"),
                (f"habitat report {trace}", "report.html: the verdict, a chart, every table"),
                (f"habitat predict {trace} -t B200,L40S", "other GPUs from the same trace")]
    width = max(len(c) for c, _ in commands)
    for command, what in commands:
        print(f"  {command.ljust(width)}   # {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
