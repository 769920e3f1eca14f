"""VGG-16 of Simonyan and Zisserman 2015 ("Very Deep Convolutional Networks for Large-Scale
Image Recognition", arXiv:1409.1556, Table 1, configuration D): architecture only.

Thirteen 3x3 convolutions (stride 1, padding 1, with bias, ReLU) in five blocks of 64, 128,
256, 512 and 512 filters, each block closed by a 2x2/2 max pool, so a 224x224 input leaves
the last block as 512x7x7; then the classic classifier: 4096, 4096 (ReLU, dropout 0.5) and a
1000-way layer. No batch normalisation (the paper predates it). 138,357,544 parameters, of
which 102.8M sit in the first fully connected layer: the model whose gradient all-reduce is
the scaling studies' worst case.
"""

from __future__ import annotations

import torch
from torch import nn

BLOCKS = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))
"""(filters, convolutions) of each block: configuration D."""
HIDDEN = 4096
FEATURE_MAP = 7
"""The last block's map side for a 224x224 input (224 / 2**5)."""


class Vgg16(nn.Module):
    """VGG-16 (configuration D) with the 4096-4096 classifier, for 224x224 inputs."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for filters, count in BLOCKS:
            for _ in range(count):
                layers += [nn.Conv2d(channels, filters, 3, padding=1), nn.ReLU(inplace=True)]
                channels = filters
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(channels * FEATURE_MAP * FEATURE_MAP, HIDDEN),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(HIDDEN, HIDDEN),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(HIDDEN, num_classes),
        )
        self._init_weights()

    def _init_weights(self) -> None:
        # The paper initialised from a shallower net or from N(0, 0.01); He initialisation
        # (which its authors later adopted) trains the 16 layers from scratch.
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, 0.01)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        # Other input sizes (as in the paper's dense evaluation) would change the map; pool to
        # the 7x7 the classifier was sized for (a no-op at 224x224).
        x = nn.functional.adaptive_avg_pool2d(x, FEATURE_MAP)
        return self.classifier(torch.flatten(x, 1))
