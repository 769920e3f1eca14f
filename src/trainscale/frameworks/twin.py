"""The check that a workload's builder for TensorFlow or JAX returned that framework's twin.

A built-in workload's builders do; a user's workload that names a `"tensorflow"` or `"jax"`
builder (docs/custom-workloads.md) gets one line saying what it returned instead, rather
than an AttributeError deep in the trainer.
"""

from __future__ import annotations

from typing import Any

from trainscale.errors import WorkloadError
from trainscale.workloads.base import Workload


def check_twin(workload: Workload, framework: str, twin: Any, expected: type) -> None:
    """WorkloadError naming the workload when `twin` is not an `expected` instance."""
    if not isinstance(twin, expected):
        raise WorkloadError(
            f"workload {workload.name!r}: its {framework} model builder returned "
            f"{type(twin).__name__}, not a {expected.__module__}.{expected.__name__} "
            "(docs/custom-workloads.md)"
        )
