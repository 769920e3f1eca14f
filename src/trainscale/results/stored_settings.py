"""A stored run's settings as the readers of the store ask about them: typed, each with the
one meaning a missing or unreadable value has.

A stored config is the flat form of the run's resolved config (`RunConfig`, or a script
run's `ScriptConfig`) as the trainscale of its day wrote it: runs stored before a setting
existed lack its key, and a store may have been edited by hand. Rather than every reader
asking `record.config.get("grad_accum")` with its own default and its own type check,
`StoredSettings.of` says once what each value means when it is absent or of the wrong type:
the value runs had before the setting existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard


@dataclass(frozen=True)
class StoredSettings:
    """The settings of one stored run that reports and the simulator read."""

    framework: str = "pytorch"
    """The framework that trained it (runs stored before frameworks: PyTorch)."""
    single_process: bool = False
    """Whether its replicas ran inside one process (TensorFlow / JAX)."""
    device: str = "cpu"
    """'cpu' or 'cuda'."""
    nnodes: int = 1
    """Nodes (launcher agents) the run spanned."""
    workers: int | None = None
    """Worker processes on each node (a script run's, where the record has no world size)."""
    threads_per_worker: int | None = None
    """Intra-op threads per worker; None where trainscale left torch's default."""
    core_sets: tuple[tuple[int, ...], ...] = ()
    """The cores each worker was pinned to; empty where the workers were not pinned."""
    oversubscribed: bool = False
    """Whether it was asked to run more threads than cores (the pitfall setting)."""
    batch_size: int | None = None
    """Each worker's batch; None for a script run, which decides its own."""
    grad_accum: int = 1
    """Micro-batches per optimizer step."""
    bucket_cap_mb: float | None = None
    """DDP's gradient bucket size in MiB; None: torch's default."""
    compile: bool = False
    """Whether the model was compiled (torch.compile)."""
    steps: int | None = None
    """Optimizer steps asked for; None where the run's length was given in epochs."""
    epochs: float | None = None
    """Epochs asked for; None where given in steps."""
    precision_reason: str | None = None
    """Why `auto` chose the precision it did."""
    script: str | None = None
    """The training script of a script run; None for a workload run."""
    script_sha256: str | None = None
    """The digest of that script as it ran."""
    workload_source: str | None = None
    """The file a custom workload was loaded from; None for a registered workload."""

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> StoredSettings:
        """The settings of a stored config: a value that is missing or not of its type takes
        the field's default."""
        defaults = cls()
        return cls(
            framework=as_text(config.get("framework")) or defaults.framework,
            single_process=bool(config.get("single_process")),
            device=as_text(config.get("device")) or defaults.device,
            nnodes=as_whole(config.get("nnodes"), minimum=1) or defaults.nnodes,
            workers=as_whole(config.get("workers"), minimum=1),
            threads_per_worker=as_whole(config.get("threads_per_worker"), minimum=1),
            core_sets=_core_sets(config.get("core_sets")),
            oversubscribed=bool(config.get("oversubscribed")),
            batch_size=as_whole(config.get("batch_size"), minimum=1),
            grad_accum=as_whole(config.get("grad_accum"), minimum=1) or defaults.grad_accum,
            bucket_cap_mb=as_number(config.get("bucket_cap_mb")),
            compile=bool(config.get("compile")),
            steps=as_whole(config.get("steps"), minimum=0),
            epochs=as_number(config.get("epochs")),
            precision_reason=as_text(config.get("precision_reason")),
            script=as_text(config.get("script")),
            script_sha256=as_text(config.get("script_sha256")),
            workload_source=as_text(config.get("workload_source")),
        )


def as_text(value: Any) -> str | None:
    """A stored text, or None where the value is empty or not text."""
    return value if isinstance(value, str) and value else None


def as_whole(value: Any, *, minimum: int = 0) -> int | None:
    """A stored count of at least `minimum`, or None where the value is not one."""
    # bool is an int to Python, never a count here.
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    return None


def is_number(value: object) -> TypeGuard[float]:
    """Whether a stored value is a number a reader can use: an int or float, not a bool (an
    int to Python), not NaN (which JSON as Python writes it can hold)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def as_number(value: Any) -> float | None:
    """A stored number as a float, or None where the value is not one (`is_number`)."""
    return float(value) if is_number(value) else None


def _core_sets(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        tuple(core for core in cores if isinstance(core, int) and not isinstance(core, bool))
        for cores in value
        if isinstance(cores, list)
    )
