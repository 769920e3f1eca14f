"""Types of argument values that several commands take: argparse calls them on the text and
turns their ArgumentTypeError into the command's one error line."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from trainscale.config.values import comma_positive_ints


def given_path(text: str) -> Path:
    """A file or directory name, not empty: Path('') is '.', and writing there was never
    what an empty value (an unset shell variable, say) meant."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a file or directory name")
    return Path(text)


def names_a_folder(text: str) -> bool:
    """Whether a file name ends with a separator: 'out/' names a folder, and Path('out/')
    drops the separator, so a file 'out' would be written where a folder was meant."""
    return text.endswith(("/", os.sep))


def given_file_path(text: str) -> Path:
    """`given_path` for a file (a store, a table): not a name that ends with a separator."""
    path = given_path(text)
    if names_a_folder(text):
        raise argparse.ArgumentTypeError(f"{text!r} names a folder; give a file name")
    return path


def given_file_path_text(text: str) -> str:
    """`given_file_path`, kept as the text given."""
    given_file_path(text)
    return text


def given_path_text(text: str) -> str:
    """`given_path`, kept as the text given (a trailing separator included)."""
    given_path(text)
    return text


def given_name(text: str) -> str:
    """A name that is not empty or blank (an empty one would silently mean the default)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a name")
    return text


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_ints(text: str) -> tuple[int, ...]:
    """Whole numbers >= 1 separated by commas, at least one: '1,2,4'."""
    try:
        return comma_positive_ints(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
