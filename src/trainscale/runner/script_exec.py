"""Run a user's training script as `__main__` in this worker, under an active meter, and say
in one line why it failed when it did.

The script runs as `python SCRIPT ARGS...` would run it (runpy, `sys.argv = [SCRIPT,
*ARGS]`), so a script that works under torchrun works unchanged. Its errors become one
`WorkloadError` line: an exception with the innermost line of the script it passed through,
a non-zero `sys.exit` (argparse's exit 2 on bad arguments) with the last line the script
wrote to stderr (argparse's own message), a script that never timed a step with how long it
ran. `sys.exit(0)` or `sys.exit()` is how many scripts end: a normal end, as is the meter's
stop at the run's step limit (`StepLimitReached`: the bench's fixed-length rungs).

With several workers, the end of the first step checks that the script formed a torch process
group: without one each worker trains alone, on its own copy of the model, and the run would
measure N separate trainings as one. The first step's end is the earliest point where the
group must exist (a data-parallel script forms it before wrapping its model, and the first
backward averages gradients through it) and the cheapest: one call, once, and the run stops
before it spends more time on a measurement it cannot use.

On a GPU run (`--device cuda`) the worker's GPU, `cuda:LOCAL_RANK`, is made the current
device before the script starts, as trainscale's own workers select theirs: a script that
says plain "cuda" then lands on its own GPU, as DDP examples expect, and one that picks
`cuda:LOCAL_RANK` itself gets the same. The script's environment is torchrun's, unchanged
(`CUDA_VISIBLE_DEVICES` is not narrowed), so its own device arithmetic holds. The meter
reads the CUDA events still queued when the script ends (`StepMeter.settle`), so the
measurements handed over are complete. A missing process group's line names the backend
of the run's device: gloo on the CPU, NCCL (with DDP on the worker's GPU) on a GPU.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import torch
import torch.distributed as dist

from trainscale.errors import WorkloadError
from trainscale.train.meter import (
    Clock,
    ScriptMeasurements,
    StepLimitReached,
    activate,
    deactivate,
)
from trainscale.workloads.custom import Reference, user_code_error


class _LastLine:
    """stderr as it is, remembering the last non-empty line written (argparse's message)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.last = ""

    def write(self, text: str) -> int:
        lines = [line for line in text.splitlines() if line.strip()]
        if lines:
            self.last = lines[-1].strip()
        return self.stream.write(text)

    def __getattr__(self, name: str) -> object:  # flush, fileno, isatty... as the stream's
        return getattr(self.stream, name)


class NoProcessGroup(BaseException):
    """Stops a script that trains on several workers without a process group (a
    BaseException, so that the script's `except Exception` does not swallow it)."""


def group_check(world_size: int, device: str = "cpu") -> Callable[[], None] | None:
    """What the end of the first step checks with `world_size` workers: that the script
    formed a torch process group (NoProcessGroup, with the line to print, where it did
    not); None for one worker, which needs no group. The line names what the run's
    `device` trains with: gloo on the CPU; on a GPU, NCCL and DDP on the worker's GPU."""
    if world_size <= 1:
        return None
    if device == "cuda":
        advice = (
            'torch.distributed.init_process_group("nccl") and wrap the model in '
            "DistributedDataParallel(model, device_ids=[local_rank])"
        )
    else:
        advice = (
            'torch.distributed.init_process_group("gloo") and wrap the model in '
            "DistributedDataParallel"
        )

    def check() -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise NoProcessGroup(
                f"the script trained 1 step on each of {world_size} workers without a "
                "process group (torch.distributed is not initialized): each worker would "
                f"train alone on its own copy of the model; call {advice} "
                "(docs/own-scripts.md), or run with --workers 1"
            )

    return check


def use_local_gpu(device: str, local_rank: int) -> None:
    """Put the script on the run's device before it starts: on a cuda run make
    `cuda:local_rank` the current device (the parent checked that this node has a GPU for
    each of its workers, runner/resolve.py); on a CPU run hide the GPUs
    (`CUDA_VISIBLE_DEVICES=""`), so a script that trains on "cuda" whenever
    `torch.cuda.is_available()` trains on the CPU the run measures and stores, not on a GPU
    behind its back. Hiding works only before CUDA is first queried in this process: the
    worker calls this before anything asks torch about GPUs."""
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def run_script(
    script: str,
    args: Sequence[str],
    max_steps: int | None = None,
    *,
    clock: Clock | None = None,
    device: str = "cpu",
) -> ScriptMeasurements:
    """Run `script` (an absolute path) with `args`; return this worker's measurements,
    every step read. `max_steps` stops the script after that many steps, a normal end
    (None: the script trains to its own end); `clock` times the steps (None: the meter's
    choice at the first step, CUDA events where the script uses CUDA); `device` is the
    run's (what a missing process group's line advises). Raises WorkloadError (one line)
    when the script fails, timed no step, or trains on several workers (torchrun's
    WORLD_SIZE) without a process group."""
    name = Path(script).name
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    meter = activate(max_steps, group_check(world_size, device), clock)
    argv, stderr, path = sys.argv, sys.stderr, list(sys.path)
    sys.argv = [script, *args]
    # As `python script.py` and torchrun do: the script imports the modules beside it.
    sys.path.insert(0, str(Path(script).parent))
    tee = _LastLine(stderr)
    sys.stderr = tee  # a stream in all but name
    start = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            # sys.exit("message") ends with status 1 and that message, as Python prints it.
            status = stop.code if isinstance(stop.code, int) else 1
            last = tee.last if isinstance(stop.code, int) else " ".join(str(stop.code).split())
            said = f": {last}" if last else ""
            raise WorkloadError(f"script {name} exited with status {status}{said}") from None
    except StepLimitReached:
        pass  # the run's steps are trained: the script's end, as the run wants it
    except NoProcessGroup as stop:
        raise WorkloadError(str(stop)) from None
    except (Exception, KeyboardInterrupt) as error:
        # A worker's own Ctrl-C ends it quietly (exit_quietly_on_signals): a
        # KeyboardInterrupt here is the script's own raise, an error like any other.
        reference = Reference(script, "__main__", is_file=True)
        raise user_code_error(error, reference, f"script {name}:") from error
    finally:
        sys.argv, sys.stderr, sys.path[:] = argv, stderr, path
        deactivate()
    elapsed = time.perf_counter() - start
    try:
        meter.settle()  # the script has ended: the device has finished its steps, or nearly
    except Exception as error:  # an asynchronous CUDA error surfaces at the synchronisation
        reference = Reference(script, "__main__", is_file=True)
        raise user_code_error(error, reference, f"script {name}: at its end:") from error
    if not meter.measurements.step_times_s:
        raise WorkloadError(
            f"the script ran {elapsed:.1f} s and timed no step: wrap each training step in "
            "`with meter.step(samples=...)` (docs/own-scripts.md)"
        )
    return meter.measurements
