"""Where a command will write its files, checked before it does any work.

A sweep's report or a bench table is written after minutes or hours of runs; a path that
cannot be written must fail in one line before the first run, not after the last. The
checks create nothing that stays (a dry run leaves no directory behind): writability is
tried with a temporary file, which also catches what permission bits do not show (a
read-only file system, /proc, or any directory when running as root). The files themselves
are written whole or not at all (`write_atomically`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from trainscale.errors import ConfigError, StoreError


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


def written_path(path: Path) -> Path:
    """The file a write to `path` means: the plain file a symbolic link points at (the link
    stays a link), else `path` itself (a link to a device, /dev/stdout, is written through)."""
    return Path(os.path.realpath(path)) if path.is_symlink() and path.is_file() else path


def is_special_file(path: Path) -> bool:
    """Whether `path` exists and is neither a regular file nor a directory: a device
    (/dev/null, /dev/stdout) or a FIFO, written in place, since nothing can be renamed over
    it without replacing the device or pipe itself."""
    return path.exists() and not path.is_file() and not path.is_dir()


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def database_refusal(path: Path) -> str | None:
    """Why nothing may be written over `path`: it is a SQLite database, a results store
    most likely (a text written there would lose every run in it); None otherwise."""
    try:
        with path.open("rb") as existing:
            if existing.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                return None
    except OSError:  # missing, a directory, unreadable: not a database to keep
        return None
    return "it is a SQLite database (a results store?); give another file name"


def check_out_file(path: Path, what: str = "the table") -> None:
    """ConfigError unless a file can be written at `path`: its directory exists and takes
    new files, and `path` is not a directory (or it is a device or FIFO this process may
    write, such as /dev/stdout)."""
    path = written_path(path)
    if is_special_file(path):
        if not os.access(path, os.W_OK):
            raise ConfigError(f"cannot write {what} to {path}: permission denied")
        return
    parent = path.parent
    if not parent.is_dir():
        raise ConfigError(f"cannot write {what} to {path}: directory {parent} is missing")
    if path.is_dir():
        raise ConfigError(f"cannot write {what} to {path}: it is a directory; give a file name")
    refusal = database_refusal(path)
    if refusal:
        raise ConfigError(f"cannot write {what} to {path}: {refusal}")
    problem = _cannot_write_in(parent)
    if problem:
        raise ConfigError(
            f"cannot write {what} to {path}: no file can be created in {parent} ({problem})"
        )


def replace_bytes(path: Path, content: bytes) -> None:
    """Write `content` through a temporary sibling and a rename, so that no reader sees a
    half-written file (a plot cut by a full disk); OSError as the system raises it."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        # os.open rather than tempfile: the mode then follows the umask like any new file.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.replace(temp, path)
    finally:
        if temp.exists():
            temp.unlink()


def write_atomically(path: Path, write: Callable[[TextIO], object]) -> None:
    """Write a text file through a temporary sibling and a rename, so that a reader never
    sees half of it; `write` gets the open file. StoreError (one line) when it cannot be.

    A symbolic link's target is written (the link stays); a device or FIFO is written in
    place (`is_special_file`): a rename would replace it with a plain file."""
    path = written_path(path)
    if is_special_file(path):
        try:
            with path.open("w", encoding="utf-8", newline="") as out:
                write(out)
        except BrokenPipeError:
            raise  # a reader that stopped (`| head`): the command's quiet exit, as on stdout
        except OSError as error:
            raise StoreError(f"cannot write {path}: {error.strerror or error}") from None
        return
    parent = path.parent
    if not parent.is_dir():
        raise StoreError(f"cannot write {path}: directory {parent} does not exist")
    refusal = database_refusal(path)
    if refusal:
        raise StoreError(f"cannot write {path}: {refusal}")
    temp = parent / f".{path.name}.{os.getpid()}.tmp"
    created = False
    try:
        # os.open rather than tempfile: the mode then follows the umask like any new file.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        created = True
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            write(out)
        os.replace(temp, path)
    except OSError as error:
        raise StoreError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        if created and temp.exists():
            temp.unlink()
