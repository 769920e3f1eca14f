"""The frameworks that can train a workload: PyTorch (the core), TensorFlow/Keras and JAX.

Every framework trains the same framework-neutral workload spec under the same measurement
rules into the same store; only the model builders, the training step, the evaluation and the
gradient communication are the framework's own (docs/frameworks.md). This module names them,
says whether each is installed (without importing it: TensorFlow takes seconds to import),
and hands the worker the framework's trainer.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainscale.errors import ConfigError

# The keys of a workload's model builders (`Workload.models`). workloads/base.py names them
# too: this module is not to import it, as it imports torch, which `trainscale --help`
# must not load (a test checks that the two agree).
PYTORCH = "pytorch"
TENSORFLOW = "tensorflow"
JAX = "jax"


@dataclass(frozen=True)
class Framework:
    """One framework as trainscale uses it."""

    name: str
    label: str
    """How tables and docs name it."""
    modules: tuple[str, ...]
    """The modules its trainer imports (all must be installed)."""
    distribution: str
    """The package whose version is stored with a run."""
    extra: str | None
    """The pip extra that installs it (None: a core dependency)."""
    trainer: str
    """'module:function' of its trainer, with `trainscale.train.trainer.train`'s signature."""
    cuda: bool = True
    """Whether it trains on CUDA GPUs. TensorFlow does not here: the GPU machines it would be
    tested on cannot install it (only tensorflow-cpu), so it is never run there."""

    @property
    def cpu_only_reason(self) -> str:
        """Why its GPU settings are left out, for the lines that say so."""
        return f"{self.label} trains on the CPU only (docs/frameworks.md)"


FRAMEWORKS: dict[str, Framework] = {
    PYTORCH: Framework(
        PYTORCH, "PyTorch", ("torch",), "torch", None, "trainscale.train.trainer:train"
    ),
    TENSORFLOW: Framework(
        TENSORFLOW,
        "TensorFlow",
        ("tensorflow", "keras"),
        "tensorflow",
        "tensorflow",
        "trainscale.frameworks.tensorflow.trainer:train",
        cuda=False,
    ),
    JAX: Framework(
        JAX,
        "JAX",
        ("jax", "flax", "optax"),
        "jax",
        "jax",
        "trainscale.frameworks.jax.trainer:train",
    ),
}


def get_framework(name: str) -> Framework:
    """The framework called `name`; ConfigError listing the known ones otherwise."""
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise ConfigError(
            f"unknown framework {name!r}; choose from {', '.join(FRAMEWORKS)}"
        ) from None


def missing_modules(name: str) -> list[str]:
    """The framework's modules that are not installed (found without importing them)."""
    return [m for m in get_framework(name).modules if importlib.util.find_spec(m) is None]


def require(name: str) -> Framework:
    """The framework, installed; ConfigError in one line naming the extra otherwise."""
    framework = get_framework(name)
    missing = missing_modules(name)
    if missing:
        raise ConfigError(
            f"--framework {name} needs {', '.join(missing)}, which is not installed: "
            f"pip install 'trainscale[{framework.extra}]'"
        )
    return framework


def version(name: str) -> str | None:
    """The installed version of the framework's main package (None when not installed)."""
    framework = get_framework(name)
    for distribution in (framework.distribution, f"{framework.distribution}-cpu"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def trainer(name: str) -> Callable[..., Any]:
    """The framework's train function (imports the framework)."""
    module, _, function = require(name).trainer.partition(":")
    return getattr(importlib.import_module(module), function)
