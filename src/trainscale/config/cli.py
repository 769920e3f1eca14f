"""The command-line form of run options, generated from their declarations in options.py.

Each option group becomes an argparse argument group; each field an option whose flag,
type, choices, default and help come from the field (its docstring is the help text). The
inverse, `run_command`, renders RunOptions as the `trainscale run` command that reproduces
them, from the same declarations.

Written by hand rather than with a generator such as tyro: trainscale's flags predate the
grouping (`--workers`, not `--parallel.workers`), and stored commands must keep parsing.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import math
import shlex
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING
from functools import cache
from typing import Any, TypeVar, get_args, get_type_hints

from trainscale.config.options import (
    DataOptions,
    FlatField,
    MeasurementOptions,
    NodeOptions,
    OptimisationOptions,
    ParallelOptions,
    RunOptions,
    literal_choices,
    option_leaves,
)
from trainscale.errors import ConfigError

T = TypeVar("T")

OPTION_GROUPS: tuple[type, ...] = (
    DataOptions,
    ParallelOptions,
    OptimisationOptions,
    MeasurementOptions,
    NodeOptions,
)
"""The groups, in `--help` order."""

DECLARED = "run_option_keys"
"""The parser default naming the run options a command declared."""


@cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of a dataclass, whitespace folded.

    Python keeps no attribute docstrings at run time, so they are read from the class's
    source, as Sphinx and tyro do.
    """
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for statement, following in zip(body, body[1:], strict=False):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = " ".join(following.value.value.split())
    return docs


def _group_title(cls: type) -> tuple[str, str]:
    """('parallelism', 'devices, worker processes, ...') from the class docstring."""
    title, _, description = (cls.__doc__ or "").partition(":")
    # Commands keep their epilog's line breaks (RawDescriptionHelpFormatter), so the group
    # description is wrapped here.
    return title.strip(), textwrap.fill(" ".join(description.split()), width=88)


def leaf_flag(leaf: FlatField) -> str:
    """The long flag of a leaf: declared, or `--` + its field name with dashes."""
    return leaf.item.metadata.get("flag") or "--" + leaf.name.replace("_", "-")


def _value_parser(leaf: FlatField) -> Callable[[str], Any] | None:
    declared = leaf.item.metadata.get("parse")
    parse = declared
    if parse is None:
        for candidate in (int, float, str):
            if leaf.annotation is candidate or candidate in get_args(leaf.annotation):
                parse = candidate
                break
    if parse is None or parse is str:
        return parse

    def typed(text: str) -> Any:
        try:
            value = parse(text)
        except (ValueError, ConfigError) as error:  # argparse shows ArgumentTypeError's text
            kind = {int: "a whole number", float: "a number"}.get(parse, parse.__name__)
            message = str(error) if declared else f"expected {kind}, got {text!r}"
            raise argparse.ArgumentTypeError(message) from None
        # No option means anything by inf or nan: one line here, not a crash an hour in.
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        return value

    return typed


def _help(leaf: FlatField, cls: type, override: str | None, default: Any) -> str:
    """The field's docstring (or the command's rewording), with its default appended unless
    the text already says what the default is or there is nothing to say (off, unset)."""
    text = override or field_docs(cls).get(leaf.name, "")
    shown = default is not None and default is not False and default != {}
    if shown and not leaf.item.metadata.get("negate") and "(default" not in text:
        text += (
            f" (default: {default:g})" if isinstance(default, float) else f" (default: {default})"
        )
    return text.replace("%", "%%")  # argparse formats help with %-style placeholders


