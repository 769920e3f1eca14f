"""A user's own workload, named by a reference: `path/to/file.py:make_workload` or
`package.module:attr`.

The reference names a `Workload` spec, or a zero-argument function that returns one. It is
loaded in the process that resolves the run and again in every worker (workers are fresh
processes that import it themselves), so the stored run keeps the reference's canonical
form (an absolute file path, or the module path) as `workload_source`.

Everything that can go wrong in a user's file (it is missing, has a syntax error, raises on
import, lacks the attribute, returns something that is not a workload) is a `WorkloadError`:
one line that names the file and the problem. Errors raised later by the user's code (the
model builder, the data loaders, the forward pass) name the file and line too
(`user_code_error`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, TypeGuard

from trainscale.errors import TrainscaleError, WorkloadError
from trainscale.workloads.base import FRAMEWORK_NAMES, PYTORCH, Recipe, Workload
from trainscale.workloads.recipe_checks import number_in, recipe_problems

DEFAULT_ATTRIBUTE = "make_workload"
"""The attribute a file reference without `:attr` names."""

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""A workload name: it goes in tables, file names and sweep labels, so no spaces or colons."""

_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")

DOCS = "docs/custom-workloads.md"


@dataclass(frozen=True)
class Reference:
    """Where a custom workload comes from: a file or an importable module, and an attribute."""

    target: str
    """An absolute file path, or a dotted module path."""
    attribute: str
    is_file: bool
    search_dir: str | None = None
    """For a module: the directory it was imported relative to (the working directory of
    the command), put on `sys.path` in the workers too."""

    @property
    def canonical(self) -> str:
        """The form stored with a run and given to the workers."""
        where = f"@{self.search_dir}" if self.search_dir else ""
        return f"{self.target}:{self.attribute}{where}"

    @property
    def shown(self) -> str:
        """The form used in messages: the file's name (not its whole path), or the module."""
        target = Path(self.target).name if self.is_file else self.target
        return f"{target}:{self.attribute}"

    @property
    def origin(self) -> str:
        """What the user's code is called in messages: the file's name, or the module."""
        return Path(self.target).name if self.is_file else self.target


def is_reference(text: str) -> bool:
    """Whether `text` names a custom workload (a file or `module:attr`) rather than a
    registered workload name."""
    return ":" in text or text.endswith(".py")


def parse_reference(text: str) -> Reference:
    """The reference a user wrote (or a stored canonical one), checked; WorkloadError if it
    is neither `FILE.py[:ATTR]` nor `MODULE:ATTR`."""
    body, search_dir = text, None
    if "@" in text.rpartition(":")[2]:  # a stored module reference carries its directory
        body, _, search_dir = text.rpartition("@")
    target, sep, attribute = body.rpartition(":")
    if not sep:
        target, attribute = body, DEFAULT_ATTRIBUTE
    if not attribute.isidentifier():
        raise WorkloadError(f"workload reference {text!r}: {attribute!r} is not a Python name")
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = Path(target).expanduser()
        if not path.is_file():
            raise WorkloadError(f"workload file {target} not found")
        return Reference(str(path.resolve()), attribute, is_file=True)
    if not _MODULE_PATH.match(target):
        raise WorkloadError(
            f"workload reference {text!r} is neither FILE.py:ATTR nor MODULE:ATTR (see {DOCS})"
        )
    return Reference(target, attribute, is_file=False, search_dir=search_dir or os.getcwd())


def load_reference(reference: Reference) -> Workload:
    """Import the reference's file or module and return its workload, checked."""
    module = _import(reference)
    if not hasattr(module, reference.attribute):
        defined = sorted(n for n in vars(module) if not n.startswith("_"))
        hint = f"; it defines: {', '.join(defined[:8])}" if defined else ""
        if reference.is_file and reference.attribute == DEFAULT_ATTRIBUTE:
            # A training script whose meter() call trainscale did not see (in a module it
            # imports): `--` says it is a script.
            name = Path(reference.target).name
            hint += f"; if it is a training script: trainscale run {name} [options] --"
        raise WorkloadError(f"{reference.origin} has no attribute {reference.attribute!r}{hint}")
    value = getattr(module, reference.attribute)
    if callable(value) and not isinstance(value, Workload):
        try:
            value = value()
        except TrainscaleError:  # the user's own DataError or ConfigError says it already
            raise
        except (Exception, SystemExit) as error:
            if not is_user_exit(error) and not isinstance(error, Exception):
                raise
            raise user_code_error(error, reference, f"{reference.shown} raised") from error
    return guarded(check_spec(value, reference.shown), reference)


