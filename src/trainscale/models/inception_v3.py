"""Inception V3 of Szegedy et al. 2016 ("Rethinking the Inception Architecture for Computer
Vision", arXiv:1512.00567, Table 1 and Figures 5-7): architecture only, for 299x299 inputs.

A stem of five convolutions and two max pools takes 299x299x3 to 35x35x192; three modules
of Figure 5 (35x35), a grid reduction to 17x17x768, four modules of Figure 6 (7x7
convolutions factorised into 1x7 and 7x1), a grid reduction to 8x8x1280, two modules of
Figure 7 (expanded filter banks) to 8x8x2048, global average pooling, dropout and a 1000-way
layer. Every convolution is bias-free, followed by batch normalisation (eps 0.001) and ReLU.
Filter counts are those of the reference TensorFlow implementation (TF-slim's
inception_v3, which the published parameter counts come from): the 35x35 modules keep one
5x5 branch beside the factorised one, as it does.

The auxiliary classifier on the 17x17 grid is left out: tf_cnn_benchmarks' `inception3`
(`Inceptionv3Model(auxiliary=False)`) and Keras' `InceptionV3` train without it, and those
are the setups the published scaling studies measured. It would add 3,326,696 parameters
(27,161,264 in all, torchvision's count with `aux_logits=True`) and a little compute; this
model has 23,834,568.
"""

from __future__ import annotations

import math

import torch
from torch import nn

Kernel = int | tuple[int, int]


def conv(in_channels: int, out_channels: int, kernel: Kernel, stride: int = 1, same: bool = True):
    """Convolution + batch norm + ReLU; "same" padding keeps a stride-1 map's size, otherwise
    the convolution is "valid" (as in the paper's grid reductions and stem)."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    padding = (kh // 2, kw // 2) if same else (0, 0)
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, (kh, kw), stride, padding, bias=False),
        nn.BatchNorm2d(out_channels, eps=0.001),
        nn.ReLU(inplace=True),
    )


def pool_branch(in_channels: int, out_channels: int) -> nn.Sequential:
    """3x3 average pool (stride 1) then a 1x1 projection."""
    return nn.Sequential(nn.AvgPool2d(3, 1, padding=1), conv(in_channels, out_channels, 1))


class Concat(nn.Module):
    """Runs its branches on the same input and concatenates their outputs by channel."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.branches], 1)


def module_35(in_channels: int, pool_channels: int) -> Concat:
    """Figure 5 on the 35x35 grid: 1x1; 1x1-5x5; 1x1-3x3-3x3; pool-1x1."""
    return Concat(
        conv(in_channels, 64, 1),
        nn.Sequential(conv(in_channels, 48, 1), conv(48, 64, 5)),
        nn.Sequential(conv(in_channels, 64, 1), conv(64, 96, 3), conv(96, 96, 3)),
        pool_branch(in_channels, pool_channels),
    )


def reduce_35_to_17(in_channels: int) -> Concat:
    """Grid reduction (Figure 10): stride-2 3x3; 1x1-3x3-3x3/2; 3x3/2 max pool."""
    return Concat(
        conv(in_channels, 384, 3, stride=2, same=False),
        nn.Sequential(
            conv(in_channels, 64, 1), conv(64, 96, 3), conv(96, 96, 3, stride=2, same=False)
        ),
        nn.MaxPool2d(3, 2),
    )


def module_17(in_channels: int, mid: int) -> Concat:
    """Figure 6 on the 17x17 grid (n = 7): 1x1; 1x1-1x7-7x1; 1x1-7x1-1x7-7x1-1x7; pool-1x1."""
    return Concat(
        conv(in_channels, 192, 1),
        nn.Sequential(conv(in_channels, mid, 1), conv(mid, mid, (1, 7)), conv(mid, 192, (7, 1))),
        nn.Sequential(
            conv(in_channels, mid, 1),
            conv(mid, mid, (7, 1)),
            conv(mid, mid, (1, 7)),
            conv(mid, mid, (7, 1)),
            conv(mid, 192, (1, 7)),
        ),
        pool_branch(in_channels, 192),
    )


def reduce_17_to_8(in_channels: int) -> Concat:
    """Grid reduction to 8x8: 1x1-3x3/2; 1x1-1x7-7x1-3x3/2; 3x3/2 max pool."""
    return Concat(
        nn.Sequential(conv(in_channels, 192, 1), conv(192, 320, 3, stride=2, same=False)),
        nn.Sequential(
            conv(in_channels, 192, 1),
            conv(192, 192, (1, 7)),
            conv(192, 192, (7, 1)),
            conv(192, 192, 3, stride=2, same=False),
        ),
        nn.MaxPool2d(3, 2),
    )


def split_1x3_3x1(in_channels: int, out_channels: int) -> Concat:
    """Figure 7's expanded filter bank: a 1x3 and a 3x1 side by side."""
    return Concat(conv(in_channels, out_channels, (1, 3)), conv(in_channels, out_channels, (3, 1)))


def module_8(in_channels: int) -> Concat:
    """Figure 7 on the 8x8 grid: 1x1; 1x1-(1x3|3x1); 1x1-3x3-(1x3|3x1); pool-1x1."""
    return Concat(
        conv(in_channels, 320, 1),
        nn.Sequential(conv(in_channels, 384, 1), split_1x3_3x1(384, 384)),
        nn.Sequential(conv(in_channels, 448, 1), conv(448, 384, 3), split_1x3_3x1(384, 384)),
        pool_branch(in_channels, 192),
    )


@torch.no_grad()
def truncated_normal_(tensor: torch.Tensor, std: float) -> torch.Tensor:
    """Fill `tensor` from N(0, std^2) truncated to +-2 std, by inverting the normal's CDF on
    uniform draws: one pass, where torch's `trunc_normal_` (rejection sampling) takes
    seconds for this model's 24M weights on a CPU."""
    # Uniform on (erf(-sqrt 2), erf(sqrt 2)), the interval erfinv maps onto (-2, 2)/sqrt 2.
    bound = math.erf(2.0 / math.sqrt(2.0))
    tensor.uniform_(-bound, bound).erfinv_().mul_(std * math.sqrt(2.0))
    return tensor.clamp_(-2.0 * std, 2.0 * std)  # guards the ends against rounding


class InceptionV3(nn.Module):
    """Inception V3 without the auxiliary classifier, for 299x299 inputs."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            conv(3, 32, 3, stride=2, same=False),  # 149x149
            conv(32, 32, 3, same=False),  # 147x147
            conv(32, 64, 3),
            nn.MaxPool2d(3, 2),  # 73x73
            conv(64, 80, 1),
            conv(80, 192, 3, same=False),  # 71x71
            nn.MaxPool2d(3, 2),  # 35x35
        )
        self.blocks = nn.Sequential(
            module_35(192, 32),  # -> 256 channels
            module_35(256, 64),  # -> 288
            module_35(288, 64),  # -> 288
            reduce_35_to_17(288),  # -> 768 at 17x17
            module_17(768, 128),
            module_17(768, 160),
            module_17(768, 160),
            module_17(768, 192),
            reduce_17_to_8(768),  # -> 1280 at 8x8
            module_8(1280),  # -> 2048
            module_8(2048),
        )
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(2048, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        # The reference implementation's initialiser: a normal (std 0.1) truncated at two
        # standard deviations.
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                truncated_normal_(module.weight, std=0.1)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(self.dropout(x))
