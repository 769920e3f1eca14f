"""Keyword arguments of the API functions, checked as the CLI checks its flags: an unknown
name is a ConfigError naming it, the nearest valid name, and every valid name."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError


def check_keywords(function: str, given: Mapping[str, Any], valid: Iterable[str]) -> None:
    """ConfigError for the first keyword in `given` that is not in `valid`."""
    names = sorted(set(valid))
    for key in given:
        if key not in names:
            near = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(
                f"trainscale.{function}() has no option {key!r}{hint}; valid options: "
                f"{', '.join(names)}"
            )


def parameters(*functions: Callable[..., Any], leave_out: Iterable[str] = ()) -> list[str]:
    """The keyword parameters of `functions` (what the API passes on to them), less
    `leave_out` (those the API fills in itself)."""
    skipped = set(leave_out)
    return [
        name
        for function in functions
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        and name not in skipped
    ]


def run_options(function: str, workload: str, options: Mapping[str, Any]) -> RunOptions:
    """The RunOptions the CLI builds from the same flags: `options` by flat name (the flags
    without dashes, e.g. `global_batch_size=128`, `evaluate=False` for --no-eval)."""
    valid = [key for key in RunOptions.flat_fields() if key != "workload"]
    check_keywords(function, options, [*valid, "store", "progress"])
    flat = dict(options)
    pairs = flat.get("workload_options")
    if pairs is not None and not isinstance(pairs, Mapping):  # (KEY, VALUE) pairs, as -o
        flat["workload_options"] = dict(pairs)
    return RunOptions.of(workload, **flat)
