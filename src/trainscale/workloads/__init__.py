"""Workloads: `get_workload(name_or_reference)`, `workload_names()`, `workload_source(name)`.

Four kinds of workload answer to a name:

- the built-in reference workloads, which register themselves when their modules are
  imported; they are imported here explicitly (not discovered), on the first lookup, so the
  list stays greppable and `trainscale --help` stays cheap;
- workloads other packages register under the entry-point group `trainscale.workloads`
  (the entry point's name is the workload's; it points at a spec or a function returning
  one);
- a user's own, named by a reference, `path/to/file.py:make_workload` or
  `package.module:attr` (workloads/custom.py). Once loaded, it also answers to its spec's
  name in this process, and `workload_source` gives the canonical reference that workers
  load it from;
- the architecture-only workloads (workloads/architectures.py: ResNet-50 and others, with
  synthetic data only), consulted after the registered ones and listed apart by
  `architecture_names()`: they are not reference workloads, so `workload_names()` and
  `is_builtin` leave them out.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from trainscale.data.tensors import DataRequest, DataSize, Located, TensorData
from trainscale.errors import WorkloadError
from trainscale.workloads import registry
from trainscale.workloads.architectures import architecture_names, get_architecture
from trainscale.workloads.arrays import array_workload
from trainscale.workloads.base import JAX, PYTORCH, TENSORFLOW, Recipe, Workload
from trainscale.workloads.registry import register

__all__ = [
    "JAX",
    "PYTORCH",
    "TENSORFLOW",
    "DataRequest",
    "DataSize",
    "Located",
    "Recipe",
    "TensorData",
    "Workload",
    "architecture_names",
    "array_workload",
    "command_word",
    "get_workload",
    "is_builtin",
    "register",
    "workload_name",
    "workload_names",
    "workload_source",
]

ENTRY_POINT_GROUP = "trainscale.workloads"


_custom_by_source: dict[str, Workload] = {}
"""Custom workloads loaded in this process, by canonical reference."""
_source_by_name: dict[str, str] = {}
_builtin: frozenset[str] = frozenset()
_loaded = False


def _ensure_loaded() -> None:
    global _builtin, _loaded
    if _loaded:
        return
    from trainscale.workloads import (  # noqa: F401
        cifar10_resnet44,
        imdb_rnn,
        mnist_cnn,
        mnist_dbn,
        tweets_text,
    )

    _builtin = frozenset(registry.names())
    _register_entry_points()
    _loaded = True


def _register_entry_points() -> None:
    """Register every installed package's workloads (loaded only when looked up)."""
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in registry.names():
            # One package cannot take another's (or a built-in's) name; say so, go on.
            logging.getLogger("trainscale").warning(
                "workload entry point %r (%s) ignored: the name is taken", entry.name, entry.value
            )
            continue
        register(entry.name)(_entry_point_factory(entry))


def _entry_point_factory(entry: Any) -> Any:
    from trainscale.workloads.custom import check_spec

    shown = f"workload entry point {entry.name} ({entry.value})"

    def factory() -> Workload:
        try:
            value = entry.load()
            if callable(value) and not isinstance(value, Workload):
                value = value()
        except Exception as error:
            raise WorkloadError(f"{shown} failed: {type(error).__name__}: {error}") from error
        spec = check_spec(value, shown)
        if spec.name != entry.name:
            raise WorkloadError(f"{shown} returned a workload named {spec.name!r}")
        return spec

    return factory


def workload_names() -> list[str]:
    """All registered workload names (built-in and entry points), sorted."""
    _ensure_loaded()
    return registry.names()


def builtin_workload_names() -> list[str]:
    """trainscale's own reference workloads (not a package's or a user's), sorted."""
    return [name for name in workload_names() if is_builtin(name)]


def get_workload(name: str) -> Workload:
    """The workload spec called `name`, or named by a custom reference
    (`FILE.py:ATTR`, `MODULE:ATTR`). An unknown name fails with the list of valid ones; a
    broken reference with one WorkloadError line naming the file and the problem."""
    _ensure_loaded()
    from trainscale.workloads.custom import is_reference

    if is_reference(name):
        return _load_custom(name)
    if name in _source_by_name:
        return _custom_by_source[_source_by_name[name]]
    if name not in registry.names():
        architecture = get_architecture(name)
        if architecture is not None:
            return architecture
    return registry.get(name, architecture_names())


def is_builtin(name: str) -> bool:
    """Whether `name` is one of trainscale's own reference workloads, not a package's or a
    user's."""
    _ensure_loaded()
    return name in _builtin


def workload_name(name: str) -> str:
    """The workload's name for a name or a custom reference (loading the reference, so that
    the name answers from then on in this process)."""
    return get_workload(name).name


def command_word(name: str) -> str:
    """How a command line names the workload: a custom one by its reference (relative to the
    working directory when it lies below it), since its name answers only once loaded."""
    from trainscale.workloads.custom import parse_reference

    source = workload_source(name)
    if source is None:
        return name
    reference = parse_reference(source)
    if not reference.is_file:
        return f"{reference.target}:{reference.attribute}"
    path = Path(reference.target)
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f"{path}:{reference.attribute}"


def workload_source(name: str) -> str | None:
    """The canonical reference a custom workload loaded in this process came from, which
    workers load it from; None for built-in and entry-point workloads."""
    return _source_by_name.get(name)


def _load_custom(text: str) -> Workload:
    from trainscale.workloads.custom import file_changed, load_reference, parse_reference

    reference = parse_reference(text)
    source = reference.canonical
    if source in _custom_by_source:
        if not file_changed(reference):
            return _custom_by_source[source]
        # Edited since (a notebook session): forget the old version and its name, which
        # the new one may no longer use; the workers import the file as it is now.
        _source_by_name.pop(_custom_by_source.pop(source).name, None)
    spec = load_reference(reference)
    if spec.name in registry.names() or spec.name in architecture_names():
        raise WorkloadError(
            f"{reference.shown} defines workload {spec.name!r}, the name of a registered "
            "workload; give it another name"
        )
    other = _source_by_name.get(spec.name)
    if other is not None and other != source:
        raise WorkloadError(
            f"{reference.shown} defines workload {spec.name!r}, already loaded from "
            f"{parse_reference(other).shown}; give it another name"
        )
    _custom_by_source[source] = spec
    _source_by_name[spec.name] = source
    return spec
