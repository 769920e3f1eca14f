"""The cores this process could run on when trainscale was imported, before a library
narrowed them.

With OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY set (common on HPC clusters), the
OpenMP runtime that torch loads binds the importing thread to its first place on import:
`sched_getaffinity` then reported one core on a machine of many, a run of two workers was
refused as oversubscribed, and the workers, which inherit their launcher's mask, all started
on that core. trainscale places its workers itself (`--affinity`), so the mask read here is
the machine's share, the parent's mask is given back before workers start, and the variables
are kept from the workers (their OpenMP threads would be bound to places outside their set).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

BINDING_VARIABLES = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")
"""The OpenMP runtime's thread-binding settings (GNU's and the standard's)."""

CORES: frozenset[int] | None = (
    frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
)
"""The mask at import (trainscale's package imports this module first, before torch)."""


def narrowed_by_openmp() -> frozenset[int] | None:
    """The mask at import where an OpenMP binding variable is set and this thread's mask
    has since shrunk within it; None otherwise (nothing to undo)."""
    if CORES is None or not any(os.environ.get(name) for name in BINDING_VARIABLES):
        return None
    return CORES if os.sched_getaffinity(0) < CORES else None


@contextmanager
def workers_unbound() -> Iterator[None]:
    """While workers start: the calling thread's mask as at import (they inherit it), and no
    OpenMP binding variable in the environment they inherit; both as they were afterwards."""
    start = narrowed_by_openmp()
    now = os.sched_getaffinity(0) if start is not None else None
    if start is not None:
        os.sched_setaffinity(0, start)
    removed = {name: os.environ.pop(name) for name in BINDING_VARIABLES if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(removed)
        if now is not None:
            os.sched_setaffinity(0, now)
