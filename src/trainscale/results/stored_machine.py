"""The machine a stored run ran on, as its readers ask about it: typed, each with the one
meaning a missing or unreadable value has.

A run's environment is the JSON `hardware.facts.collect_environment()` wrote on the day it
ran (`trainscale env` shows the same facts of this machine now): runs of an older trainscale
lack some facts, and a store may have been edited by hand. The reports, the comparison and
the simulator group runs by host and device and count their cores; rather than each asking
`record.env.get("hostname")` and checking its type its own way (a hostname stored as a list
failed a report's set of hosts), `StoredMachine.of` says once what each fact means when it
is absent or not of its type: unknown. The environment stays the store's record of every
fact; this is the part its readers compute with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainscale.results.stored_settings import as_text, as_whole


@dataclass(frozen=True)
class StoredMachine:
    """The facts of one machine that the readers of stored runs use."""

    hostname: str | None = None
    cpu_model: str | None = None
    logical_cores: int | None = None
    usable_cores: tuple[int, ...] = ()
    """The cores the run's process could run on (its affinity mask)."""
    gpu_names: tuple[str, ...] = ()
    """One entry per GPU it saw, '' where a GPU's name was not recorded."""
    torch_version: str | None = None
    framework_version: str | None = None
    """The release of the framework that trained it (runs before frameworks: None)."""

    @classmethod
    def of(cls, env: Mapping[str, Any]) -> StoredMachine:
        """The facts of a stored environment (or of `collect_environment()` now)."""
        gpus = env.get("gpus")
        framework = env.get("framework")
        return cls(
            hostname=as_text(env.get("hostname")),
            cpu_model=as_text(env.get("cpu_model")),
            logical_cores=as_whole(env.get("logical_cores"), minimum=1),
            usable_cores=_cores(env.get("usable_cores")),
            gpu_names=tuple(
                as_text(gpu.get("name") if isinstance(gpu, dict) else gpu) or ""
                for gpu in (gpus if isinstance(gpus, list) else [])
            ),
            torch_version=as_text(env.get("torch_version")),
            framework_version=(
                as_text(framework.get("version")) if isinstance(framework, dict) else None
            ),
        )

    @property
    def cores(self) -> int | None:
        """The cores its runs could use: the usable ones, else all logical ones."""
        return len(self.usable_cores) or self.logical_cores

    @property
    def gpu_name(self) -> str | None:
        """The first named GPU (a machine's GPUs are alike in practice)."""
        return next((name for name in self.gpu_names if name), None)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a device description may match: the CPU model, the host, the GPUs."""
        return tuple(n for n in (self.cpu_model, self.hostname, *self.gpu_names) if n)


def _cores(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(core for core in value if as_whole(core) is not None)
