"""Parsers of comma-separated option values that options declare (`option(parse=...)`).

Each raises ValueError with the line the user sees (config/cli.py shows it as argparse's
error for the option); from Python, the option's field takes the parsed tuple directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def comma_names(text: str) -> tuple[str, ...]:
    """Names separated by commas, blanks ignored: 'matmul, allreduce'."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def comma_whole_numbers(text: str) -> tuple[int, ...]:
    """Whole numbers separated by commas (empty parts ignored); their range is the
    option's to check."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"expected whole numbers separated by commas, got {text!r}") from None


def comma_list(parse: Callable[[str], T]) -> Callable[[str], tuple[T, ...]]:
    """A parser applying `parse` to each comma-separated part (blanks ignored)."""

    def parse_all(text: str) -> tuple[T, ...]:
        return tuple(parse(part) for part in text.split(",") if part.strip())

    return parse_all


def comma_positive_ints(text: str) -> tuple[int, ...]:
    """Whole numbers >= 1 separated by commas, at least one: '1,2,4'."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"expected whole numbers separated by commas, got {text!r}") from None
    if not values or any(value < 1 for value in values):
        raise ValueError(f"expected positive whole numbers, got {text!r}")
    return values
