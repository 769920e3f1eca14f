"""A script run from the parent's side: the user's own training script checked and run as the
workers of a run, through the same launcher, CPU plan, pinning and store as a built-in run.

Everything a user can get wrong before the script starts costs one line and stores nothing:
a missing script, a syntax error, an option a script run has no use for (the script decides
its batch, epochs, optimizer and data), more workers than the machine takes. Once the row
exists, a failure is stored with its reason, as for any run (runner/launch.py).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainscale.config.options import RunOptions, flag_name
from trainscale.config.script import SCRIPT_OPTIONS, ScriptRun
from trainscale.errors import ConfigError
from trainscale.hardware.contention import ContentionSampler
from trainscale.parallel.distenv import launched_externally
from trainscale.results.store import RunStore, default_store_path
from trainscale.runner.launch import (
    launch_and_record,
)
from trainscale.runner.record import create_script_row, new_run_id
from trainscale.runner.resolve import resolve_device, resolve_parallel
from trainscale.runner.script_worker import script_worker_main
from trainscale.workloads.custom import DEFAULT_ATTRIBUTE


def is_script(target: str, separated: bool = False) -> bool:
    """Whether `trainscale run TARGET` names a script rather than a custom workload file
    (`my_workload.py` means `my_workload.py:make_workload`, docs/custom-workloads.md).

    A `.py` file followed by `--` (`separated`) is a script; without it, one that calls
    `meter()` (`trainscale.meter()`) and defines no `make_workload`. Anything else goes to
    the workload loader, which says in one line what is wrong with a file it cannot load.
    """
    if not target.endswith(".py") or ":" in target:
        return False
    if separated:
        return True
    try:
        tree = ast.parse(Path(target).expanduser().read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    return _calls_meter(tree) and DEFAULT_ATTRIBUTE not in _top_level_names(tree)


def _calls_meter(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "meter":
                return True
    return False


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def prepare_script(script: str, args: Sequence[str], opts: RunOptions) -> ScriptRun:
    """The script run `opts` asks for, checked; ConfigError (one line) for any mistake."""
    _refuse_options(opts)
    path, digest = check_script(script)
    # As for a built-in run: auto is cuda where torch sees a GPU, cuda needs one GPU per
    # worker of this node, and the CPU plan (pinned cores, host threads) is the same.
    device = resolve_device(opts.parallel.device, opts.parallel.workers)
    parallel = resolve_parallel(opts.parallel, device, channels_last=False)
    return ScriptRun(
        str(path), digest, tuple(args), parallel, opts.measurement, opts.tag, _data_kind(opts)
    )


def _data_kind(opts: RunOptions) -> str:
    """What the script trains on: generated tensors where the user says so (`--data
    synthetic`), else its own real data (trainscale cannot look)."""
    return "synthetic" if opts.data.kind == "synthetic" else "real"


def check_script(script: str) -> tuple[Path, str]:
    """The script's absolute path and SHA-256, once it is known to be a readable file of
    Python that compiles."""
    path = Path(script).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"script {script} not found" if not path.exists() else f"script {script} is not a file"
        )
    try:
        source = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"script {script} cannot be read: {error.strerror}") from None
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as error:
        raise ConfigError(
            f"script {script} line {error.lineno}: syntax error: {error.msg}"
        ) from None
    except ValueError as error:  # null bytes: not Python source at all
        raise ConfigError(f"script {script} is not Python source: {error}") from None
    return path.resolve(), hashlib.sha256(source).hexdigest()


def _refuse_options(opts: RunOptions) -> None:
    """A ConfigError naming the first option given that a script run has no use for."""
    defaults = RunOptions.of(opts.workload).flat()
    fields = RunOptions.flat_fields()
    for key, value in opts.flat().items():
        if key == "workload" or key in SCRIPT_OPTIONS or value == defaults[key]:
            continue
        allowed = ", ".join(f"--{flag_name(fields[k].item)}" for k in SCRIPT_OPTIONS)
        raise ConfigError(
            f"--{flag_name(fields[key].item)} does not apply to a script run (the script "
            f"decides it; pass the script's own arguments after --); a script run takes "
            f"{allowed}"
        )


def start_script_run(
    script: str,
    args: Sequence[str],
    opts: RunOptions,
    store_path: Path | str | None = None,
    *,
    max_steps: int | None = None,
    repeat_index: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run `script` with `args` as the workers of one measured run; the stored run as the
    `--json` dictionary. `max_steps` stops the script after that many steps (the meter's
    limit, a normal end; None: the script's own end); `repeat_index` is the bench's round;
    `progress`: rank 0 prints a line every ~10 s while the script trains (False: --quiet).
    Raises ConfigError before anything is stored, RunFailed (stored failed with its reason)
    or RunInterrupted once the run has started."""
    if launched_externally():
        raise ConfigError(
            "a script run launches its own workers: run `trainscale run SCRIPT.py --workers "
            "N` outside torchrun (under torchrun, the script itself is what torchrun starts)"
        )
    prepared = prepare_script(script, args, opts)
    run = dataclasses.replace(prepared, max_steps=max_steps, progress=progress)
    # Absolute: rank 0 stores the run after the script ran, wherever it went (os.chdir).
    store_file = (Path(store_path) if store_path else default_store_path()).absolute()
    run_id = new_run_id()
    with RunStore(store_file) as store:
        create_script_row(store, run_id, run, repeat_index)
    sets = run.parallel.core_sets
    sampler = ContentionSampler(sorted({c for s in sets for c in s}) if sets else None).start()
    worker_args = (run, run_id, str(store_file))
    return launch_and_record(
        script_worker_main, worker_args, run.parallel.workers, store_file, run_id, sampler
    )
