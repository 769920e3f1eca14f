"""Where a command will write its files, checked before it does any work.

A sweep's report or a bench table is written after minutes or hours of runs; a path that
cannot be written must fail in one line before the first run, not after the last. The
checks create nothing that stays (a dry run leaves no directory behind): writability is
tried with a temporary file, which also catches what permission bits do not show (a
read-only file system, /proc, or any directory when running as root).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from trainscale.errors import ConfigError


def _cannot_write_in(directory: Path) -> str | None:
    """Why no file can be created in `directory` (an existing directory), or None."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".trainscale-check-"):
            pass
    except OSError as error:
        return error.strerror or str(error)
    return None


def check_out_dir(path: Path, what: str = "the report") -> None:
    """ConfigError unless `path` is a writable directory, or does not exist yet and its
    nearest existing ancestor is a writable directory (so it can be created)."""
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"cannot write {what} to {path}: it is a file, not a directory")
        problem = _cannot_write_in(path)
        if problem:
            raise ConfigError(
                f"cannot write {what} to {path}: no file can be created there ({problem})"
            )
        return
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(f"cannot create {path} for {what}: {ancestor} is a file")
    problem = _cannot_write_in(ancestor)
    if problem:
        raise ConfigError(
            f"cannot create {path} for {what}: nothing can be created in {ancestor} ({problem})"
        )


def check_out_file(path: Path, what: str = "the table") -> None:
    """ConfigError unless a file can be written at `path`: its directory exists and takes
    new files, and `path` is not a directory."""
    parent = path.parent
    if not parent.is_dir():
        raise ConfigError(f"cannot write {what} to {path}: directory {parent} is missing")
    if path.is_dir():
        raise ConfigError(f"cannot write {what} to {path}: it is a directory; give a file name")
    problem = _cannot_write_in(parent)
    if problem:
        raise ConfigError(
            f"cannot write {what} to {path}: no file can be created in {parent} ({problem})"
        )
