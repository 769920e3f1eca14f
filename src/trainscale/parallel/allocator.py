"""Workers keep freed memory for the next step: glibc malloc settings for worker processes.

Every training step allocates and frees the same large buffers: a convolution's output for a
batch, its gradient, the optimizer's temporaries, megabytes each. With glibc's defaults a
block above the mmap threshold (128 KiB, rising only as far as the largest block freed so
far) is mapped for each allocation and unmapped when freed, and the top of the heap is handed
back to the kernel once more than twice that is free. The next step then maps the memory
again and takes a page fault for every 4 KiB page, each page zeroed by the kernel: on the
MNIST CNN at batch 128 that is over 20,000 faults a step, a quarter of the step time
(docs/benchmarks.md, "Harness overhead"). Raising the mmap threshold to glibc's largest
(32 MiB) and the trim threshold to 1 GiB keeps that memory in the process from one step to
the next, as PyTorch's CPU performance guide recommends a caching allocator for.

The settings go into the workers' environment only (glibc reads them when a process starts),
only on glibc systems, and never over a user's own choice: any MALLOC_*_ tunable,
GLIBC_TUNABLES or LD_PRELOAD (jemalloc, tcmalloc) in the environment leaves it as it is.
The cost: a worker keeps up to 1 GiB of freed memory instead of returning it, which its
peak resident memory already accounts for.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""glibc's largest mmap threshold on 64-bit systems (a larger value is ignored)."""
TRIM_THRESHOLD_BYTES = 1024 * 1024 * 1024
"""Free memory at the heap's top that a worker keeps rather than returns."""

SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES),
    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD_BYTES),
}
"""The environment the workers get."""

USER_CHOICES = ("GLIBC_TUNABLES", "LD_PRELOAD")
"""Variables that mean the user chose an allocator or its settings already."""


def worker_allocator_env(environ: Mapping[str, str], libc: str | None = None) -> dict[str, str]:
    """The variables to add to the workers' environment: `SETTINGS` on glibc where the user
    set none of their own, else nothing."""
    libc = platform.libc_ver()[0] if libc is None else libc
    if libc != "glibc":
        return {}
    if any(name.startswith("MALLOC_") for name in environ) or any(
        environ.get(name) for name in USER_CHOICES
    ):
        return {}
    return dict(SETTINGS)


@contextmanager
def allocator_settings() -> Iterator[dict[str, str]]:
    """The workers' allocator settings in this process's environment while workers start
    (spawned workers inherit it); the environment as it was afterwards. Yields what was set."""
    added = worker_allocator_env(os.environ)
    os.environ.update(added)
    try:
        yield added
    finally:
        for name in added:
            os.environ.pop(name, None)


def allocator_fact(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a worker's allocator runs with, for its facts: the malloc variables and the
    user's allocator choices present in its environment ({} = glibc's defaults)."""
    environ = os.environ if environ is None else environ
    return {
        name: value
        for name, value in environ.items()
        if name.startswith("MALLOC_") or (name in USER_CHOICES and value)
    }
