"""Render run options as the exact `trainscale run` command line that reproduces them.

The flags are read from the real `trainscale run` parser, not from a copy of its option
list, so an option added to `run_cmd.add_run_options` is rendered without touching this
module, and `parse(render(options)) == options` holds by construction (tests check it).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterable
from dataclasses import MISSING, fields
from typing import Any

from trainscale.config import RunOptions


def _run_parser() -> argparse.ArgumentParser:
    from trainscale.cli import run_cmd

    parser = argparse.ArgumentParser(prog="trainscale")
    subparsers = parser.add_subparsers()
    run_cmd.add_parser(subparsers)
    return subparsers.choices["run"]


def _default(name: str) -> Any:
    for item in fields(RunOptions):
        if item.name == name:
            if item.default is not MISSING:
                return item.default
            if item.default_factory is not MISSING:
                return item.default_factory()
    raise KeyError(name)


def _flag(action: argparse.Action) -> str:
    # The long spelling reads better in a command someone copies: --workload-option, not -o.
    longs = [s for s in action.option_strings if s.startswith("--")]
    return longs[0] if longs else action.option_strings[0]


def _option(flag: str, text: str) -> list[str]:
    # A value starting with '-' would be taken for an option: attach it with '='.
    return [f"{flag}={text}"] if text.startswith("-") else [flag, text]


def run_command(options: RunOptions, explicit: Iterable[str] = ()) -> str:
    """The `trainscale run ...` command line for `options`, shell-quoted with shlex.

    Only options that differ from `RunOptions`' defaults are written, except the fields
    named in `explicit`, which are always written (a recommendation spells out every axis it
    chose, even where the choice is the default). Raises ValueError for a field that differs
    from its default but has no command-line option.
    """
    parser = _run_parser()
    actions = {
        action.dest: action
        for action in parser._actions  # argparse has no public list of its actions
        if action.option_strings and action.dest in RunOptions.__dataclass_fields__
    }
    always = set(explicit)
    words = ["trainscale", "run", options.workload]
    for item in fields(RunOptions):
        name = item.name
        if name == "workload":
            continue
        value = getattr(options, name)
        if value == _default(name) and name not in always:
            continue
        action = actions.get(name)
        if action is None:
            raise ValueError(f"RunOptions.{name} has no `trainscale run` option to render")
        flag = _flag(action)
        if isinstance(action, argparse._StoreTrueAction):
            if value:
                words.append(flag)
        elif isinstance(action, argparse._StoreFalseAction):
            if not value:
                words.append(flag)
        elif isinstance(action, argparse._AppendAction):
            for key, item_value in dict(value).items():
                words += _option(flag, f"{key}={item_value}")
        elif value is not None:
            words += _option(flag, str(value))
    return shlex.join(words)


def parse_run_command(command: str) -> RunOptions:
    """The RunOptions that `trainscale run` would build from `command` (the inverse of
    `run_command`)."""
    from trainscale.cli import build_parser
    from trainscale.cli.run_cmd import options_from_args

    words = shlex.split(command)
    if words[:2] != ["trainscale", "run"]:
        raise ValueError(f"not a `trainscale run` command: {command!r}")
    return options_from_args(build_parser().parse_args(words[1:]))
