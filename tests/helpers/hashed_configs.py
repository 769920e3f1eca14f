"""Resolved configs whose settings hashes tests pin: the same on every machine (their cores
given, fp32 named), so a pinned hash fails only when the hashing rule or a default changes."""

from __future__ import annotations

from trainscale.config.options import RunConfig, RunOptions
from trainscale.runner.resolve import resolve


def serial_config() -> RunConfig:
    """mnist-cnn, 2 workers x 1 thread on synthetic data, in fp32, its recipe of schema 6's
    day (2 epochs, 30% warm-up): the config whose schema-6 hash tests know."""
    options = RunOptions.of(
        "mnist-cnn",
        workers=2,
        threads_per_worker=1,
        data="synthetic",
        precision="fp32",
        epochs=2.0,
        warmup_fraction=0.3,
    )
    return resolve(options, available_cores=[0, 1])
