"""The CIFAR ResNets of He et al. 2016 (Sec. 4.2), depth 6n+2: architecture only.

A 3x3 convolution with 16 filters, then three stages of n basic blocks (two 3x3
convolutions each) on 32x32, 16x16 and 8x8 maps with 16, 32 and 64 filters, then global
average pooling and a 10-way linear layer: 6n+2 weighted layers. Shortcuts are identities;
where a stage halves the map and doubles the channels, the shortcut subsamples and pads the
new channels with zeros ("option A", the paper's choice for CIFAR), so shortcuts add no
parameters. Depth 20, 32, 44, 56, 110 have about 0.27M, 0.46M, 0.66M, 0.85M and 1.7M
parameters.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

STAGE_WIDTHS = (16, 32, 64)


class ZeroPadShortcut(nn.Module):
    """Option-A shortcut: stride-2 subsampling, then zero channels on both sides."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        extra = out_channels - in_channels
        self.pad_front, self.pad_back = extra // 2, extra - extra // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, ::2, ::2]
        # F.pad's last pair pads dim 1 (channels) for a 4-d input: (W, W, H, H, C, C).
        return F.pad(x, (0, 0, 0, 0, self.pad_front, self.pad_back))


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the shortcut, then ReLU (the paper's Fig. 2 left)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        if stride != 1 or in_channels != out_channels:
            self.shortcut: nn.Module = ZeroPadShortcut(in_channels, out_channels)
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetCifar(nn.Module):
    """ResNet for 32x32 inputs with `blocks_per_stage` (n) basic blocks per stage."""

    def __init__(self, blocks_per_stage: int, num_classes: int = 10, in_channels: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, STAGE_WIDTHS[0], 3, 1, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(STAGE_WIDTHS[0])
        layers: list[nn.Module] = []
        channels = STAGE_WIDTHS[0]
        for stage, width in enumerate(STAGE_WIDTHS):
            for block in range(blocks_per_stage):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(BasicBlock(channels, width, stride))
                channels = width
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(channels, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                # He et al. 2015 ("Delving deep into rectifiers"), as the paper cites: zero-mean
                # Gaussian with std sqrt(2 / (k*k*out_channels)).
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        x = self.blocks(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def blocks_for_depth(depth: int) -> int:
    """n for a 6n+2-layer network; ValueError for a depth not of that form."""
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(
            f"CIFAR ResNet depth must be 6n+2 with n >= 1 (20, 32, 44, ...), got {depth}"
        )
    return (depth - 2) // 6


def resnet_cifar(depth: int, num_classes: int = 10) -> ResNetCifar:
    """The 6n+2-layer CIFAR ResNet, e.g. ``resnet_cifar(44)`` (n=7, about 0.66M parameters)."""
    return ResNetCifar(blocks_for_depth(depth), num_classes=num_classes)
