"""Workloads by name: a decorator registers a workload's factory; `get` and `names` read them.

The registry only holds what has been registered; which modules register the built-in
workloads, and when they are imported, is the package's business (workloads/__init__.py),
so no workload module and the registry import each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trainscale.config.suggest import did_you_mean
from trainscale.errors import ConfigError
from trainscale.workloads.base import Workload

_REGISTRY: dict[str, Callable[[], Workload]] = {}


def register(name: str) -> Callable[[Callable[[], Workload]], Callable[[], Workload]]:
    """Register a zero-argument factory that returns the workload spec called `name`."""

    def decorate(factory: Callable[[], Workload]) -> Callable[[], Workload]:
        if name in _REGISTRY:
            raise ValueError(f"workload {name!r} registered twice")
        _REGISTRY[name] = factory
        return factory

    return decorate


def names() -> list[str]:
    """The registered workload names, sorted."""
    return sorted(_REGISTRY)


def get(name: str, architectures: Sequence[str] = ()) -> Workload:
    """The workload spec called `name`; an unknown name fails with the list of valid ones
    (and of the `architectures`, the other names that would have answered)."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        valid = ", ".join(sorted(_REGISTRY))
        others = f"; architectures (synthetic data only): {', '.join(architectures)}"
        raise ConfigError(
            f"unknown workload {name!r}{did_you_mean(name, [*_REGISTRY, *architectures])}; "
            f"valid workloads: {valid}"
            f"{others if architectures else ''}; or your own: FILE.py:ATTR or MODULE:ATTR"
        ) from None
    return factory()
