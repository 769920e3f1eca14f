"""Where the real datasets are for the real-data tests: `$TRAINSCALE_DATA_DIR`, when set."""

from __future__ import annotations

import os
from pathlib import Path

REAL_DATA_DIR = os.environ.get("TRAINSCALE_DATA_DIR")


def has_real_mnist() -> bool:
    """Whether `REAL_DATA_DIR` holds MNIST's training images (gzipped or not) where the
    loader looks: the folder itself, `mnist/` or torchvision's `MNIST/raw/`."""
    if not REAL_DATA_DIR:
        return False
    root = Path(REAL_DATA_DIR)
    return any(
        (d / "train-images-idx3-ubyte.gz").exists() or (d / "train-images-idx3-ubyte").exists()
        for d in (root, root / "mnist", root / "MNIST" / "raw")
    )
