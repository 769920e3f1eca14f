"""Reference workloads: `get_workload(name)` and `workload_names()`.

The built-in workloads register themselves when their modules are imported; they are
imported here explicitly (not discovered), on the first lookup, so the list stays greppable
and `trainscale --help` stays cheap.
"""

from __future__ import annotations

from trainscale.workloads import registry
from trainscale.workloads.base import Workload
from trainscale.workloads.registry import register

__all__ = ["get_workload", "register", "workload_names"]


def _ensure_loaded() -> None:
    from trainscale.workloads import (  # noqa: F401
        cifar10_resnet44,
        imdb_rnn,
        mnist_cnn,
        mnist_dbn,
        tweets_text,
    )


def workload_names() -> list[str]:
    """All registered workload names, sorted."""
    _ensure_loaded()
    return registry.names()


def get_workload(name: str) -> Workload:
    """The workload spec called `name`; an unknown name fails with the list of valid ones."""
    _ensure_loaded()
    return registry.get(name)