def add_option_arguments(
    parser: argparse.ArgumentParser,
    *,
    only: Iterable[str] | None = None,
    help_overrides: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Add the run options (or `only` those flat names) to `parser`, grouped as declared.

    `help_overrides` rewords an option for a command where it means something narrower
    (emulate's --steps are global steps); `defaults` changes a default for one command.
    The parser remembers which options it declared (`options_from_args` reads those only,
    so a command's own option of the same name, such as emulate's --workers list, is left
    alone).
    """
    wanted = None if only is None else set(only)
    overrides = dict(help_overrides or {})
    changed = dict(defaults or {})
    leaves = RunOptions.flat_fields()
    group_types = get_type_hints(RunOptions)
    declared: list[str] = []
    for cls in OPTION_GROUPS:
        group_leaves = [
            leaf
            for leaf in leaves.values()
            if leaf.group is not None
            and group_types[leaf.group] is cls
            and (wanted is None or leaf.key in wanted)
        ]
        if not group_leaves:
            continue
        title, description = _group_title(cls)
        group = parser.add_argument_group(title, description or None)
        exclusive: dict[str, Any] = {}
        for leaf in group_leaves:
            target = _exclusive_target(group, leaf, exclusive)
            _add_leaf(target, leaf, cls, overrides.get(leaf.key), changed)
            declared.append(leaf.key)
    parser.set_defaults(**{DECLARED: tuple(declared)})


def _add_leaf(
    target: Any, leaf: FlatField, cls: type, help_override: str | None, changed: Mapping
) -> None:
    metadata = leaf.item.metadata
    flags = [f for f in (metadata.get("short"), leaf_flag(leaf)) if f]
    default = changed.get(leaf.key, leaf.default())
    common: dict[str, Any] = {"dest": leaf.key}
    if default is MISSING:  # a field without a default: the command cannot run without it
        common["required"] = True
        default = None
    common["help"] = _help(leaf, cls, help_override, default)
    if metadata.get("negate"):
        target.add_argument(*flags, action="store_false", default=default, **common)
    elif leaf.annotation is bool:
        target.add_argument(*flags, action="store_true", default=default, **common)
    elif metadata.get("pairs"):
        target.add_argument(
            *flags,
            action="append",
            type=_value_parser(leaf),
            default=[],
            metavar=metadata.get("metavar"),
            **common,
        )
    elif metadata.get("many"):
        target.add_argument(
            *flags, nargs="+", default=default, metavar=metadata.get("metavar"), **common
        )
    else:
        choices = literal_choices(leaf.annotation) or None
        target.add_argument(
            *flags,
            type=_value_parser(leaf) if choices is None else None,
            choices=choices,
            default=default,
            metavar=metadata.get("metavar"),
            **common,
        )


def add_declared_options(
    target: Any,
    cls: type,
    *,
    only: Iterable[str] | None = None,
) -> None:
    """Add the options a command's own options dataclass declares to `target` (a parser or
    an argument group), as run options are added: each field made with `option()` is an
    option, its docstring the help text, its type, default and choices the field's; a field
    without a default is a required option. `only` adds those fields (the rest go in another
    group, by another call). `declared_from_args` reads them all back."""
    wanted = None if only is None else set(only)
    exclusive: dict[str, Any] = {}
    for leaf in option_leaves(cls).values():
        if wanted is None or leaf.key in wanted:
            _add_leaf(_exclusive_target(target, leaf, exclusive), leaf, cls, None, {})


def add_declared_group(parser: argparse.ArgumentParser, cls: type) -> Any:
    """An argument group of `parser` titled by the docstring of `cls` ('title: what it
    is'), holding every option `cls` declares; the group, for a command to add more to."""
    title, description = _group_title(cls)
    group = parser.add_argument_group(title, description or None)
    add_declared_options(group, cls)
    return group


def _exclusive_target(target: Any, leaf: FlatField, made: dict[str, Any]) -> Any:
    """Where `leaf` goes: `target`, or the mutually exclusive group of `target` named by
    the leaf's `exclusive` (made once, kept in `made`)."""
    name = leaf.item.metadata.get("exclusive")
    if not name:
        return target
    if name not in made:
        made[name] = target.add_mutually_exclusive_group()
    return made[name]


def declared_from_args(cls: type[T], args: argparse.Namespace) -> T:
    """The options dataclass `cls` from arguments `add_declared_options` added."""
    values: dict[str, Any] = {}
    for leaf in option_leaves(cls).values():
        value = getattr(args, leaf.key)
        if leaf.item.metadata.get("pairs"):
            value = dict(value)
        elif leaf.item.metadata.get("many"):
            value = tuple(value)
        values[leaf.name] = value
    return cls(**values)


def given_flags(options: Any, names: Iterable[str] | None = None) -> list[str]:
    """The flags of the options of `options` (a command's options dataclass, or RunOptions)
    whose value is not the declared default, of those named in `names` (flat names; else
    all), in declaration order: what the user asked for, so that where an option does not
    apply it can be refused by name instead of ignored."""
    wanted = None if names is None else set(names)
    flags = []
    for key, leaf in option_leaves(type(options)).items():
        holder = options if leaf.group is None else getattr(options, leaf.group)
        if (wanted is None or key in wanted) and getattr(holder, leaf.name) != leaf.default():
            flags.append(leaf_flag(leaf))
    return flags


def refuse_given(options: Any, names: Iterable[str] | None, why: str) -> None:
    """ConfigError naming the first option of `names` (else of all) that `options` was given
    (`given_flags`); `why` completes the line: "--nodes is for predictions; ..."."""
    given = given_flags(options, names)
    if given:
        raise ConfigError(f"{given[0]} {why}")


def add_tag_argument(parser: argparse.ArgumentParser, target: Any) -> None:
    """--tag TEXT on `target` (a group of `parser`): the run's free-form label, a top-level
    field of RunOptions."""
    _add_leaf(target, RunOptions.flat_fields()["tag"], RunOptions, None, {})
    declared = parser.get_default(DECLARED) or ()
    parser.set_defaults(**{DECLARED: (*declared, "tag")})


def options_from_args(args: argparse.Namespace, workload: str | None = None) -> RunOptions:
    """RunOptions from parsed arguments: the run options the command declared (by flat
    name), and the `workload` argument or the one given here."""
    values = {key: getattr(args, key) for key in getattr(args, DECLARED, ())}
    if hasattr(args, "workload"):
        values["workload"] = args.workload
    if workload is not None:
        values["workload"] = workload
    if isinstance(values.get("workload_options"), list):
        values["workload_options"] = dict(values["workload_options"])
    return RunOptions.from_flat(values)


def _word(flag: str, text: str) -> list[str]:
    # A value starting with '-' would be taken for an option: attach it with '='.
    return [f"{flag}={text}"] if text.startswith("-") else [flag, text]


def run_command(
    options: RunOptions, explicit: Iterable[str] = (), workload: str | None = None
) -> str:
    """The `trainscale run ...` command line for `options`, shell-quoted with shlex.

    Only options that differ from their defaults are written, except the flat names in
    `explicit`, which are always written (a recommendation spells out every axis it chose,
    even where the choice is the default). `workload` names the workload on the command line
    when its name alone would not (a custom workload's reference).
    """
    always = set(explicit)
    words = ["trainscale", "run", workload or options.workload]
    for key, value in options.flat().items():
        leaf = RunOptions.flat_fields()[key]
        if key == "workload" or (value == leaf.default() and key not in always):
            continue
        flag = leaf_flag(leaf)
        metadata = leaf.item.metadata
        if metadata.get("negate"):
            if not value:
                words.append(flag)
        elif leaf.annotation is bool:
            if value:
                words.append(flag)
        elif metadata.get("pairs"):
            for item_key, item_value in dict(value).items():
                words += _word(flag, f"{item_key}={item_value}")
        elif value is not None:
            words += _word(flag, str(value))
    return shlex.join(words)
