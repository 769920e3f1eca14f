"""Run options as a TOML table: the pydantic models of a sweep's [base], [grid] and [[points]].

The models are generated from `RunOptions.flat_fields()`, so a run option is declared once
(config/options.py) and every table that takes run options knows it: its flat name, its
type (checked strictly: `workers = "2"` or `workers = true` is refused, a TOML integer is a
number), and its spellings. A key may be the flat name (`threads_per_worker`), the same with
dashes (`threads-per-worker`) or the command-line flag's name (`timeout`, `warmup-steps`);
flags that turn an option off (`--no-eval`) are not spellings of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any

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
from trainscale.config.options import RunOptions, flag_name

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
def run_options_table(name: str, *, axes: bool = False) -> type[RunOptionsTable]:
    """A model of a table of run options, every one optional (subclass it to add keys).

    Args:
        name: the model's name.
        axes: each value is a non-empty list of values (a sweep's [grid]).
    """
    by_key: dict[str, list[str]] = {}
    for spelling, key in option_spellings().items():
        by_key.setdefault(key, []).append(spelling)
    fields: dict[str, Any] = {}
    for key, leaf in RunOptions.flat_fields().items():
        value_type = leaf.annotation
        if (leaf.item.metadata or {}).get("pairs"):
            value_type = Annotated[value_type, BeforeValidator(_pairs_as_text)]
        if axes:
            value_type = Annotated[
                list[value_type], AfterValidator(_an_axis), Expect("a list of values")
            ]
        fields[key] = (value_type, Field(None, validation_alias=AliasChoices(*by_key[key])))
    return create_model(name, __base__=RunOptionsTable, **fields)


def _pairs_as_text(value: Any) -> Any:
    # KEY=VALUE options travel as text, as `-o KEY=VALUE` gives them: TOML numbers and
    # booleans are fine here, written as the command line would.
    if isinstance(value, Mapping):
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
    return value


def _an_axis(values: list[Any]) -> list[Any]:
    if not values:
        raise ValueError("is empty: an axis needs at least one value")
    return values
