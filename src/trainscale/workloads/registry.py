"""Workloads by name: a decorator to register, explicit imports to populate."""

from __future__ import annotations

from collections.abc import Callable

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


def _ensure_loaded() -> None:
    # Explicit imports (not plugin discovery) keep the list of workloads greppable.
    from trainscale.workloads import (
        cifar10_resnet44,  # noqa: F401
        imdb_rnn,  # noqa: F401
        mnist_cnn,  # noqa: F401
        mnist_dbn,  # noqa: F401
        tweets_text,  # noqa: F401
    )


def workload_names() -> list[str]:
    """All registered workload names, sorted."""
    _ensure_loaded()
    return sorted(_REGISTRY)


def get_workload(name: str) -> Workload:
    """The workload spec called `name`; an unknown name fails with the list of valid ones."""
    _ensure_loaded()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        valid = ", ".join(sorted(_REGISTRY))
        raise ConfigError(f"unknown workload {name!r}; valid workloads: {valid}") from None
    return factory()
