"""MobileNetV3-Large built from its configuration (Howard et al. 2019, "Searching for
MobileNetV3", Table 1), with torchvision's layer sizes (`mobilenet_v3_large`: batch norm eps
0.001, squeeze-excitation width `_make_divisible(expanded // 4, 8)`, classifier 960 -> 1280 ->
1000 with hardswish and dropout 0.2), so the parameter count is torchvision's 5,483,032. Plain
torch: no torchvision import, nothing downloaded.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F


class Bneck(NamedTuple):
    """One inverted-residual block of Table 1: kernel, expanded width, output width,
    squeeze-excitation, hardswish (else ReLU), stride."""

    kernel: int
    expanded: int
    out: int
    se: bool
    hardswish: bool
    stride: int


LARGE = (
    Bneck(3, 16, 16, False, False, 1),
    Bneck(3, 64, 24, False, False, 2),
    Bneck(3, 72, 24, False, False, 1),
    Bneck(5, 72, 40, True, False, 2),
    Bneck(5, 120, 40, True, False, 1),
    Bneck(5, 120, 40, True, False, 1),
    Bneck(3, 240, 80, False, True, 2),
    Bneck(3, 200, 80, False, True, 1),
    Bneck(3, 184, 80, False, True, 1),
    Bneck(3, 184, 80, False, True, 1),
    Bneck(3, 480, 112, True, True, 1),
    Bneck(3, 672, 112, True, True, 1),
    Bneck(5, 672, 160, True, True, 2),
    Bneck(5, 960, 160, True, True, 1),
    Bneck(5, 960, 160, True, True, 1),
)
STEM_WIDTH, LAST_CONV, LAST_CHANNEL = 16, 960, 1280


def make_divisible(value: float, divisor: int = 8) -> int:
    """The channel rounding of the MobileNet papers' reference code: to a multiple of
    `divisor`, never more than 10 % below `value`."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = None) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
    if act is not None:
        layers.append(act(inplace=True))
    return nn.Sequential(*layers)


class SqueezeExcitation(nn.Module):
    """Global average pool, 1x1 conv down, ReLU, 1x1 conv up, hardsigmoid, channel scale."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeeze = make_divisible(channels // 4)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        s = F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))
        return s * x


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cfg: Bneck) -> None:
        super().__init__()
        act = nn.Hardswish if cfg.hardswish else nn.ReLU
        layers: list[nn.Module] = []
        if cfg.expanded != cin:
            layers.append(conv_bn(cin, cfg.expanded, 1, act=act))
        layers.append(conv_bn(cfg.expanded, cfg.expanded, cfg.kernel, cfg.stride,
                              groups=cfg.expanded, act=act))  # depthwise
        if cfg.se:
            layers.append(SqueezeExcitation(cfg.expanded))
        layers.append(conv_bn(cfg.expanded, cfg.out, 1))  # linear bottleneck: no activation
        self.block = nn.Sequential(*layers)
        self.residual = cfg.stride == 1 and cin == cfg.out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV3Large(nn.Module):
    def __init__(self, classes: int = 1000, dropout: float = 0.2) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, STEM_WIDTH, 3, 2, act=nn.Hardswish)]
        width = STEM_WIDTH
        for cfg in LARGE:
            layers.append(InvertedResidual(width, cfg))
            width = cfg.out
        layers.append(conv_bn(width, LAST_CONV, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(LAST_CONV, LAST_CHANNEL), nn.Hardswish(inplace=True),
                                        nn.Dropout(dropout, inplace=True), nn.Linear(LAST_CHANNEL, classes))
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1)
        return self.classifier(x)
