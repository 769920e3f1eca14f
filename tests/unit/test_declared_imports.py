"""Every import of the product is something the plain install (`pip install .`) brings, or an
optional import of a declared extra that is guarded: a user without the extra gets one line
naming it, never a `ModuleNotFoundError`.

The test venv installs every extra, and those pull in more (JAX brings SciPy), so an
undeclared import passes every other test and fails only for the user. This reads the
source instead (module-level and function-level imports alike) and sorts each import:

- the standard library (`sys.stdlib_module_names`) or trainscale itself: fine;
- an optional module (`OPTIONAL`, listed per extra): fine only where guarded, by one of
  - a `try:` whose `except` catches ImportError (the module's absence is handled there);
  - `if TYPE_CHECKING:` (never imported at run time);
  - a module of a framework's package (`FRAMEWORK_PACKAGES`), which nothing outside it
    imports but the framework's trainer loader (`Framework.load_trainer`, in a function):
    `frameworks.trainer()` calls it after `frameworks.require()` has found every module the
    framework names, or said in one line which extra to install;
  - a module of a framework's twins of the models (`TWIN_PACKAGES`), imported only inside
    the functions of a workload's twin builders and of that framework's package: the
    framework's trainer calls the builders, behind `require()`, and `Workload.build_model`
    turns a missing module into one line naming the extra for any other caller;
  - a function of an export module (`EXPORT_MODULES`) that checks its extra first with
    `tracking.require_extra()`: function-level only, so importing the module needs nothing;
  each gate is checked below against the code that enforces it;
- anything else must come from a distribution in `[project].dependencies`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import trainscale
from trainscale.frameworks import FRAMEWORKS
from trainscale.reporting.tracking import EXTRAS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(trainscale.__file__).parent


@dataclass(frozen=True)
class OptionalImport:
    """An import that belongs to an extra."""

    extra: str
    needs: str
    """The top-level module that must be installed for it (what the extra's check looks
    for: `torch.utils.tensorboard` is part of torch, but needs `tensorboard`)."""
    distribution: str
    """The distribution in the extra that installs `needs`."""


OPTIONAL: dict[str, OptionalImport] = {
    "tensorflow": OptionalImport("tensorflow", "tensorflow", "tensorflow-cpu"),
    "keras": OptionalImport("tensorflow", "keras", "keras"),
    "jax": OptionalImport("jax", "jax", "jax"),
    "flax": OptionalImport("jax", "flax", "flax"),
    "optax": OptionalImport("jax", "optax", "optax"),
    "mlflow": OptionalImport("mlflow", "mlflow", "mlflow-skinny"),
    "sqlalchemy": OptionalImport("mlflow", "sqlalchemy", "sqlalchemy"),
    "alembic": OptionalImport("mlflow", "alembic", "alembic"),
    "tensorboard": OptionalImport("tensorboard", "tensorboard", "tensorboard"),
    "torch.utils.tensorboard": OptionalImport("tensorboard", "tensorboard", "tensorboard"),
    "pandas": OptionalImport("pandas", "pandas", "pandas"),
    "pynvml": OptionalImport("gpu", "pynvml", "nvidia-ml-py"),
}
"""OptionalImport imports by module name (a dotted name covers its submodules), per extra."""

FRAMEWORK_PACKAGES = {
    "trainscale.frameworks.tensorflow": "tensorflow",
    "trainscale.frameworks.jax": "jax",
}
"""A framework's own package -> its name in `frameworks.FRAMEWORKS` (and its extra)."""

TWIN_PACKAGES = {
    "trainscale.models.tensorflow": "tensorflow",
    "trainscale.models.jax": "jax",
}
"""A framework's twins of the PyTorch models -> the framework."""

EXPORT_MODULES = {
    "trainscale.reporting.mlflow_export": "mlflow",
    "trainscale.reporting.tensorboard_export": "tensorboard",
}
"""A module that calls `require_extra(EXTRA)` before it uses the extra -> that extra."""

PART_OF = {"pydantic_core": "pydantic"}
"""Modules a declared distribution brings as part of itself: pydantic pins its compiled core
to one exact release (pydantic-core==X), and some of pydantic's types are only there."""

STDLIB_SINCE_311 = {"tomllib"}
"""Standard from Python 3.11; on 3.10 its import falls back to the declared `tomli`."""


@dataclass(frozen=True)
class Import:
    """One import statement's module, where it is and how it is guarded."""

    module: str
    """The package's module that imports it (dotted)."""
    name: str
    """The imported module (dotted)."""
    names: tuple[str, ...]
    """It and, for `from a import b`, `a.b` (which may be a module of its own)."""
    line: int
    in_function: bool
    try_guarded: bool
    """Inside a `try:` body whose handlers catch ImportError."""
    type_checking: bool

    def where(self) -> str:
        return f"{self.module}:{self.line} imports {self.name}"


_CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in _CATCHES_IMPORT_ERROR for t in types)