def check_spec(value: Any, shown: str) -> Workload:
    """`value` if it is a usable workload spec; WorkloadError naming `shown` otherwise."""
    if not isinstance(value, Workload):
        raise WorkloadError(
            f"{shown} returned {type(value).__name__}, not a trainscale Workload (see {DOCS})"
        )
    problems = []
    if not isinstance(value.name, str) or not NAME_PATTERN.match(value.name):
        problems.append(
            f"its name {value.name!r} must be letters, digits, '.', '_' or '-' (no spaces)"
        )
    if PYTORCH not in value.models:
        problems.append("it has no 'pytorch' model builder")
    problems.extend(
        f"its model builder {framework!r} names no framework ({', '.join(FRAMEWORK_NAMES)})"
        for framework in value.models
        if framework not in FRAMEWORK_NAMES
    )
    if not isinstance(value.recipe, Recipe):
        problems.append("its recipe is not a trainscale Recipe")
    else:
        problems.extend(recipe_problems(value.recipe))
    if not number_in(value.target_accuracy, 0, 1, low_open=True):
        problems.append(f"its target_accuracy {value.target_accuracy!r} is not in (0, 1]")
    for field_name in ("locate_real", "load_real", "make_synthetic"):
        if not callable(getattr(value, field_name)):
            problems.append(f"its {field_name} is not callable")
    if value.synthetic_size is None:
        problems.append("it declares no synthetic_size")
    if problems:
        raise WorkloadError(f"{shown}: {problems[0]}")
    return value


def _import(reference: Reference) -> ModuleType:
    if reference.is_file:
        return _import_file(Path(reference.target))
    if reference.search_dir and reference.search_dir not in sys.path:
        # As `python -m` does: modules next to where the command runs are importable.
        sys.path.insert(0, reference.search_dir)
    try:
        return importlib.import_module(reference.target)
    except ModuleNotFoundError as error:
        if error.name and reference.target.startswith(error.name):
            raise WorkloadError(
                f"no module named {reference.target!r} (looked in the working directory and "
                "on sys.path)"
            ) from None
        raise user_code_error(error, reference, f"{reference.origin} failed to import:") from error
    except SyntaxError as error:
        raise WorkloadError(_syntax_line(error, error.filename or reference.origin)) from None
    except (Exception, SystemExit) as error:
        if not is_user_exit(error) and not isinstance(error, Exception):
            raise
        raise user_code_error(error, reference, f"{reference.origin} failed to import:") from error


_imported: dict[str, tuple[int, int] | None] = {}
"""The version of each workload file this process imported: (mtime in ns, size) by path."""


def file_changed(reference: Reference) -> bool:
    """Whether the reference's file was edited since this process imported it, so that a
    workload loaded before (in a notebook, a REPL) is loaded again: the workers, new
    processes, import the file as it is now. A stat of the file, no read."""
    if not reference.is_file or reference.target not in _imported:
        return False
    return _stamp(Path(reference.target)) != _imported[reference.target]


def file_version(text: str) -> tuple[int, int] | None:
    """The version (mtime in ns, size) of the file a custom workload reference names; None
    for a registered name, a module, or a file that cannot be found."""
    if not is_reference(text):
        return None
    try:
        reference = parse_reference(text)
    except WorkloadError:
        return None
    return _stamp(Path(reference.target)) if reference.is_file else None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:  # removed since: the import that follows says so in one line
        return None
    return status.st_mtime_ns, status.st_size


