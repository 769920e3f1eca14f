"""Run a user's training script as `__main__` in this worker, under an active meter, and say
in one line why it failed when it did.

The script runs as `python SCRIPT ARGS...` would run it (runpy, `sys.argv = [SCRIPT,
*ARGS]`), so a script that works under torchrun works unchanged. Its errors become one
`WorkloadError` line: an exception with the innermost line of the script it passed through,
a non-zero `sys.exit` (argparse's exit 2 on bad arguments) with the last line the script
wrote to stderr (argparse's own message), a script that never timed a step with how long it
ran. `sys.exit(0)` or `sys.exit()` is how many scripts end: a normal end.
"""

from __future__ import annotations

import runpy
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from trainscale.errors import WorkloadError
from trainscale.train.meter import ScriptMeasurements, activate, deactivate
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


def run_script(script: str, args: Sequence[str]) -> ScriptMeasurements:
    """Run `script` (an absolute path) with `args`; return this worker's measurements.
    Raises WorkloadError (one line) when the script fails or timed no step."""
    name = Path(script).name
    meter = activate()
    argv, stderr = sys.argv, sys.stderr
    sys.argv = [script, *args]
    tee = _LastLine(stderr)
    sys.stderr = tee  # a stream in all but name
    start = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            status = stop.code if isinstance(stop.code, int) else 1
            said = f": {tee.last}" if tee.last else ""
            raise WorkloadError(f"script {name} exited with status {status}{said}") from None
    except Exception as error:
        reference = Reference(script, "__main__", is_file=True)
        raise user_code_error(error, reference, f"script {name}:") from error
    finally:
        sys.argv, sys.stderr = argv, stderr
        deactivate()
    elapsed = time.perf_counter() - start
    if not meter.measurements.step_times_s:
        raise WorkloadError(
            f"the script ran {elapsed:.1f} s and timed no step: wrap each training step in "
            "`with meter.step(samples=...)` (docs/own-scripts.md)"
        )
    return meter.measurements
