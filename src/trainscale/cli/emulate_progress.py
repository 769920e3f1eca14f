"""The emulation's progress on stderr, as `trainscale emulate` prints it."""

from __future__ import annotations

import sys
import time
from typing import Any

from trainscale.emulation.run import EmulationListener


class Progress(EmulationListener):
    """One line on stderr as each worker count starts training."""

    def __init__(self) -> None:
        self.last: tuple[float, int] | None = None
        """(when the previous worker count started, its samples): the time per sample
        measured here, for the next one's estimate."""

    def started(self, index: int, total: int, spec: Any, config: Any, plan: Any) -> None:
        now = time.monotonic()
        samples = plan.total_steps * spec.samples_per_step
        estimate = ""
        if self.last is not None and self.last[1]:
            # Measured on this machine, as it is now: the previous worker count's seconds
            # per sample (start-up and evaluation included), times this one's samples.
            per_sample = (now - self.last[0]) / self.last[1]
            estimate = f" (about {duration_text(per_sample * samples)}, from the last one here)"
        self.last = (now, samples)
        print(
            f"[{index}/{total}] {config.workload} {spec.mode} x{spec.workers}: "
            f"per-worker batch {spec.per_worker_batch_size}, {spec.samples_per_step} "
            f"samples a global step, lr {config.optimisation.lr:.4g}, "
            f"{plan.total_steps} global steps{estimate}",
            file=sys.stderr,
            flush=True,
        )


def duration_text(seconds: float) -> str:
    """'40 s', '8 min' (`sweeps.estimate.duration_text`, imported when first needed)."""
    from trainscale.sweeps.estimate import duration_text as text

    return text(seconds)
