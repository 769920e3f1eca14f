"""Mixed precision: which autocast context a precision means on a device, and loss scaling."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """torch.autocast to bf16/fp16 on `device`, or nothing for fp32."""
    dtype = _DTYPES.get(precision)
    if dtype is None:
        return nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def make_grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler | None:
    """A loss scaler for fp16 (its narrow exponent underflows small gradients); None else.

    bf16 has fp32's exponent range and needs none.
    """
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(device.type)
