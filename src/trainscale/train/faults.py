"""Deliberate worker faults, for testing that a crash or a hang ends a run cleanly.

Set TRAINSCALE_FAULT_INJECT to 'crash:rank=R:step=S' or 'hang:rank=R:step=S'. Rank R then
raises (crash) or sleeps forever (hang) after finishing step S. Nothing happens without it.
"""

from __future__ import annotations

import os
import time

ENV_VAR = "TRAINSCALE_FAULT_INJECT"


def parse_fault(text: str) -> tuple[str, int, int]:
    """'crash:rank=1:step=3' -> ('crash', 1, 3)."""
    kind, *fields = text.split(":")
    values = dict(field.split("=", 1) for field in fields)
    if kind not in ("crash", "hang") or set(values) != {"rank", "step"}:
        raise ValueError(f"{ENV_VAR} must look like 'crash:rank=1:step=3', got {text!r}")
    return kind, int(values["rank"]), int(values["step"])


class FaultInjector:
    """Reads the fault request once; `after_step` is a no-op unless this rank is targeted."""

    def __init__(self, rank: int, environ: dict[str, str] | None = None):
        text = (os.environ if environ is None else environ).get(ENV_VAR, "")
        self.fault = parse_fault(text) if text else None
        self.rank = rank

    def after_step(self, step: int) -> None:
        if self.fault is None:
            return
        kind, rank, at_step = self.fault
        if rank != self.rank or step != at_step:
            return
        if kind == "crash":
            raise RuntimeError(f"injected crash on rank {rank} at step {step}")
        while True:  # injected hang: only the peers' collective timeout can end this run
            time.sleep(3600)
