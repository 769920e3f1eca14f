"""Models built for their shapes alone (parameter counts, memory footprints): on torch's meta
device, which allocates nothing, with the initialisers' draws skipped, since a meta tensor
holds no values to draw."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

# The in-place ops an initialiser fills a tensor's values with (torch.nn.init and the models'
# own). Only these are skipped: each one leaves shape, dtype and device as they were, so
# skipping it changes nothing a meta tensor holds. Several (normal_, erfinv_) run on the meta
# device through Python references that import torch's compiler stack, a second of the
# command's start otherwise.
VALUE_FILLS = frozenset(
    {
        "normal_",
        "uniform_",
        "erfinv_",
        "bernoulli_",
        "exponential_",
        "log_normal_",
        "cauchy_",
        "geometric_",
        "random_",
        "fill_",
        "zero_",
        "copy_",
        "clamp_",
        "add_",
        "sub_",
        "mul_",
        "div_",
    }
)


# Factories of random values and the factory each becomes: the same arguments, no draw.
RANDOM_FACTORIES: dict[str, Callable[..., torch.Tensor]] = {
    "randn": torch.empty,
    "rand": torch.empty,
    "randn_like": torch.empty_like,
    "rand_like": torch.empty_like,
}


class _SkipValueFills(TorchFunctionMode):
    """Returns a meta tensor as it is from the ops of VALUE_FILLS, makes the random factories'
    tensors empty, and passes every other call."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        # torch.nn.init's functions pass their tensor by keyword to the mode.
        target = args[0] if args else kwargs.get("tensor")
        if name in VALUE_FILLS and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        if name in RANDOM_FACTORIES and func is getattr(torch, name):
            kwargs = {key: value for key, value in kwargs.items() if key != "generator"}
            func = RANDOM_FACTORIES[name]
        return func(*args, **kwargs)


@contextmanager
def shapes_only() -> Iterator[None]:
    """Within it, tensors and modules are made on the meta device and left undrawn."""
    with torch.device("meta"), _SkipValueFills():
        yield
