"""The bench on a user's own training script (`trainscale bench SCRIPT.py -- ARGS`).

Each rung is a script run (runner/script_launch.py) in the rung's setting: device, workers,
threads, pinning, oversubscription. The script decides its model, data, batch, precision and
length, so the bench gives it none of these: its rungs train the script's own global batch,
and the meter stops each run after the bench's steps (`ScriptRun.max_steps`), whatever length
the script's loop has. The ladder has no bf16 rung (the script chooses its precision); on a
machine with GPUs its GPU rungs are script runs with device cuda, one worker per GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainscale.benchmark.script_target import ScriptTarget
from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.runner.script_launch import is_script, prepare_script, start_script_run

DEFAULT_WORKLOAD = "mnist-cnn"
"""What the bench measures when it is given neither a workload nor a script."""


def bench_target(
    target: str | None, workload: str | None, separated: bool
) -> tuple[str, str | None]:
    """(workload, script) from `trainscale bench [TARGET] [--workload W] [-- ARGS]`: TARGET
    is a script as for `trainscale run` (`is_script`: a `.py` file followed by `--`, or one
    that calls `trainscale.meter()`), else a workload in place of --workload. ConfigError
    for both, or for arguments after `--` without a script."""
    if target is not None and workload is not None:
        raise ConfigError(f"give one workload or script to bench, not {target} and --workload")
    if target is not None and is_script(target, separated):
        return DEFAULT_WORKLOAD, target
    if separated:
        raise ConfigError(
            "arguments after -- are for a script: `trainscale bench SCRIPT.py [options] -- "
            "[its arguments]`"
        )
    return target or workload or DEFAULT_WORKLOAD, None


def script_base(
    target: ScriptTarget,
    data: str,
    tag: str,
    *,
    framework: str,
    data_dir: str | None,
    download: bool,
) -> RunOptions:
    """The options every rung of a script bench starts from, with everything checked that
    can be before the first rung: the script (found, compiles) and the bench options, of
    which those a script decides itself are refused in one line (ConfigError)."""
    given = {
        "--framework": framework != "pytorch",
        "--data-dir": data_dir is not None,
        "--no-download": not download,
    }
    for flag, set_ in given.items():
        if set_:
            raise ConfigError(
                f"{flag} does not apply to a script bench (the script decides its framework "
                "and data; pass its own arguments after --); a script bench takes --quick, "
                "--steps, --rounds, --max-extra-rounds, --data, --store and --out"
            )
    # The script trains on its own data: `auto` means that data, as for `run`.
    base = RunOptions.of(
        target.script, data="synthetic" if data == "synthetic" else "real", tag=tag
    )
    prepare_script(target.script, target.args, base)
    return base


def measure_script(
    target: ScriptTarget,
    options: RunOptions,
    store_path: Path,
    round_index: int | None,
    max_steps: int | None,
) -> dict[str, Any]:
    """One rung's run: the script in the setting of `options`, stopped by the meter after
    `max_steps` steps (None: the whole script), stored with its round as `repeat_index`."""
    return start_script_run(
        target.script,
        list(target.args),
        options,
        store_path,
        max_steps=max_steps,
        repeat_index=round_index,
    )
