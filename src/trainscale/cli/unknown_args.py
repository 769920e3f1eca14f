"""Arguments no command takes, said by the command they were given to, with the option
most like each one: `trainscale run: error: unrecognized arguments: --wokers 2; did you
mean --workers? (see `trainscale run --help`)`.

argparse reports them from the top-level parser (`trainscale: error: ...`, pointing at
`trainscale --help`), which does not list the option that was mistyped; its own suggestions
arrive only in Python 3.14 and only for choices, hence this small addition.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from trainscale.config.suggest import nearest_name


def command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the (sub)command `args` were parsed for: `trainscale runs list` gives
    the parser of `runs list`, following each level's chosen sub-command."""
    while True:
        chosen = None
        for action in parser._actions:  # argparse keeps sub-parsers nowhere public
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(args, action.dest, None)
                chosen = action.choices.get(name) if isinstance(name, str) else None
        if chosen is None:
            return parser
        parser = chosen


def closest_option(parser: argparse.ArgumentParser, given: str) -> str | None:
    """The long option of `parser` most like `given` (`--wokers` -> `--workers`), if one is
    close; a value given with `=` is left out of the comparison."""
    name = given.split("=", 1)[0]
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    return nearest_name(name, options)


def other_commands_with(
    parser: argparse.ArgumentParser, owner: argparse.ArgumentParser, given: str
) -> str:
    """The other commands that take the option `given` names (`bench --workers` ->
    '`trainscale run`, `trainscale emulate`, ...'), at most three, else ''."""
    name = given.split("=", 1)[0]
    found: list[str] = []
    pending, seen = [parser], set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:  # aliases name one parser twice
            continue
        seen.add(id(current))
        options = {o for action in current._actions for o in action.option_strings}
        if current is not owner and name in options:
            found.append(f"`{current.prog}`")
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                pending.extend(action.choices.values())
    return ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")


def spaced_list(parser: argparse.ArgumentParser, argv: list[str], extras: list[str]) -> str:
    """The fix, when `extras` are the further values of an option that takes one
    comma-separated list (`--workers 1 2 4` -> `--workers 1,2,4`), else ''."""
    listed = {
        option
        for action in parser._actions
        if "," in str(action.metavar or "")
        for option in action.option_strings
    }
    for index, token in enumerate(argv[:-1]):
        if token not in listed:
            continue
        values = [argv[index + 1]]
        for value in argv[index + 2 :]:
            if value.startswith("-") or value not in extras:
                break
            values.append(value)
        if len(values) > 1:
            return f"{token} takes one comma-separated list: {token} {','.join(values)}"
    return ""


def reject_unrecognized(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    extras: list[str],
    argv: list[str] | None = None,
) -> NoReturn:
    """Exit through the error of the command `extras` were given to, suggesting for each
    unknown option the known one it most resembles, and the comma-separated list that
    values spaced out after a list option (`argv`, as given) meant."""
    owner = command_parser(parser, args)
    elsewhere = {
        given: commands
        for given in extras
        if given.startswith("--") and (commands := other_commands_with(parser, owner, given))
    }
    likely = {
        given: option
        for given in extras
        if given.startswith("-")
        and given not in elsewhere  # `bench --workers` is not a mistyped --workload
        and (option := closest_option(owner, given)) is not None
    }
    message = "unrecognized arguments: " + " ".join(extras)
    for given, commands in elsewhere.items():
        message += f"; {given.split('=', 1)[0]} is an option of {commands}"
    if len(likely) == 1:
        message += f"; did you mean {next(iter(likely.values()))}?"
    elif likely:
        message += "; did you mean " + ", ".join(f"{o} for {g}" for g, o in likely.items()) + "?"
    if listed := spaced_list(owner, argv or [], extras):
        message += f"; {listed}"
    if _names_a_script(args):
        message += "; a script's own arguments go after `--` (SCRIPT.py -- ARGS)"
    owner.error(message)


def _names_a_script(args: argparse.Namespace) -> bool:
    """Whether the command takes a script's arguments (run, bench, recommend) and was given a
    script (a `.py` file that calls `meter()`): the extras are then likely the script's own."""
    if not hasattr(args, "script_args"):
        return False
    # Imported here: the launcher imports torch, which a mistyped option should not wait for
    # unless a script was named.
    from trainscale.runner.script_launch import is_script

    return any(isinstance(value, str) and is_script(value) for value in vars(args).values())
