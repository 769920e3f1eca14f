"""Reading the TOML files users give trainscale (sweeps, clusters, prices), with one-line errors.

Each kind of file is a pydantic model (a subclass of `TomlFile`, its sections `TomlTable`s):
unknown keys are errors, types are strict (`workers = "2"` or `workers = true` is refused;
a TOML integer is accepted where a number is), and the model's validators do the rest
(units, ranges, checks across keys). `load_toml(path, Model)` reads, parses and validates a
file and returns the model, or raises one line that names the file, the key path
(`grid.workers[1]`, `device.peak_flops.fp32`) and the reason:

    sweep file s.toml: grid.workers[1]: input should be a valid integer, got True
    cluster file c.toml: device.efficiency: must be in (0, 1], got 1.5
    cluster file c.toml: [intra_node] section is missing

Every way such a file can fail to be read is one line too: missing, a folder, unreadable,
not UTF-8 (TOML files must be), not valid TOML, or nested too deeply for the parser
(tomllib recurses once per level of arrays or inline tables, so ``x = [[[[...]]]]`` a hundred
thousand levels deep would end in a RecursionError traceback).
"""

from __future__ import annotations

import re
import reprlib
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from trainscale.config.suggest import nearest_name
from trainscale.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package
    import tomli as tomllib


@dataclass(frozen=True)
class Expect:
    """What a value must be, as messages say it: the metadata
    ``Annotated[int, Field(ge=1), Expect("a whole number >= 1")]`` turns any type or range
    error of that value into ``must be a whole number >= 1, got -2``. Without it, pydantic's
    own wording is used (``input should be a valid integer, got True``)."""

    text: str


class TomlTable(BaseModel):
    """A table of a TOML file: declared keys only, strict types, read-only once validated."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    expect: ClassVar[str] = "a table ([section])"
    """What a value in this table's place must be, for messages."""
    unknown_key: ClassVar[str | None] = None
    """The reason given for a key the table does not declare; None lists the keys it does."""


class TomlFile(TomlTable):
    """A whole file: `load_toml(path, Model)` reads it and names it in every message."""

    file_kind: ClassVar[str] = "file"
    """What the file is, in messages: 'sweep file', 'cluster file', 'price file'."""
    error: ClassVar[type[ConfigError]] = ConfigError
    """The ConfigError subclass its errors raise."""


FileT = TypeVar("FileT", bound=TomlFile)


def load_toml(path: Path | str, model: type[FileT]) -> FileT:
    """The file at ``path`` read, parsed and validated as ``model``.

    Raises:
        ``model.error``: one line naming ``model.file_kind`` and ``path``, for a file that is
            missing, a folder, unreadable, not UTF-8, not valid TOML, nested too deeply, or
            whose contents the model refuses (then the line names the key path and why).
    """
    data = read_toml(path, model.file_kind, model.error)
    return validate(data, model, f"{model.file_kind} {path}")


def validate(data: Any, model: type[FileT], where: str) -> FileT:
    """``data`` (a parsed file, or a dict built in code) validated as ``model``; one
    ``model.error`` line starting with ``where`` and naming the key otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # One line is the rule, so one error: an unknown key first (a misspelt key is also
        # why another is missing), else the first in the file's declared order.
        errors = exc.errors()
        first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        raise model.error(f"{where}: {describe(model, first)}") from None


def read_toml(
    path: Path | str, what: str, error: type[ConfigError] = ConfigError
) -> dict[str, Any]:
    """The parsed, not yet validated, contents of the TOML file at ``path``.

    Args:
        path: the file.
        what: what the file is, for messages ('sweep file', 'cluster file', ...).
        error: the ConfigError subclass to raise.

    Raises:
        ``error``: one line naming ``what`` and ``path``, for a file that is missing, a
            folder, unreadable, not UTF-8, not valid TOML, or nested too deeply.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory, not a file") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); TOML files must be UTF-8"
        ) from None
    return parse_toml(text, f"{what} {path}", error)


