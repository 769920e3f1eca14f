"""What `trainscale probe` can be asked, declared once: each field is an option whose
docstring is its `--help` text (config/cli.py makes the flags from them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from trainscale.config.options import option
from trainscale.config.values import comma_list, comma_names, comma_whole_numbers
from trainscale.errors import ConfigError

KINDS = ("matmul", "dispatch", "transfer", "allreduce")
KIB, MIB = 1024, 1024 * 1024
CPU_PRECISIONS = ("fp32", "bf16")
CUDA_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
MAX_REPEATS = 1000
"""Most timed batches per size: the best of a thousand batches no longer changes, and the
all-reduce's batches run without a time budget, so a typo of a few zeros would run for days."""
DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 24 * 3600.0
"""The longest --timeout: a day, far beyond any probe's collectives (and within what
torch.distributed's timeout can hold)."""
BYTES_PER_ELEMENT = 4
"""An all-reduce message is float32, the dtype of DDP's gradient buckets in fp32 training:
a size is rounded down to whole elements (at least one)."""


def whole_elements(size_bytes: int) -> int:
    """`size_bytes` as an all-reduce message holds it: whole float32 elements, at least one."""
    return max(1, size_bytes // BYTES_PER_ELEMENT) * BYTES_PER_ELEMENT


_SIZE = re.compile(r"(?P<number>[0-9]+)\s*(?P<unit>[KMG]?)(?:I?B)?", re.IGNORECASE)
_UNITS = {"": 1, "K": KIB, "M": MIB, "G": 1024 * MIB}


def parse_bytes(text: str) -> int:
    """'4K' / '4KiB' -> 4096, '64M' -> 67108864, '512' -> 512 (binary units)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"invalid size {text!r}: use a number of bytes with K or M, like 64K")
    return int(match["number"]) * _UNITS[match["unit"].upper()]


@dataclass(frozen=True, kw_only=True)
class ProbeOptions:
    """What the user asked for; None means "the default for the device and --quick"."""

    device: Literal["cpu", "cuda", "auto"] = option("auto")
    """what to probe (default: auto = cuda when a GPU is visible)"""
    only: tuple[str, ...] | None = option(None, metavar="KIND,...", parse=comma_names)
    """comma-separated subset of matmul,dispatch,transfer,allreduce (default: all apply)"""
    threads: int | None = option(None, metavar="N")
    """intra-op threads of the CPU matmul, 1 to the usable cores (default: every usable
    core)"""
    workers: int | None = option(None, metavar="N")
    """all-reduce processes, >= 1; on the CPU at most the usable cores unless
    --allow-oversubscribe, on CUDA at most the visible GPUs (default: 2 on the CPU, every
    visible GPU on CUDA)"""
    allow_oversubscribe: bool = option(False)
    """start more CPU all-reduce workers than usable cores"""
    precisions: tuple[str, ...] | None = option(None, metavar="PRECISION,...", parse=comma_names)
    """matmul precisions (default: fp32,bf16 on the CPU; fp32,tf32,bf16,fp16 on CUDA, tf32
    and bf16 from Ampere on)"""
    matmul_sizes: tuple[int, ...] | None = option(
        None, metavar="N,N,...", parse=comma_whole_numbers
    )
    """square matmul sizes n (n x n by n x n), each must fit in memory (4 n^2 x 4 bytes)
    (default: 512,1024,2048 on the CPU, 2048,4096,8192 on CUDA)"""
    message_sizes: tuple[int, ...] | None = option(
        None, metavar="SIZE,...", parse=comma_list(parse_bytes)
    )
    """all-reduce message sizes, e.g. 4K,64K,1M, at least two once rounded down to whole
    float32 elements (4 bytes); every worker holds the largest twice, which must fit in
    memory (default: 4 KiB .. 64 MiB by x4)"""
    repeats: int | None = option(None, metavar="N")
    """timed batches per size, 1 to 1000, the best kept (default: 5 on the CPU, 10 on CUDA;
    --quick 3)"""
    quick: bool = option(False)
    """small sizes and few repeats: checks the machinery in seconds (a smoke test, not a
    figure)"""
    timeout_s: float = option(DEFAULT_TIMEOUT_S, flag="--timeout", metavar="S")
    """seconds an all-reduce may wait for a silent worker before the probe fails, > 0"""
