"""The classic MNIST CNN (Keras `mnist_cnn.py` / pytorch-examples `mnist`): architecture only."""

from __future__ import annotations

import torch
from torch import nn


class MnistCnn(nn.Module):
    """Two 3x3 convolutions (32, 64 channels), 2x2 max-pool, dropout, 128-unit dense, 10 classes.

    About 1.2M parameters, almost all in the 9216x128 dense layer; almost all FLOPs in the
    second convolution.
    """

    def __init__(self, num_classes: int = 10, dropout_conv: float = 0.25, dropout_fc: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, kernel_size=3),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, kernel_size=3),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Dropout(dropout_conv),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * 12 * 12, 128),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout_fc),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
