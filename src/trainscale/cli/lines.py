"""What the command line writes besides results: one terminal line per error or warning,
and a quiet exit when its reader has gone."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any, NoReturn


def print_json(value: Any, indent: int | None = None) -> None:
    """Print `value` as strict JSON on standard output: every --json output ends here, so
    that none writes NaN or Infinity, which JSON does not have and strict readers refuse (a
    figure that is not finite is null, as in the run export)."""
    from trainscale.results.export import finite_or_none  # only when JSON is printed

    print(json.dumps(finite_or_none(value), indent=indent, allow_nan=False))


def one_line(text: str) -> str:
    """`text` as one terminal line: whitespace runs folded to a space, and any other
    character a terminal would not print as itself (controls, line and record separators,
    escape sequences that a user's input may carry) written as its Python escape."""
    folded = " ".join(text.split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in folded)


class WarningLines(logging.Handler):
    """The library's warnings (e.g. a damaged stored row left out of a listing) as one
    `trainscale: warning: ...` line each on stderr, each said once per command."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = one_line(record.getMessage())
        if message in self.said:
            return
        self.said.add(message)
        # sys.stderr at the time of the warning, not at start-up: tests swap it.
        print(f"trainscale: warning: {message}", file=sys.stderr)


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; a mistake should cost the user one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see `{self.prog} --help`)\n")


def discard_stdout() -> None:
    """Point standard output at the null device, so that what is still buffered is dropped
    quietly at exit instead of raising BrokenPipeError again (the recipe of Python's
    `signal` documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (captured in tests): nothing is flushed to a pipe at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


@contextlib.contextmanager
def stdout_to_stderr(active: bool = True) -> Iterator[None]:
    """While the block runs, what is written to standard output goes to standard error: by
    this process and by the processes it starts, which inherit its descriptors.

    For `--json`: standard output then carries the one JSON document the command prints
    after the block, whatever a workload's code printed (a `print()` in its model, its
    import, its factory) while the run was made. Inactive, the block runs as it is.
    """
    if not active:
        yield
        return
    sys.stdout.flush()
    saved: int | None = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)  # the workers, started in the block, inherit descriptor 1 as it is now
    except OSError:  # no descriptor 1 or 2 (a detached process): Python's own stream only
        if saved is not None:
            os.close(saved)
            saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
