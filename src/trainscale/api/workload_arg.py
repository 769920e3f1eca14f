"""The workload argument of the API functions: a name or reference, as on the command line,
or the Python function that makes a custom workload (its file and name become the
reference, since every worker process imports the workload itself)."""

from __future__ import annotations

import os
import sys
from typing import Any

from trainscale.errors import ConfigError
from trainscale.workloads import Workload

IN_A_FILE = (
    "workers are new processes that import the workload themselves: define it in a .py file "
    "(next to the notebook) and pass 'FILE.py:make_workload' or the function imported from it"
)


def workload_text(workload: Any) -> str:
    """`workload` as the CLI's WORKLOAD argument: a string as it is, a path as text, and a
    module-level function by `FILE.py:NAME`. ConfigError for a spec object or a function
    no other process can import (defined in a notebook cell, or inside another function)."""
    if isinstance(workload, (str, os.PathLike)):
        return os.fspath(workload)
    if isinstance(workload, Workload):
        raise ConfigError(
            f"pass the function that makes workload {workload.name!r}, not the spec: {IN_A_FILE}"
        )
    if not callable(workload):
        raise ConfigError(
            f"a workload is a name, 'FILE.py:ATTR' or a function, not {type(workload).__name__}"
        )
    name = getattr(workload, "__qualname__", "")
    module = sys.modules.get(getattr(workload, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    if file is None or not name.isidentifier():
        raise ConfigError(f"{name or workload!r} cannot be imported by the workers: {IN_A_FILE}")
    return f"{file}:{name}"


def needs_a_workload(function: str, or_script: bool = False) -> ConfigError:
    """The error of `trainscale.<function>()` called without a workload."""
    script = ", or script='train.py'" if or_script else ""
    return ConfigError(
        f"{function}() needs a workload (a name, a reference, or the function that makes "
        f"one){script}"
    )
