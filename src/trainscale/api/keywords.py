"""Keyword arguments of the API functions, checked as the CLI checks its flags, before
anything starts or is stored.

An unknown name is a ConfigError naming it, the nearest valid name and every valid name. A
value is checked strictly against its declared type: run options against their declarations
in config/options.py, through the same pydantic models that check a sweep file's tables
(config/tables.py), and every other keyword against the annotations of the API function's
signature and of the library function it is passed on to. A str is not a number, a string
is not a bool, None is taken only where the type allows it; a float may be given as an int,
a path as a str or an os.PathLike, a tuple of values as a list. A wrong value is one
ConfigError line naming the function, the keyword, what it must be and what was given:

    trainscale.run() option seed: input should be a valid integer, got 'x'
"""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)

from trainscale.config.cli import leaf_flag
from trainscale.config.files import Expect, describe
from trainscale.config.options import RunOptions
from trainscale.config.suggest import nearest_name
from trainscale.config.tables import option_type, run_options_table
from trainscale.errors import ConfigError

Source = tuple[Callable[..., Any], tuple[str, ...]]
"""A function whose parameters are keywords of an API function, less those left out (the
ones the API fills in itself)."""


class Keywords(BaseModel):
    """The keyword arguments of one API function: declared names only, strict types."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, arbitrary_types_allowed=True
    )


@cache
def _flag_spellings() -> dict[str, str]:
    """A run option's flag spelled as a keyword (`no_eval`, `warmup_steps`, `timeout`) ->
    how the keyword is written: 'evaluate=False', 'warmup_steps_untimed', 'timeout_s'."""
    spellings = {}
    for key, leaf in RunOptions.flat_fields().items():
        flag = leaf_flag(leaf)
        spelled = flag.lstrip("-").replace("-", "_")
        if spelled != key:
            negated = leaf.item.metadata.get("negate", False)
            spellings[spelled] = f"{key}=False" if negated else key
    return spellings


def check_keywords(function: str, given: Mapping[str, Any], valid: Iterable[str]) -> None:
    """ConfigError for the first keyword in `given` that is not in `valid`; a run option's
    flag spelled as a keyword gets the keyword's name."""
    names = sorted(set(valid))
    for key in given:
        if key not in names:
            written = _flag_spellings().get(key)
            near = written if written and written.split("=")[0] in names else None
            near = near or nearest_name(key, names)
            hint = f" (did you mean {near!r}?)" if near else ""
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


def check_arguments(function: str, given: Mapping[str, Any], *sources: Source) -> dict[str, Any]:
    """`given`, the arguments of `trainscale.<function>()` by name, checked against the
    parameters of `sources`: an unknown name or a value of the wrong type is a ConfigError.

    Returns the values to pass on: as given, except that a keyword named as a run option
    (`data_dir`, `workload_options`) comes back as the run option takes it (a path as
    text, (KEY, VALUE) pairs as a dict), and a list given for a tuple as a tuple."""
    model = _signature_model(function, sources)
    check_keywords(function, given, model.model_fields)
    checked = _validate(function, model, given, _positional(sources))
    options = RunOptions.flat_fields()
    return {
        key: getattr(checked, key) if key in options or isinstance(value, list) else value
        for key, value in given.items()
    }


def run_options(
    function: str, workload: str, options: Mapping[str, Any], *sources: Source
) -> RunOptions:
    """The RunOptions the CLI builds from the same flags: `options` by flat name (the flags
    without dashes, e.g. `global_batch_size=128`, `evaluate=False` for --no-eval), each
    checked against its declaration, with the keywords of `sources` (`store`, `progress`)."""
    model = _run_model(function, sources)
    check_keywords(function, options, [*_run_option_names(), *_names(sources)])
    table = _validate(function, model, options, _positional(sources))
    return RunOptions.of(workload, **table.given())


# -- the models ------------------------------------------------------------------------------


@cache
def _signature_model(function: str, sources: tuple[Source, ...]) -> type[BaseModel]:
    return create_model(f"{function}_keywords", __base__=Keywords, **_fields(sources))


