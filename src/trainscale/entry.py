"""The subpackages `trainscale.run`, `.bench`, `.sweep` and `.report` are also the Python
API's functions of the same names: `trainscale.run("mnist-cnn", workers=2)`.

A package attribute cannot be both: once `trainscale.run.launch` is imported, Python binds
the subpackage `trainscale.run` as the attribute `run` of `trainscale`, whatever was there.
So those four subpackages make themselves callable instead (`callable_package`); a call
imports `trainscale.api` (the heavy part) only then. Everything else about them stays a
plain package: `from trainscale.run.launch import execute_run`, patching by dotted name.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import Any


class CallablePackage(types.ModuleType):
    """A subpackage that, called, is `trainscale.api`'s function of its own name."""

    def _function(self) -> Any:
        # By name: the API sits above every package, so none of them imports it (the
        # import-linter layers), and `import trainscale` stays cheap.
        api = importlib.import_module("trainscale.api")
        return getattr(api, self.__name__.rpartition(".")[2])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._function()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        """The API function's signature (for `inspect.signature` and notebook hints)."""
        return inspect.signature(self._function())


def callable_package(name: str) -> None:
    """Make the imported package `name` callable as the API function of its last name."""
    sys.modules[name].__class__ = CallablePackage