def _imports(tree: ast.AST, module: str) -> Iterator[Import]:
    """Every absolute import in `tree`, with its guards (a walk that keeps its context)."""

    def walk(
        node: ast.AST, in_function: bool, guarded: bool, typing_only: bool
    ) -> Iterator[Import]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            statements: list[tuple[str, ...]] = []
            if isinstance(node, ast.Import):
                statements = [(alias.name,) for alias in node.names]
            elif node.level == 0 and node.module:
                statements = [(node.module, *(f"{node.module}.{a.name}" for a in node.names))]
            for names in statements:
                yield Import(
                    module, names[0], names, node.lineno, in_function, guarded, typing_only
                )
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function = True
        if isinstance(node, ast.Try):
            catches = any(_catches_import_error(h) for h in node.handlers)
            for child in node.body:
                yield from walk(child, in_function, guarded or catches, typing_only)
            rest: list[ast.AST] = [*node.handlers, *node.orelse, *node.finalbody]
            for other in rest:
                yield from walk(other, in_function, guarded, typing_only)
            return
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            for child in node.body:
                yield from walk(child, in_function, guarded, True)
            for child in node.orelse:
                yield from walk(child, in_function, guarded, typing_only)
            return
        for inner in ast.iter_child_nodes(node):
            yield from walk(inner, in_function, guarded, typing_only)

    yield from walk(tree, False, False, False)


def package_imports(package_dir: Path, package: str) -> list[Import]:
    """Every absolute import of every module under `package_dir` (the package `package`)."""
    found: list[Import] = []
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join((package, *parts))
        found.extend(_imports(ast.parse(path.read_text(), str(path)), module))
    return found


def _normal(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _requirement_name(requirement: str) -> str:
    """The normalised distribution name of a requirement ("jax[cpu]>=0.4" -> "jax")."""
    return _normal(re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0])


def declared_distributions(pyproject: Path = ROOT / "pyproject.toml") -> set[str]:
    """The distributions `[project].dependencies` names (normalised, markers ignored)."""
    with open(pyproject, "rb") as file:
        requirements = tomllib.load(file)["project"]["dependencies"]
    return {_requirement_name(r) for r in requirements}


def extra_distributions(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, set[str]]:
    """Each extra of `[project.optional-dependencies]` -> the distributions it names."""
    with open(pyproject, "rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    return {
        extra: {_requirement_name(r) for r in requirements}
        for extra, requirements in extras.items()
    }


def _optional(name: str, optional: Mapping[str, OptionalImport]) -> OptionalImport | None:
    """The entry of `optional` covering the module `name` (the longest one), if any."""
    covering = [key for key in optional if name == key or name.startswith(key + ".")]
    return optional[max(covering, key=len)] if covering else None


def _optional_of(
    found: Import, optional: Mapping[str, OptionalImport] = OPTIONAL
) -> OptionalImport | None:
    """The extra `found` belongs to, if any."""
    return next(filter(None, (_optional(name, optional) for name in found.names)), None)


def _gated(
    found: Import,
    extra: str,
    framework_packages: Mapping[str, str],
    export_modules: Mapping[str, str],
) -> bool:
    """Whether `found`, an import of `extra`, lies behind one of the extra checks."""
    for package, framework in framework_packages.items():
        in_package = found.module == package or found.module.startswith(package + ".")
        if in_package and FRAMEWORKS[framework].extra == extra:
            return True
    return export_modules.get(found.module) == extra and found.in_function


def problems(
    imports: list[Import],
    declared: set[str],
    *,
    package: str = "trainscale",
    optional: Mapping[str, OptionalImport] = OPTIONAL,
    framework_packages: Mapping[str, str] = FRAMEWORK_PACKAGES | TWIN_PACKAGES,
    export_modules: Mapping[str, str] = EXPORT_MODULES,
) -> list[str]:
    """One line for each import the plain install cannot satisfy or that is unguarded."""
    distributions = importlib.metadata.packages_distributions()
    lines = []
    for found in imports:
        root = found.name.split(".")[0]
        if root == package or root in sys.stdlib_module_names or root in STDLIB_SINCE_311:
            continue
        extra = _optional_of(found, optional)
        if extra is not None:
            guarded = found.try_guarded or found.type_checking
            if not guarded and not _gated(found, extra.extra, framework_packages, export_modules):
                lines.append(
                    f"{found.where()} without a guard (extra {extra.extra!r}): catch "
                    "ImportError with one line naming the extra, or import it behind the "
                    "extra's check"
                )
            continue
        if root in PART_OF:
            owners = {PART_OF[root]}
        else:
            # Not installed here (tomli on Python >= 3.11): its own name, as a requirement.
            owners = {_normal(d) for d in distributions.get(root, [root])}
        if not owners & declared:
            source = ", ".join(sorted(owners)) or "no installed distribution"
            lines.append(
                f"{found.where()}, from {source}, which [project].dependencies does not declare"
            )
    return lines


# --- the product ---


def test_every_import_is_declared_or_a_guarded_extra() -> None:
    imports = package_imports(PACKAGE, "trainscale")
    assert len(imports) > 500  # the walk saw the package, function-level imports included
    assert any(i.in_function for i in imports)
    assert problems(imports, declared_distributions()) == []


