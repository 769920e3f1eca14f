"""The ImageNet ResNets of He et al. 2016 ("Deep Residual Learning for Image Recognition",
arXiv:1512.03385, Table 1), version 1.5: architecture only.

A 7x7/2 convolution with 64 filters and a 3x3/2 max pool, then four stages of bottleneck
blocks (1x1 reduce, 3x3, 1x1 expand by 4) on 56x56, 28x28, 14x14 and 7x7 maps with 64, 128,
256 and 512 inner filters, then global average pooling and a 1000-way linear layer. Depth 50,
101 and 152 have 3-4-6-3, 3-4-23-3 and 3-8-36-3 blocks per stage. Every convolution is
followed by batch normalisation; the first block of a stage projects its shortcut with a
1x1 convolution (the paper's option B).

Version 1.5 (NVIDIA DeepLearningExamples' "ResNet50 v1.5", torchvision's ResNet) puts a
stage's stride 2 on the block's 3x3 convolution rather than its first 1x1 convolution, which
would otherwise skip three quarters of its input; it costs a little compute (4.1 vs 3.9
GMACs for ResNet-50) and gains about half a point of top-1. Parameter counts are those of
version 1 and 1.5 alike: 25,557,032 (ResNet-50), 44,549,160 (ResNet-101) and 60,192,808
(ResNet-152).
"""

from __future__ import annotations

import torch
from torch import nn

STAGE_WIDTHS = (64, 128, 256, 512)
"""Inner (bottleneck) filters per stage; a block's output has 4x as many."""
EXPANSION = 4
BLOCKS_PER_STAGE = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
"""Blocks in each of the four stages, by depth (the paper's Table 1)."""


def conv_bn(in_channels: int, out_channels: int, kernel: int, stride: int = 1) -> nn.Sequential:
    """A bias-free convolution ("same" padding) followed by batch normalisation."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel, stride, padding=kernel // 2, bias=False),
        nn.BatchNorm2d(out_channels),
    )


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride: v1.5), 1x1 expand, plus the shortcut, then ReLU
    (the paper's Fig. 5 right)."""

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * EXPANSION
        self.reduce = conv_bn(in_channels, width, 1)
        self.conv = conv_bn(width, width, 3, stride)
        self.expand = conv_bn(width, out_channels, 1)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = conv_bn(in_channels, out_channels, 1, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.reduce(x))
        out = torch.relu(self.conv(out))
        out = self.expand(out)
        return torch.relu(out + self.shortcut(x))


class ImageNetResNet(nn.Module):
    """A bottleneck ResNet for 224x224 inputs with the given blocks per stage."""

    def __init__(self, blocks_per_stage: tuple[int, ...], num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            conv_bn(3, STAGE_WIDTHS[0], 7, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks: list[nn.Module] = []
        channels = STAGE_WIDTHS[0]
        for stage, (width, count) in enumerate(zip(STAGE_WIDTHS, blocks_per_stage, strict=True)):
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                blocks.append(Bottleneck(channels, width, stride))
                channels = width * EXPANSION
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(channels, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                # He et al. 2015 ("Delving deep into rectifiers"), as the paper cites.
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        for module in self.modules():
            if isinstance(module, Bottleneck):
                # Zero-init the last BN's scale of every block (Goyal et al. 2017, Sec. 5.1, as
                # NVIDIA's recipe does): each block starts as an identity, which keeps large-
                # batch training stable early on.
                scale = module.expand[1]
                assert isinstance(scale, nn.BatchNorm2d)
                nn.init.zeros_(scale.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


def imagenet_resnet(depth: int, num_classes: int = 1000) -> ImageNetResNet:
    """ResNet-50, -101 or -152 (v1.5), e.g. ``imagenet_resnet(50)``; ValueError otherwise."""
    if depth not in BLOCKS_PER_STAGE:
        valid = ", ".join(str(d) for d in BLOCKS_PER_STAGE)
        raise ValueError(f"ImageNet ResNet depth must be one of {valid}, got {depth}")
    return ImageNetResNet(BLOCKS_PER_STAGE[depth], num_classes=num_classes)
