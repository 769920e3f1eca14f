"""The rule of scripts that call the API: the call sits under `if __name__ == "__main__":`.

Workers are started with multiprocessing's spawn method, and a spawned process imports the
script it was started from again, as `__mp_main__`, to find the functions it is handed. A
call at the top level of that script would then start a run in every worker while it starts
(the same rule multiprocessing has). The parent reads its script before any run starts and
refuses the call in one line; a worker that imports such a script anyway (one whose guard
this check could not see) leaves at once, with that one line, before anything is stored.
"""

from __future__ import annotations

import ast
import multiprocessing.spawn
import sys
from types import FrameType

from trainscale.errors import ConfigError

RULE = (
    "workers are new processes that import the script again, so a script calls "
    'trainscale.{function}() under `if __name__ == "__main__":` (as multiprocessing requires)'
)


def check_main_guard(function: str) -> None:
    """ConfigError when `trainscale.<function>()` is called from the top-level code of the
    script this process runs without a `__main__` guard; in a worker re-importing such a
    script, SystemExit with the same one line, so the worker starts no run of its own."""
    frame = _main_module_frame()
    if frame is None:
        return
    message = f"{_where(frame)}: {RULE.format(function=function)}"
    if frame.f_globals.get("__name__") == "__mp_main__":
        # A spawned worker re-importing the script: nothing of trainscale's is set up yet,
        # so its message goes out as the exit status's text (one line on stderr).
        raise SystemExit(f"trainscale: error: {message}")
    if _spawn_reruns_main() and not _is_guarded(frame):
        raise ConfigError(message)


def _main_module_frame() -> FrameType | None:
    """The frame of the top-level code of the script this call runs under: a script being
    re-imported as `__mp_main__` (in a spawned process, whose own main is multiprocessing's
    `-c` line), else the main script; None for a notebook, a REPL or a thread."""
    main = sys.modules.get("__main__")
    found = None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            if frame.f_globals.get("__name__") == "__mp_main__":
                return frame
            if frame.f_globals is getattr(main, "__dict__", None):
                found = frame
        frame = frame.f_back
    return found


def _spawn_reruns_main() -> bool:
    """Whether a spawned process imports this process's main module again: asked of
    multiprocessing itself (a script or `python -m pkg.mod` yes; `python -m pkg`, whose
    main is a `__main__` module, and interactive sessions no)."""
    data = multiprocessing.spawn.get_preparation_data("trainscale-worker")
    if "init_main_from_path" in data:
        return True
    name = data.get("init_main_from_name")
    return name is not None and name != "__main__" and not name.endswith(".__main__")


def _is_guarded(frame: FrameType) -> bool:
    """Whether the line the script's top-level code is at lies in an `if` that tests
    `__name__`. A script that cannot be read or parsed counts as guarded: only a sure
    finding refuses a call."""
    try:
        with open(frame.f_code.co_filename, encoding="utf-8") as file:
            tree = ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return True
    line = frame.f_lineno
    # Either branch of such an `if` counts: `if __name__ != "__main__": ... else: run()`
    # is guarded too, and only a sure finding refuses a call.
    return any(
        isinstance(node, ast.If)
        and _tests_name(node.test)
        and node.lineno <= line <= (node.end_lineno or node.lineno)
        for node in ast.walk(tree)
    )


def _tests_name(test: ast.expr) -> bool:
    return any(isinstance(node, ast.Name) and node.id == "__name__" for node in ast.walk(test))


def _where(frame: FrameType) -> str:
    name = frame.f_code.co_filename.rsplit("/", 1)[-1]
    return f"{name} line {frame.f_lineno}"
