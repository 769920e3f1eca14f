"""A script run's resolved settings: the user's own training script, its arguments, and the
run options that apply to a script (device, workers, cores, threads, measurement, tag).

A script run is no workload: the script owns its model, data, batch and optimizer, so the
options that set those are refused before it starts (runner/script_launch.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainscale.config.options import MeasurementOptions, ParallelConfig

SCRIPT_OPTIONS = (
    "data",
    "device",
    "workers",
    "threads_per_worker",
    "affinity",
    "allow_oversubscribe",
    "timeout_s",
    "warmup_steps_untimed",
    "target_accuracy",
    "tag",
)
"""The run options (flat names) that apply to a script run; every other one is refused."""


@dataclass(frozen=True)
class ScriptRun:
    """Everything the workers of a script run need, resolved in the parent."""

    script: str
    """The script's absolute path."""
    sha256: str
    """The script's SHA-256 when the run started: which version of it was measured."""
    args: tuple[str, ...]
    """The script's own arguments (after `--`): its `sys.argv[1:]`."""
    parallel: ParallelConfig
    measurement: MeasurementOptions
    tag: str | None = None
    data_kind: str = "real"
    """What the script trains on, as its user says (`--data synthetic` for generated
    tensors): trainscale never sees a script's data. A synthetic run's accuracy is not
    reported, as for every synthetic run."""
    max_steps: int | None = None
    """Steps after which the meter stops the script, a normal end (the bench's rungs: the
    same number of steps on every setting, whatever length the script's own loop has);
    None: the script trains to its own end."""
    progress: bool = True
    """Whether rank 0 prints a progress line every ~10 s while the script trains (not with
    --quiet or --json). Not stored: it changes what the terminal shows, not the run."""

    @property
    def workload(self) -> str:
        """The name the run is stored under: `script:train.py`."""
        return f"script:{Path(self.script).name}"

    def flat(self) -> dict[str, Any]:
        """The stored config: the script, its digest and arguments, and the settings."""
        return {
            "workload": self.workload,
            "script": self.script,
            "script_sha256": self.sha256,
            "script_args": list(self.args),
            "data": self.data_kind,
            **dataclasses.asdict(self.parallel),
            **dataclasses.asdict(self.measurement),
            "tag": self.tag,
            "max_steps": self.max_steps,
        }
