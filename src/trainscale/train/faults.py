"""Deliberate worker faults, for testing that a crash, a hang or a stall is handled.

Set TRAINSCALE_FAULT_INJECT to one of:

- 'crash:rank=R:step=S': rank R raises after finishing step S;
- 'hang:rank=R:step=S': rank R sleeps forever after finishing step S;
- 'stall:rank=R:step=S:seconds=X' (optionally ':every=K'): rank R sleeps X seconds at the
  end of step S (and of every K-th step after it), inside the step's timer, so the run's
  step times hold the stall as a real one would.

Steps count from 1. Nothing happens without the variable.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

ENV_VAR = "TRAINSCALE_FAULT_INJECT"


class Stall(NamedTuple):
    """Rank `rank` sleeps `seconds` at the end of step `step`, and every `every` steps after
    it when `every` > 0."""

    rank: int
    step: int
    seconds: float
    every: int = 0

    def at(self, step: int) -> bool:
        """Whether step `step` (from 1) stalls."""
        if step == self.step:
            return True
        return self.every > 0 and step > self.step and (step - self.step) % self.every == 0


def parse_fault(text: str) -> tuple[str, int, int]:
    """'crash:rank=1:step=3' -> ('crash', 1, 3)."""
    kind, *fields = text.split(":")
    values = dict(field.split("=", 1) for field in fields)
    if kind not in ("crash", "hang") or set(values) != {"rank", "step"}:
        raise ValueError(f"{ENV_VAR} must look like 'crash:rank=1:step=3', got {text!r}")
    return kind, int(values["rank"]), int(values["step"])


def parse_stall(text: str) -> Stall:
    """'stall:rank=0:step=8:seconds=0.2:every=3' -> Stall(0, 8, 0.2, 3)."""
    kind, *fields = text.split(":")
    try:
        values = dict(field.split("=", 1) for field in fields)
        required, allowed = {"rank", "step", "seconds"}, {"rank", "step", "seconds", "every"}
        if kind != "stall" or not required <= set(values) <= allowed:
            raise ValueError
        stall = Stall(
            int(values["rank"]),
            int(values["step"]),
            float(values["seconds"]),
            int(values.get("every", 0)),
        )
    except ValueError:
        raise ValueError(
            f"{ENV_VAR} must look like 'stall:rank=0:step=8:seconds=0.2' (optionally "
            f"':every=K'), got {text!r}"
        ) from None
    if stall.seconds < 0 or stall.every < 0 or stall.step < 1:
        raise ValueError(f"{ENV_VAR}: a stall needs step >= 1, seconds >= 0, every >= 0")
    return stall


class FaultInjector:
    """Reads the fault request once; `after_step` is a no-op unless this rank is targeted."""

    def __init__(self, rank: int, environ: dict[str, str] | None = None):
        text = (os.environ if environ is None else environ).get(ENV_VAR, "")
        self.stall = parse_stall(text) if text.startswith("stall:") else None
        self.fault = parse_fault(text) if text and self.stall is None else None
        self.rank = rank

    def after_step(self, step: int) -> None:
        """Called at the end of step `step` (from 1), inside its timer."""
        if self.stall is not None:
            if self.stall.rank == self.rank and self.stall.at(step):
                time.sleep(self.stall.seconds)
            return
        if self.fault is None:
            return
        kind, rank, at_step = self.fault
        if rank != self.rank or step != at_step:
            return
        if kind == "crash":
            raise RuntimeError(f"injected crash on rank {rank} at step {step}")
        while True:  # injected hang: only the peers' collective timeout can end this run
            time.sleep(3600)
