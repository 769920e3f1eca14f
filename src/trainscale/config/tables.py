"""Run options as a TOML table: the pydantic models of a sweep's [base], [grid] and [[points]].

The models are generated from `RunOptions.flat_fields()`, so a run option is declared once
(config/options.py) and every table that takes run options knows it: its flat name, its
type (checked strictly: `workers = "2"` or `workers = true` is refused, a TOML integer is a
number), and its spellings. A key may be the flat name (`threads_per_worker`), the same with
dashes (`threads-per-worker`) or the command-line flag's name (`timeout`, `warmup-steps`);
flags that turn an option off (`--no-eval`) are not spellings of it.

The Python API checks its run options with the same models (`python=True`): there a path
option also takes an os.PathLike and KEY=VALUE options also take (KEY, VALUE) pairs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, get_args

from pydantic import (
    AfterValidator,
    AliasChoices,
    BeforeValidator,
    Field,
    PrivateAttr,
    create_model,
    model_validator,
)

from trainscale.config.files import Expect, TomlTable
from trainscale.config.options import FlatField, RunOptions, flag_name

_OLD_SPELLINGS = {"workload_options": ("options",)}
"""Spellings sweep files used before the flags had their present names."""


class RunOptionsTable(TomlTable):
    """A table whose keys are run options; `given()` is what the file set, in its order."""

    expect = "a table of run options"
    unknown_key = "unknown run option (see `trainscale run --help`)"

    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _one_spelling_each(cls, data: Any, handler: Any) -> Any:
        if not isinstance(data, Mapping):
            return handler(data)
        # An option given twice, in two spellings: the last one counts, as on a command line.
        names = option_spellings()
        last = {names[key]: key for key in data if key in names}
        data = {k: v for k, v in data.items() if k not in names or last[names[k]] == k}
        table = handler(data)
        # Fields come in declaration order; the file's order names a sweep's axes and labels.
        table._order = [names[key] for key in data if key in names]
        return table

    def given(self) -> dict[str, Any]:
        """The run options the table sets, by flat name, in the file's order."""
        return {name: getattr(self, name) for name in self._order}


@cache
def option_spellings() -> dict[str, str]:
    """Every accepted spelling of a run option's key -> its flat name."""
    spellings: dict[str, str] = {}
    for key, leaf in RunOptions.flat_fields().items():
        names = [key, *_OLD_SPELLINGS.get(key, ())]
        if not (leaf.item.metadata or {}).get("negate"):
            names.append(flag_name(leaf.item))
        for name in names:
            spellings[name] = spellings[name.replace("-", "_")] = key
            spellings[name.replace("_", "-")] = key
    return spellings


@cache
def run_options_table(
    name: str, *, axes: bool = False, python: bool = False
) -> type[RunOptionsTable]:
    """A model of a table of run options, every one optional (subclass it to add keys). A
    value given must still be of the option's declared type: None only where it allows None.

    Args:
        name: the model's name.
        axes: each value is a non-empty list of values (a sweep's [grid]).
        python: the values come from Python code (the API's keywords): see `option_type`.
    """
    by_key: dict[str, list[str]] = {}
    for spelling, key in option_spellings().items():
        by_key.setdefault(key, []).append(spelling)
    fields: dict[str, Any] = {}
    for key, leaf in RunOptions.flat_fields().items():
        value_type = option_type(leaf, python=python)
        if axes:
            value_type = Annotated[
                list[value_type],  # type: ignore[valid-type]  # built at run time
                AfterValidator(_an_axis),
                Expect("a list of values"),
            ]
        fields[key] = (value_type, Field(None, validation_alias=AliasChoices(*by_key[key])))
    return create_model(name, __base__=RunOptionsTable, **fields)


def option_type(leaf: FlatField, *, python: bool = False) -> Any:
    """The type a run option's value is validated as (strictly): its declared type, with
    KEY=VALUE options' values taken as text. With `python`, a path option (`data_dir`) also
    takes an os.PathLike, kept as its text, and KEY=VALUE options also take a sequence of
    (KEY, VALUE) pairs; errors then say what a Python caller may pass."""
    metadata = leaf.item.metadata or {}
    value_type = leaf.annotation
    optional = " or None" if _allows_none(value_type) else ""
    if metadata.get("pairs"):
        if not python:
            return Annotated[value_type, BeforeValidator(_pairs_as_text)]
        expect = Expect(f"a dict of KEY: VALUE, or (KEY, VALUE) pairs{optional}")
        return Annotated[value_type, BeforeValidator(_pairs_from_python), expect]
    if metadata.get("path") and python:
        expect = Expect(f"a str or os.PathLike{optional}")
        return Annotated[value_type, BeforeValidator(_path_as_text), expect]
    return value_type


def _allows_none(annotation: Any) -> bool:
    return annotation is None or type(None) in get_args(annotation)


def _path_as_text(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _pairs_from_python(value: Any) -> Any:
    # (KEY, VALUE) pairs, as repeated `-o KEY=VALUE` give them, or a dict; numbers and
    # booleans are written as the command line would; other values are left for the type
    # check to refuse.
    if isinstance(value, (list, tuple)) and all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in value
    ):
        try:
            value = dict(value)
        except TypeError:  # a key that cannot be one (a list): refused below
            return value
    if isinstance(value, Mapping):
        return {
            k: _as_text(v) if isinstance(v, (bool, int, float)) else v for k, v in value.items()
        }
    return value


def _pairs_as_text(value: Any) -> Any:
    # KEY=VALUE options travel as text, as `-o KEY=VALUE` gives them: TOML numbers and
    # booleans are fine here, written as the command line would.
    if isinstance(value, Mapping):
        return {str(k): _as_text(v) for k, v in value.items()}
    return value


def _as_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _an_axis(values: list[Any]) -> list[Any]:
    if not values:
        raise ValueError("is empty: an axis needs at least one value")
    return values
