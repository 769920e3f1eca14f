"""Which of a GPU run's fp32 work computes on TF32 tensor cores, and so which peaks hold it.

On NVIDIA GPUs since Ampere, fp32 matrix products and convolutions may compute on TF32
tensor cores, 7.4 times the fp32 rate on an H100 SXM5 (`gpu_peaks.toml`). torch decides per
kind of operator: cuDNN's convolutions and recurrent layers use TF32 by default, cuBLAS's
matrix products do not (`torch.backends.cudnn.conv`, `torch.backends.cudnn.rnn`,
`torch.backends.cuda.matmul`). An fp32 CNN therefore computes mostly in TF32 and an fp32
MLP not at all, and one peak for both would misrate one of them by that factor. XLA (JAX)
computes fp32 dots and convolutions in TF32 by default.

A run's FLOPs are counted by kind of operator (`metrics.flop_kinds`); `precision_mix`
turns that count into the share computed in each precision, which
`peaks.rate_of_mix` holds against the peak of each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainscale.metrics.flop_kinds import CONVOLUTION, MATMUL, RECURRENT


@dataclass(frozen=True)
class Tf32Use:
    """Which kinds of operator may compute fp32 on TF32 tensor cores."""

    matmul: bool = False
    convolution: bool = False
    recurrent: bool = False

    def allows(self, kind: str) -> bool:
        """Whether operators of `kind` (one of `metrics.flop_kinds.FLOP_KINDS`) may use TF32."""
        return {MATMUL: self.matmul, CONVOLUTION: self.convolution, RECURRENT: self.recurrent}[kind]


NO_TF32 = Tf32Use()
TORCH_DEFAULT_TF32 = Tf32Use(matmul=False, convolution=True, recurrent=True)
"""torch's defaults: cuDNN's convolutions and recurrent layers in TF32, cuBLAS's matrix
products in full fp32 (what a PyTorch run computes in unless it sets the switches)."""
ALL_TF32 = Tf32Use(matmul=True, convolution=True, recurrent=True)
"""XLA's default on GPUs (JAX without `jax_default_matmul_precision`), and TensorFlow's:
fp32 products and convolutions in TF32."""


def _switch(backend: Any, legacy: Callable[[], bool]) -> bool:
    """One of torch's TF32 switches. torch 2.9 and later set each backend's own
    `fp32_precision` ('tf32', 'ieee', or 'none' to inherit); the legacy `allow_tf32` flags
    answer for the inherited setting (and for older torch). Reading a legacy flag raises where
    the two APIs were mixed; a setting that cannot be read counts as full fp32."""
    precision = getattr(backend, "fp32_precision", "none")
    if precision != "none":
        return precision == "tf32"
    try:
        return bool(legacy())
    except RuntimeError:
        return False


def torch_tf32_use() -> Tf32Use:
    """The TF32 switches of this process's torch, as they stand now."""
    import torch

    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    return Tf32Use(
        matmul=_switch(cuda.matmul, lambda: cuda.matmul.allow_tf32),
        convolution=_switch(getattr(cudnn, "conv", None), lambda: cudnn.allow_tf32),
        recurrent=_switch(getattr(cudnn, "rnn", None), lambda: cudnn.allow_tf32),
    )


def precision_mix(
    run_precision: str,
    device_type: str,
    tf32: Tf32Use,
    flops_by_kind: Mapping[str, int] | None,
    recurrent_in_fp32: bool = False,
) -> dict[str, float]:
    """The share of a run's FLOPs computed in each precision, e.g. {'tf32': 0.9, 'fp32': 0.1}.

    On a GPU, fp32 work computes in TF32 where `tf32` allows its kind; autocast computes in
    bf16 or fp16, except the recurrent layers of a model that keeps them in fp32 under bf16
    (`recurrent_in_fp32`: the built-in text RNNs, as cuDNN would run them in fp16). A CPU
    computes in its run's precision. Without a split by kind, a GPU run whose kinds would
    compute in different precisions has an unknown mix ({}).
    """
    if device_type != "cuda":
        return {run_precision: 1.0}

    def precision_of(kind: str) -> str:
        if run_precision == "fp32" or (
            kind == RECURRENT and recurrent_in_fp32 and run_precision == "bf16"
        ):
            return "tf32" if tf32.allows(kind) else "fp32"
        return run_precision

    kinds = {kind: flops for kind, flops in (flops_by_kind or {}).items() if flops > 0}
    total = sum(kinds.values())
    if not total:
        agreed = {precision_of(kind) for kind in (CONVOLUTION, RECURRENT, MATMUL)}
        return {agreed.pop(): 1.0} if len(agreed) == 1 else {}
    mix: dict[str, float] = {}
    for kind, flops in kinds.items():
        precision = precision_of(kind)
        mix[precision] = mix.get(precision, 0.0) + flops / total
    return mix