def test_scipy_is_declared_for_the_simulator_fit() -> None:
    # Without the declaration the check names the imports that need it, the fit's first.
    imports = package_imports(PACKAGE, "trainscale")
    found = problems(imports, declared_distributions() - {"scipy"})
    assert found and all("scipy" in line for line in found), found
    assert "trainscale.simulator.fit" in {line.split(":")[0] for line in found}


def test_each_optional_module_belongs_to_its_extra() -> None:
    extras = extra_distributions()
    for name, entry in OPTIONAL.items():
        assert entry.extra in extras, name
        assert _normal(entry.distribution) in extras[entry.extra], name


def test_framework_packages_are_reached_only_through_their_check() -> None:
    imports = package_imports(PACKAGE, "trainscale")
    for package, framework in FRAMEWORK_PACKAGES.items():
        spec = FRAMEWORKS[framework]
        # The trainer loader is the only way in, and `frameworks.trainer()` calls
        # `require()` before it (tests/cli/test_frameworks_cli.py).
        outside = [
            i
            for i in imports
            if not (i.module == package or i.module.startswith(package + "."))
            and (i.name == package or i.name.startswith(package + "."))
        ]
        assert [i.name for i in outside] == [f"{package}.trainer"], outside
        (loader,) = outside
        assert loader.module == spec.load_trainer.__module__ and loader.in_function
        # `require()` looks for every optional module the package imports.
        used = {
            entry.needs
            for i in imports
            if i.module.startswith(package)
            and (entry := _optional_of(i)) is not None
            and entry.extra == spec.extra
        }
        assert used and used <= set(spec.modules), (used, spec.modules)


def test_twin_packages_are_imported_only_where_a_twin_is_built() -> None:
    imports = package_imports(PACKAGE, "trainscale")
    for package, framework in TWIN_PACKAGES.items():
        framework_package = next(p for p, f in FRAMEWORK_PACKAGES.items() if f == framework)
        importers = [
            i
            for i in imports
            if (i.name == package or i.name.startswith(package + "."))
            and not i.module.startswith(package)
        ]
        assert importers, package  # the builders were seen
        # The framework's own package is gated itself; a workload builds its twin lazily.
        misplaced = [
            i.where()
            for i in importers
            if not i.module.startswith(framework_package + ".")
            and not (i.module.startswith("trainscale.workloads.") and i.in_function)
        ]
        assert misplaced == [], misplaced


def test_export_modules_check_their_extra_first() -> None:
    imports = package_imports(PACKAGE, "trainscale")
    for module, extra in EXPORT_MODULES.items():
        path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        assert f'require_extra("{extra}")' in path.read_text(), module
        needed = {
            entry.needs
            for i in imports
            if i.module == module and (entry := _optional_of(i)) is not None
        }
        assert needed and needed <= set(EXTRAS[extra][1]), (module, needed)


# --- the checker on planted mistakes ---


def _fake_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "fakepkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (package / "__init__.py").touch()
    return package


def test_the_checker_catches_planted_bad_imports(tmp_path: Path) -> None:
    package = _fake_package(
        tmp_path,
        {
            "good.py": (
                "import json\nimport numpy\nimport fakepkg.good\n"
                "try:\n    import pandas\nexcept ImportError:\n    pandas = None\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    import mlflow\n"
            ),
            "undeclared.py": "import scipy.optimize\n",
            "late.py": "def fit():\n    from scipy.optimize import least_squares\n",
            "unguarded.py": "import pandas\n",
            "lazy.py": "def frame():\n    import pandas\n    return pandas\n",
            "wrong_catch.py": "try:\n    import mlflow\nexcept ValueError:\n    pass\n",
            "tb.py": "from torch.utils.tensorboard import SummaryWriter\n",
        },
    )
    imports = package_imports(package, "fakepkg")
    found = problems(
        imports, {"numpy", "torch"}, package="fakepkg", framework_packages={}, export_modules={}
    )
    flagged = sorted({line.split(":")[0] for line in found})
    assert flagged == [
        "fakepkg.late",
        "fakepkg.lazy",
        "fakepkg.tb",
        "fakepkg.undeclared",
        "fakepkg.unguarded",
        "fakepkg.wrong_catch",
    ]
    assert any("extra 'tensorboard'" in line for line in found)


def test_an_export_module_may_not_import_its_extra_at_module_level(tmp_path: Path) -> None:
    package = _fake_package(
        tmp_path,
        {
            "export_ok.py": "def write():\n    import mlflow\n",
            "export_bad.py": "import mlflow\n",
        },
    )
    found = problems(
        package_imports(package, "fakepkg"),
        set(),
        package="fakepkg",
        framework_packages={},
        export_modules={"fakepkg.export_ok": "mlflow", "fakepkg.export_bad": "mlflow"},
    )
    assert [line.split(":")[0] for line in found] == ["fakepkg.export_bad"]
