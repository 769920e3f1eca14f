"""The known name a mistyped one most resembles, for the "did you mean ...?" of an error
line: a flag, a TOML key, an API keyword, a workload, a preset, a recipe, a -o option."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest_name(given: object, names: Iterable[str]) -> str | None:
    """The name in `names` closest to `given` (difflib's ratio of at least 0.6, its default),
    or None when none is close: 'wrokers' -> 'workers', 'zzzz' -> None."""
    matches = difflib.get_close_matches(str(given), list(names), n=1)
    return matches[0] if matches else None


def did_you_mean(given: object, names: Iterable[str]) -> str:
    """' (did you mean NAME?)' for the name closest to `given`, or '' when none is close, to
    follow the words that say what was unknown: "unknown recipe 'scalng' (did you mean
    scaling?); valid recipes: ..."."""
    near = nearest_name(given, names)
    return f" (did you mean {near}?)" if near else ""
