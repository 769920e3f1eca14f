"""What `--precision auto` (the default) trains in on a device, and why.

bf16 autocast where the device computes bf16 natively (a GPU with bf16 tensor cores; a CPU
with AVX512-BF16 or AMX), fp32 elsewhere: on a CPU without those instructions oneDNN
emulates bf16 through fp32 and it runs slower than fp32. The same holds for TensorFlow
(Keras' mixed_bfloat16 policy, oneDNN); JAX stays in fp32, as XLA's CPU backend ran bf16
slower than fp32 even on a CPU with native bf16 (its `Framework.auto_fp32`, which the
caller passes in). The accuracy cost of bf16 is measured per workload in docs/workloads.md;
`--precision fp32` asks for fp32 anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trainscale.config.options import Precision
from trainscale.hardware import facts


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a run trains in and the one-line reason it was chosen."""

    precision: Precision
    reason: str


def choose_precision(
    requested: str,
    device: str,
    *,
    fp32_reason: str | None = None,
    cpu_bf16: bool | None = None,
    cuda_bf16: bool | None = None,
) -> PrecisionChoice:
    """Resolve `requested` ('auto' or a precision) on `device` ('cpu' or 'cuda').

    `fp32_reason`: the framework's reason for fp32 on this device whatever the hardware
    (`Framework.auto_fp32`), None where the hardware decides. `cpu_bf16` / `cuda_bf16` say
    whether the device computes bf16 natively; None reads the machine (the CPU's flags;
    torch's answer for the GPU).
    """
    if requested != "auto":
        return PrecisionChoice(requested, f"--precision {requested}")  # type: ignore[arg-type]
    if fp32_reason is not None:
        return PrecisionChoice("fp32", fp32_reason)
    if device == "cuda":
        if cuda_bf16 is None:
            cuda_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported(
                including_emulation=False
            )
        if cuda_bf16:
            return PrecisionChoice("bf16", "auto: this GPU computes bf16 natively")
        return PrecisionChoice("fp32", "auto: this GPU has no native bf16 (before Ampere)")
    if cpu_bf16 is None:
        cpu_bf16 = facts.cpu_bf16_native()
    if cpu_bf16:
        return PrecisionChoice("bf16", "auto: this CPU computes bf16 natively (AVX512-BF16 or AMX)")
    return PrecisionChoice(
        "fp32", "auto: this CPU has no native bf16 (AVX512-BF16 or AMX); emulated bf16 is slower"
    )


def gpus_bf16_native(gpus: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every GPU of the machine's facts (`hardware.facts`' `gpus`, with their
    'capability', '8.0') computes bf16 natively: compute capability 8.0 (Ampere) or later,
    torch's rule for `is_bf16_supported(including_emulation=False)`. False without GPUs."""
    if not gpus:
        return False
    try:
        return all(int(str(gpu["capability"]).split(".")[0]) >= 8 for gpu in gpus)
    except (KeyError, ValueError):  # facts without a readable capability: no claim
        return False