def parse_toml(text: str, where: str, error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """``text`` parsed as TOML; ``error`` naming ``where`` if it is not valid or too deep."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason = " ".join(str(exc).split())  # one line, whatever the parser says
        raise error(f"{where} is not valid TOML: {reason}") from None
    except RecursionError:
        raise error(
            f"{where} is nested too deeply to read (arrays or inline tables inside each "
            "other beyond what the TOML parser can follow); flatten it"
        ) from None


# -- one validation error as "key path: reason" ----------------------------------------------


def describe(model: type[BaseModel], error: ErrorDetails) -> str:
    """One pydantic error of ``model`` as ``key.path[i]: reason``, for a user.

    A check across keys (a model validator) has no single key: its message names its keys.
    """
    loc = tuple(error["loc"])
    spot = _walk(model, loc)
    path = _key_path(spot.loc)
    kind = error["type"]
    msg = _lower_first(error["msg"])
    if kind == "missing":
        if _is_section(spot.annotation):
            return f"[{path}] section is missing"
        return f"{path} is missing"
    if kind == "extra_forbidden":
        return f"{path}: {_unknown_key(spot.owner, spot.loc[-1] if spot.loc else None)}"
    if kind in ("value_error", "assertion_error"):
        reason = str(error.get("ctx", {}).get("error", error["msg"]))
    elif spot.is_key:
        reason = f"unknown key; use {spot.expect}" if spot.expect else f"unknown key; {msg}"
    elif spot.expect is not None:
        reason = f"must be {spot.expect}, got {_shown(error['input'])}"
    else:
        reason = f"{msg}, got {_shown(error['input'])}"
    return f"{path}: {reason}" if path else reason


@dataclass
class _Spot:
    loc: tuple[str | int, ...] = ()
    """The key path as the user wrote it (union branch tags taken out)."""
    annotation: Any = None
    """The declared type there; None where the path leaves the declared keys."""
    owner: type[BaseModel] | None = None
    """The innermost table on the path."""
    expect: str | None = None
    """What the value there must be, where the declaration says (`Expect`)."""
    is_key: bool = False
    """Whether the key itself is refused (a table whose keys are typed), not its value."""


def _walk(model: type[BaseModel], loc: tuple[str | int, ...]) -> _Spot:
    """Follow ``loc`` through the declared types of ``model``."""
    spot = _Spot(annotation=model, owner=model)
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        spot.loc += (part,)
        annotation, _ = _unwrap(spot.annotation)
        metadata: list[Any] = []
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            spot.owner = annotation
            field = _field(annotation, part)
            spot.annotation = None if field is None else field.annotation
            metadata = [] if field is None else list(field.metadata)
        elif get_origin(annotation) in (list, tuple) and isinstance(part, int):
            spot.annotation = get_args(annotation)[0]
        elif get_origin(annotation) in (dict, Mapping):
            key, value = get_args(annotation) or (Any, Any)
            spot.annotation = value
            if parts and parts[0] == "[key]":  # the key itself was refused: name it
                parts.pop(0)
                spot.annotation, spot.is_key = key, True
        else:
            spot.annotation = None
        inner, more = _unwrap(spot.annotation)
        metadata += more
        spot.expect = next((m.text for m in metadata if isinstance(m, Expect)), None)
        if _is_union(inner) and parts:
            # pydantic names the branch of a union it tried ('int', 'str'): not a key
            parts.pop(0)
            spot.annotation = None
    inner, _ = _unwrap(spot.annotation)
    if spot.expect is None and isinstance(inner, type) and issubclass(inner, TomlTable):
        spot.expect = inner.expect
    return spot


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """The type inside ``Annotated`` and ``X | None``, and the Annotated metadata."""
    metadata: list[Any] = []
    while True:
        if get_origin(annotation) is Annotated:
            args = get_args(annotation)
            annotation, metadata = args[0], [*metadata, *args[1:]]
        elif _is_union(annotation) and sum(a is not type(None) for a in get_args(annotation)) == 1:
            annotation = next(a for a in get_args(annotation) if a is not type(None))
        else:
            return annotation, metadata


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _field(model: type[BaseModel], key: str | int):
    """The field a key of the file names: its name or one of its aliases."""
    for name, field in model.model_fields.items():
        if key in (name, *_aliases(field)):
            return field
    return None


def _aliases(field: Any) -> list[str]:
    alias = field.validation_alias or field.alias
    if alias is None:
        return []
    if isinstance(alias, str):
        return [alias]
    return [c for c in getattr(alias, "choices", []) if isinstance(c, str)]


def _unknown_key(owner: type[BaseModel] | None, key: str | int | None = None) -> str:
    if owner is None:
        return "unknown key"
    spellings = [
        *owner.model_fields,
        *(a for f in owner.model_fields.values() for a in _aliases(f)),
    ]
    near = nearest_name(key, spellings) if key is not None else None
    guess = f"did you mean {near}?" if near else ""
    hint = getattr(owner, "unknown_key", None)
    if hint:
        return f"{hint}; {guess}" if guess else hint
    known = sorted(f.alias or name for name, f in owner.model_fields.items())
    return f"unknown key; {guess + ' ' if guess else ''}allowed: {', '.join(known)}"


def _is_section(annotation: Any) -> bool:
    inner, _ = _unwrap(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return True
    return get_origin(inner) in (dict, Mapping)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key_path(loc: tuple[str | int, ...]) -> str:
    """('grid', 'workers', 1) as 'grid.workers[1]'; keys TOML would quote are quoted."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = part if _BARE_KEY.fullmatch(part) else '"' + part.replace('"', '\\"') + '"'
            text += f".{key}" if text else key
    return text


def _shown(value: Any, limit: int = 60) -> str:
    """A value as a message shows it: its repr, cut short (tables and arrays a few levels
    and items deep, so a huge or deeply nested value costs nothing to show)."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict = 3, 4, 4
_REPR.maxstring = _REPR.maxother = 200  # cut at `limit` above, from the start


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
