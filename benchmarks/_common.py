"""Helpers shared by the benchmark scripts: run `trainscale run` and summarise ratios."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def trainscale_run(args: list[str], store: Path, env: dict[str, str] | None = None) -> dict:
    """One `trainscale run ... --json` in a fresh process (with `env`, else this process's
    environment); returns its JSON result."""
    cmd = [sys.executable, "-m", "trainscale", "run", *args, "--json", "--store", str(store)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env or os.environ.copy())
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    """'median [min, max] (n=K)': the form every benchmark figure is quoted in."""
    return (
        f"{statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}] (n={len(values)})"
    )


MACHINE_KEYS = ("cpu_model", "usable_cores", "bf16_native", "cpu_capability", "torch_version")
"""The facts of `trainscale env` a benchmark's results name their machine by."""


def machine_facts() -> dict:
    """This machine as a benchmark's results record it (see MACHINE_KEYS)."""
    from trainscale.hardware.facts import collect_environment

    env = collect_environment()
    return {key: env.get(key) for key in MACHINE_KEYS}


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))


def bare_step_time(script: str, steps: int, batch_size: int = 128) -> float:
    """The median step time a bare training loop (a script beside this one) prints, run in
    a fresh process with the allocator settings trainscale gives its workers, so the two
    sides of an overhead comparison differ by the harness alone (parallel/allocator.py)."""
    from trainscale.parallel.allocator import worker_allocator_env

    path = Path(__file__).resolve().parent / script
    env = {**os.environ, **worker_allocator_env(os.environ)}
    out = subprocess.run(
        [sys.executable, str(path), "--steps", str(steps), "--batch-size", str(batch_size)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["step_time_s_median"]


def rotated_rounds(
    name: str,
    sides: list[str],
    rounds: int,
    one_run: Callable[[str], dict[str, Any]],
    describe: Callable[[dict[str, Any]], str],
    report: Callable[[list[dict[str, Any]], str | None], None],
) -> str | None:
    """Run every side once a round, the order rotated a step each round so that no side is
    always first (warm caches, turbo), printing `describe(row)` and the round's time; then
    `report(rounds, stopped)` the rounds measured (each `{"order": [...], side:
    one_run(side), ...}`), whatever ended them.

    Returns why the rounds stopped early (a failed run, Ctrl-C: reported with the rounds
    before it), else None. Any other error is a fault of the tools: the rounds before it are
    reported with it, then it propagates."""
    import trainscale
    from trainscale.errors import TrainscaleError

    measured: list[dict[str, Any]] = []
    stopped: str | None = None
    try:
        for index in range(rounds):
            shift = index % len(sides)
            order = sides[shift:] + sides[:shift]
            start = time.perf_counter()
            row = {side: one_run(side) for side in order}
            measured.append({"order": order, **row})
            print(
                f"round {index + 1}/{rounds} ({' '.join(order)}): {describe(row)}, "
                f"{time.perf_counter() - start:.0f} s",
                flush=True,
            )
    except (TrainscaleError, trainscale.RunFailed, KeyboardInterrupt) as error:
        stopped = str(error) or type(error).__name__
        print(f"{name}: stopped after {len(measured)} rounds: {stopped}", file=sys.stderr)
    except Exception as error:
        report(measured, f"{type(error).__name__}: {error}")
        raise
    report(measured, stopped)
    return stopped