@cache
def _run_model(function: str, sources: tuple[Source, ...]) -> type[BaseModel]:
    base = run_options_table(f"{function}_run_options", python=True)
    return create_model(f"{function}_keywords", __base__=base, **_fields(sources))


@cache
def _run_option_names() -> tuple[str, ...]:
    return tuple(key for key in RunOptions.flat_fields() if key != "workload")


def _fields(sources: tuple[Source, ...]) -> dict[str, Any]:
    """Each parameter's declared type, as a model field; every one optional, since only
    the keywords given are checked."""
    fields: dict[str, Any] = {}
    for function, leave_out in sources:
        hints = _hints(function)
        for name in _names(((function, leave_out),)):
            fields[name] = (_keyword_type(name, hints.get(name, Any)), Field(None))
    return fields


def _names(sources: Iterable[Source]) -> list[str]:
    return [
        name
        for function, leave_out in sources
        for name in parameters(function, leave_out=leave_out)
    ]


def _positional(sources: Iterable[Source]) -> set[str]:
    """The parameters that may be given by position: 'argument', not 'option', in messages."""
    return {
        name
        for function, _ in sources
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    }


def _hints(function: Callable[..., Any]) -> dict[str, Any]:
    """The function's annotations, evaluated; one that cannot be (a name imported for type
    checking only) is Any."""
    try:
        return get_type_hints(function)
    except NameError:
        pass
    hints: dict[str, Any] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        annotation = parameter.annotation
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, getattr(function, "__globals__", {}))
            except NameError:
                annotation = Any
        hints[name] = Any if annotation is parameter.empty else annotation
    return hints


def _keyword_type(name: str, annotation: Any) -> Any:
    """What a keyword is checked as: a keyword named as a run option that is a path or
    KEY=VALUE pairs takes that option's conversions; a path says what it may be."""
    leaf = RunOptions.flat_fields().get(name)
    metadata = (leaf.item.metadata or {}) if leaf is not None else {}
    if leaf is not None and (metadata.get("path") or metadata.get("pairs")):
        return option_type(replace(leaf, annotation=annotation), python=True)
    optional = " or None" if type(None) in _kinds(annotation) else ""
    if any(_is_path(kind) for kind in _kinds(annotation)):
        expect = Expect(f"a str or os.PathLike{optional}")
        return Annotated[annotation, AfterValidator(_not_blank), expect]
    tuples = [kind for kind in _kinds(annotation) if _is_variadic_tuple(kind)]
    if tuples:
        # `workers=[1, 2, 4]`, as Python callers write it; passed on as a tuple
        item = get_args(tuples[0])[0]
        of = f" of {item.__name__}" if isinstance(item, type) else ""
        expect = Expect(f"a list or tuple{of}{optional}")
        return Annotated[annotation, BeforeValidator(_list_as_tuple), expect]
    return annotation


def _kinds(annotation: Any) -> tuple[Any, ...]:
    """The types a union annotation allows, or the annotation alone."""
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _is_path(kind: Any) -> bool:
    return (
        get_origin(kind) is os.PathLike
        or kind is os.PathLike
        or (isinstance(kind, type) and issubclass(kind, Path))
    )


def _is_variadic_tuple(kind: Any) -> bool:
    return get_origin(kind) is tuple and get_args(kind)[-1:] == (Ellipsis,)


def _not_blank(value: Any) -> Any:
    """A path given is not empty: Path('') is '.', which an empty value (an unset variable,
    say) never meant; as the command line's `given_path`."""
    if isinstance(value, (str, os.PathLike)) and not os.fspath(value).strip():
        raise ValueError("is empty; give a file or directory name")
    return value


def _list_as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


# -- one line per mistake ----------------------------------------------------------------------


def _validate(
    function: str, model: type[BaseModel], given: Mapping[str, Any], positional: set[str]
) -> Any:
    try:
        return model.model_validate(dict(given))
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = error["loc"]
        word = "argument" if loc and loc[0] in positional else "option"
        raise ConfigError(f"trainscale.{function}() {word} {describe(model, error)}") from None
