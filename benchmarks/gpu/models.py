"""The benchmark workloads (WORKLOADS; and FIRST_STEP_WORKLOADS, issue 31), written here so nothing is downloaded.

Each workload builds its model, optimiser and a fixed synthetic batch on a device and returns
a ``step(autocast)`` function that runs one full training iteration (forward, loss, backward,
optimiser step). Sizes follow the published models; batch sizes are chosen so one step takes
tens to hundreds of milliseconds on a data-centre GPU.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from habitat.demo import GPT

Step = Callable[[bool], None]


def _autocast(enabled: bool):
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=enabled)


# ----- ResNet-50 (He et al. 2016, bottleneck v1.5: stride on the 3x3) ----------------------

class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + identity)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        layers, inplanes = [], 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _classifier_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
                     y: torch.Tensor) -> Step:
    """One training step of an image classifier: cross-entropy, backward, the optimizer."""

    def step(autocast: bool) -> None:
        with _autocast(autocast):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def resnet50(device: torch.device, batch: int = 64) -> Step:
    model = ResNet50().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    return _classifier_step(model, opt, x, y)


# ----- GPT-2 small (Radford et al. 2019: 12 layers, width 768, 12 heads) --------------------

def gpt2_small_model() -> nn.Module:
    """GPT-2 small: the demo's GPT at GPT-2's sizes, head tied to the embedding, tanh GELU."""
    return GPT(vocab=50257, width=768, layers=12, heads=12, context=1024, tie_weights=True,
               gelu="tanh")


def token_step(model: nn.Module, opt: torch.optim.Optimizer, inputs: tuple[torch.Tensor, ...],
               targets: torch.Tensor) -> Step:
    """A training step of a model that gives per-token logits: cross-entropy on them in fp32."""

    def step(autocast: bool) -> None:
        with _autocast(autocast):
            logits = model(*inputs)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def gpt2_small(device: torch.device, batch: int = 8, context: int = 512) -> Step:
    model = gpt2_small_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, 50257, (batch, context), device=device)
    targets = torch.randint(0, 50257, (batch, context), device=device)
    return token_step(model, opt, (idx,), targets)


# ----- LSTM sequence-to-sequence (Sutskever et al. 2014 style, teacher forcing) -------------

class Seq2Seq(nn.Module):
    def __init__(self, vocab: int = 10000, embed: int = 512, hidden: int = 1024,
                 layers: int = 2) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(vocab, embed)
        self.tgt_embed = nn.Embedding(vocab, embed)
        self.encoder = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.decoder = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        _, state = self.encoder(self.src_embed(src))
        y, _ = self.decoder(self.tgt_embed(tgt_in), state)
        return self.out(y)


def lstm_seq2seq(device: torch.device, batch: int = 128, length: int = 32) -> Step:
    model = Seq2Seq().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    src = torch.randint(0, 10000, (batch, length), device=device)
    tgt = torch.randint(0, 10000, (batch, length + 1), device=device)

    def step(autocast: bool) -> None:
        with _autocast(autocast):
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt[:, 1:].flatten())
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


# ----- DCGAN (Radford et al. 2016: 64x64 images, ngf = ndf = 64) ---------------------------

def _generator(nz: int = 100, ngf: int = 64) -> nn.Module:
    def up(cin: int, cout: int) -> list[nn.Module]:
        return [nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)]

    return nn.Sequential(nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8),
                         nn.ReLU(True), *up(ngf * 8, ngf * 4), *up(ngf * 4, ngf * 2), *up(ngf * 2, ngf),
                         nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


def _discriminator(ndf: int = 64) -> nn.Module:
    def down(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, True)]

    return nn.Sequential(nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
                         *down(ndf, ndf * 2), *down(ndf * 2, ndf * 4), *down(ndf * 4, ndf * 8),
                         nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False))


def _init_dcgan(m: nn.Module) -> None:
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def dcgan(device: torch.device, batch: int = 128, nz: int = 100) -> Step:
    gen, disc = _generator(nz).to(device), _discriminator().to(device)
    gen.apply(_init_dcgan)
    disc.apply(_init_dcgan)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.rand(batch, 3, 64, 64, device=device) * 2 - 1
    noise = torch.randn(batch, nz, 1, 1, device=device)
    ones = torch.ones(batch, device=device)
    zeros = torch.zeros(batch, device=device)

    def step(autocast: bool) -> None:
        # Discriminator: real vs generated (generator frozen through detach).
        with _autocast(autocast):
            fake = gen(noise)
            d_loss = (F.binary_cross_entropy_with_logits(disc(real).flatten().float(), ones)
                      + F.binary_cross_entropy_with_logits(disc(fake.detach()).flatten().float(), zeros))
        d_loss.backward()
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)
        # Generator: fool the discriminator.
        with _autocast(autocast):
            g_loss = F.binary_cross_entropy_with_logits(disc(fake).flatten().float(), ones)
        g_loss.backward()
        opt_g.step()
        opt_g.zero_grad(set_to_none=True)
        opt_d.zero_grad(set_to_none=True)

    return step


# ----- The first-step measurement's workloads (benchmarks/timeline/first_step.py) ------------
# A new user's setup: the model as published, NCHW images, AdamW (its foreach implementation
# on CUDA: many small launches), no channels-last or fused kernels.

def resnet50_adamw(device: torch.device, batch: int = 64) -> Step:
    """ResNet-50 (torchvision's architecture) in NCHW with AdamW: GPU-bound in fp32 on an H100."""
    model = ResNet50().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    x = torch.randn(batch, 3, 224, 224, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    return _classifier_step(model, opt, x, y)


class Encoder(nn.Module):
    """A BERT-base-like encoder (Devlin et al. 2019: 12 layers, width 768, 12 heads, GELU,
    post-norm) with a masked-LM head tied to the token embedding."""

    def __init__(self, vocab: int = 30522, width: int = 768, layers: int = 12, heads: int = 12,
                 context: int = 512) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.norm = nn.LayerNorm(width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.transform = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        h = self.encoder(self.norm(self.tokens(idx) + self.positions(pos)))
        return F.linear(self.transform(h), self.tokens.weight, self.bias)


def bert_base(device: torch.device, batch: int = 16, context: int = 256, **sizes: int) -> Step:
    """`sizes`: Encoder's (vocab, width, layers, heads), BERT-base's by default."""
    model = Encoder(**sizes).to(device)
    vocab = model.tokens.num_embeddings
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    idx = torch.randint(0, vocab, (batch, context), device=device)
    targets = torch.randint(0, vocab, (batch, context), device=device)
    return token_step(model, opt, (idx,), targets)


class EncoderDecoder(nn.Module):
    """A T5-small-like encoder-decoder (Raffel et al. 2020: 6 + 6 layers, width 512, 8 heads,
    feed-forward 2048, ReLU, pre-norm), embedding shared by both sides and the LM head."""

    def __init__(self, vocab: int = 32128, width: int = 512, layers: int = 6, heads: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first": inference-only
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(width, heads, layers, layers, 4 * width, dropout=0.1,
                                              activation="relu", batch_first=True, norm_first=True)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], device=src.device)
        h = self.transformer(self.embed(src), self.embed(tgt_in), tgt_mask=causal, tgt_is_causal=True)
        return F.linear(h, self.embed.weight)


def t5_small(device: torch.device, batch: int = 16, length: int = 256, **sizes: int) -> Step:
    """`sizes`: EncoderDecoder's (vocab, width, layers, heads), T5-small's by default."""
    model = EncoderDecoder(**sizes).to(device)
    vocab = model.embed.num_embeddings
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    src = torch.randint(0, vocab, (batch, length), device=device)
    tgt = torch.randint(0, vocab, (batch, length + 1), device=device)
    return token_step(model, opt, (src, tgt[:, :-1]), tgt[:, 1:])


@dataclass(frozen=True)
class Workload:
    name: str
    build: Callable[[torch.device], Step]
    description: str


WORKLOADS = (
    Workload("resnet50", resnet50, "ResNet-50, batch 64, 224x224, SGD, channels-last"),
    Workload("gpt2_small", gpt2_small, "GPT-2 small (124M), batch 8 x 512 tokens, AdamW"),
    Workload("lstm_seq2seq", lstm_seq2seq, "LSTM seq2seq, 2x1024 enc/dec, batch 128 x 32, Adam"),
    Workload("dcgan", dcgan, "DCGAN 64x64, batch 128, D and G updates, Adam"),
)

# The first-step measurement (issue 31): (workload, precision) as a new user would run them.
FIRST_STEP_WORKLOADS = (
    (Workload("resnet50_adamw", resnet50_adamw, "ResNet-50, batch 64, 224x224 NCHW, AdamW"), "fp32"),
    (Workload("resnet50_adamw", resnet50_adamw, "ResNet-50, batch 64, 224x224 NCHW, AdamW"), "bf16"),
    (Workload("bert_base", bert_base, "BERT-base-like encoder, batch 16 x 256, AdamW"), "bf16"),
    (Workload("t5_small", t5_small, "T5-small-like encoder-decoder, batch 16 x 256, AdamW"), "fp32"),
)