def _import_file(path: Path) -> ModuleType:
    """Import a file as a module (once per version of the file: an edited file is imported
    again), its directory on `sys.path` as when it runs as a script, so it can import the
    modules beside it."""
    stamp = _stamp(path)
    name = None
    for key, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == str(path):
            # Imported already (by a notebook, or an earlier lookup): its first sighting is
            # the version it holds, as far as this process can tell.
            if _imported.setdefault(str(path), stamp) == stamp:
                return module
            del sys.modules[key]  # edited since: its new version, under the same name
            name = key
    name = name or _free_module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise WorkloadError(f"workload file {path.name} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    # Registered before it runs, as `import` does: dataclasses and pickle look it up.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        del sys.modules[name]
        raise WorkloadError(_syntax_line(error, path.name)) from None
    except BaseException as error:
        del sys.modules[name]
        if not isinstance(error, Exception) and not is_user_exit(error):
            raise
        reference = Reference(str(path), DEFAULT_ATTRIBUTE, is_file=True)
        raise user_code_error(error, reference, f"{path.name} failed to import:") from error
    _imported[str(path)] = stamp
    return module


def _free_module_name(path: Path) -> str:
    """The file's stem when no other module has it, so the user's classes keep a readable
    module name; a distinct one otherwise."""
    stem = re.sub(r"\W", "_", path.stem)
    if stem not in sys.modules and stem.isidentifier() and not stem[0].isdigit():
        return stem
    return f"trainscale_workload_{stem}_{abs(hash(str(path))) % 10**8}"


def _syntax_line(error: SyntaxError, origin: str) -> str:
    name = Path(origin).name
    line = f" line {error.lineno}" if error.lineno else ""
    return f"{name}{line}: {error.msg} (a syntax error)"


def user_code_error(error: BaseException, reference: Reference, what: str) -> WorkloadError:
    """A one-line WorkloadError for `error` raised by the user's code: what happened, the
    error, and the innermost line of the user's file or module that it passed through."""
    where = user_frame(error.__traceback__, reference)
    message = str(error).strip().splitlines()
    detail = f"{type(error).__name__}: {message[0]}" if message else type(error).__name__
    if is_user_exit(error):  # str(SystemExit(0)) is '0': say what happened instead
        code = "" if error.code is None else repr(error.code)
        detail = f"SystemExit: the workload called sys.exit({code})"
    return WorkloadError(f"{what} {detail}{where}")


def is_user_exit(error: BaseException) -> TypeGuard[SystemExit]:
    """Whether `error` is what `sys.exit()` (or `exit()`) raises: a plain SystemExit.

    The user's code calling it is a failure of the workload like any error, not a request
    to end trainscale (which would end a run with status 0 and nothing printed). Subclasses
    are not the user's: a worker's stop signal is one (parallel/interrupts.py).
    """
    return type(error) is SystemExit


def user_frame(tb: TracebackType | None, reference: Reference) -> str:
    """' (my_workload.py line 12, in forward)' for the innermost frame of the user's code in
    `tb`, or '' when none is."""
    found = ""
    for frame in traceback.extract_tb(tb):
        if _is_users(frame.filename, reference):
            found = f" ({Path(frame.filename).name} line {frame.lineno}, in {frame.name})"
    return found


def _is_users(filename: str, reference: Reference) -> bool:
    if reference.is_file:
        return filename == reference.target
    root = reference.target.split(".")[0]
    return f"{os.sep}{root}{os.sep}" in filename or Path(filename).stem == root


def guarded(spec: Workload, reference: Reference) -> Workload:
    """`spec` with its functions wrapped so that an error the user's code raises becomes one
    WorkloadError line naming the function, the error and the user's line (errors trainscale
    defines, such as a DataError the user raises on purpose, pass as they are)."""

    def guard(function: Any, what: str) -> Any:
        if function is None:
            return None

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except TrainscaleError:
                raise
            except (Exception, SystemExit) as error:
                if not is_user_exit(error) and not isinstance(error, Exception):
                    raise
                raise user_code_error(
                    error, reference, f"workload {reference.shown}: {what} raised"
                ) from error

        return call

    return dataclasses.replace(
        spec,
        models={
            framework: guard(build, "building the model")
            for framework, build in spec.models.items()
        },
        locate_real=guard(spec.locate_real, "locate_real"),
        load_real=guard(spec.load_real, "load_real"),
        make_synthetic=guard(spec.make_synthetic, "make_synthetic"),
        check_options=guard(spec.check_options, "check_options"),
        flops_batch=guard(spec.flops_batch, "flops_batch"),
    )
