"""Helpers shared by the command-line tests: run `trainscale` in-process, read its error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainscale.cli import main
from trainscale.data.idx import write_idx


def run_cli(args: list[str]) -> int:
    """main()'s exit status, whether it returns it or argparse exits with it."""
    try:
        return main(args)
    except SystemExit as exit_:
        return int(exit_.code)


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The command's stderr, asserted to be exactly one line and no traceback."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def write_random_mnist(folder: Path, num_train: int, num_test: int) -> Path:
    """The four MNIST IDX files filled with random digits: real files, no accuracy meaning."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", num_train), ("t10k", num_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        write_idx(folder / f"{name}-images-idx3-ubyte", images, gzip=False)
        write_idx(
            folder / f"{name}-labels-idx1-ubyte", rng.integers(0, 10, n, np.uint8), gzip=False
        )
    return folder
