"""The frameworks that can train a workload: PyTorch (the core), TensorFlow/Keras and JAX.

Every framework trains the same framework-neutral workload spec under the same measurement
rules into the same store; only the model builders, the training step, the evaluation and the
gradient communication are the framework's own (docs/frameworks.md). This module names them,
says whether each is installed (without importing it: TensorFlow takes seconds to import),
and hands the worker the framework's trainer.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainscale.errors import ConfigError
from trainscale.hardware.tf32 import ALL_TF32, NO_TF32, Tf32Use, torch_tf32_use

# The keys of a workload's model builders (`Workload.models`). workloads/base.py names them
# too: this module is not to import it, as it imports torch, which `trainscale --help`
# must not load (a test checks that the two agree).
PYTORCH = "pytorch"
TENSORFLOW = "tensorflow"
JAX = "jax"


TrainFunction = Callable[..., Any]
"""A framework's train function, with `trainscale.train.trainer.train`'s signature."""

# The PyTorch step's own settings (run options, by flat name), which another framework's step
# has no use for: the reason each is PyTorch's, for the line that refuses it.
PYTORCH_STEP_SETTINGS = {
    "compile": "it compiles its step anyway (tf.function / jax.jit)",
    "grad_accum": "micro-batches are DDP's no_sync",
    "bucket_cap_mb": "buckets are DDP's",
    "profile": "it records PyTorch's operators",
    "breakdown_every": "its step is one compiled call, with no phases between to mark",
}


@dataclass(frozen=True)
class Framework:
    """One framework as trainscale uses it: what it is, and what it can do, asked by the run's
    checks (`runner/resolve.py`), the precision rule, the bench ladder and the CLI instead of
    comparing framework names."""

    name: str
    label: str
    """How tables and docs name it."""
    modules: tuple[str, ...]
    """The modules its trainer imports (all must be installed)."""
    distribution: str
    """The package whose version is stored with a run."""
    extra: str | None
    """The pip extra that installs it (None: a core dependency)."""
    load_trainer: Callable[[], TrainFunction]
    """Imports its trainer and returns its train function (`trainer(name)` checks first
    that the framework is installed)."""
    data_parallelism: str
    """What its workers share gradients with, as bench rungs name it."""
    cuda: bool = True
    """Whether it trains on CUDA GPUs. TensorFlow does not here: the GPU machines it would be
    tested on cannot install it (only tensorflow-cpu), so it is never run there."""
    single_process: bool = False
    """Whether it can train N replicas in one process (`--single-process`)."""
    refused_settings: Mapping[str, str] = field(default_factory=dict)
    """Run options it has no use for, by flat name -> why (each refused in one line when
    given, that is, off its default)."""
    auto_fp32: Mapping[str, str] = field(default_factory=dict)
    """Devices where `--precision auto` means fp32 whatever the hardware -> the reason
    stored with the run (measured: docs/frameworks.md)."""
    fp16: bool = True
    """Whether it trains in fp16 (on GPUs, with loss scaling)."""
    missing_gpu_backend: Callable[[], str | None] = lambda: None
    """Why its installed build cannot reach CUDA GPUs (None: it can), found without
    importing it; asked only where `cuda` is True."""
    gpu_tf32: Callable[[], Tf32Use] = torch_tf32_use
    """Which kinds of operator it computes fp32 in on TF32 tensor cores on a GPU, as its
    settings stand in the worker (the peak an fp32 GPU run's MFU is taken against)."""

    @property
    def cpu_only_reason(self) -> str:
        """Why its GPU settings are left out, for the lines that say so."""
        return f"{self.label} trains on the CPU only (docs/frameworks.md)"

    def gpu_reason(self) -> str | None:
        """Why it does not train on this machine's GPUs as installed, or None where it does."""
        return self.missing_gpu_backend() if self.cuda else self.cpu_only_reason


# JAX reaches CUDA through a plugin package (jax[cuda12] installs jax_cuda12_plugin), or,
# in older releases, a jaxlib built with CUDA ('0.4.28+cuda12.cudnn89'); the project's own
# extra installs jax[cpu], whose jax.devices() on a GPU fails without a word.
_JAX_CUDA_PLUGIN = re.compile(r"jax_cuda\d+_plugin")


def _jax_gpu_backend_missing() -> str | None:
    if any(_JAX_CUDA_PLUGIN.fullmatch(module.name) for module in pkgutil.iter_modules()):
        return None
    try:
        if "+cuda" in importlib.metadata.version("jaxlib"):
            return None
    except importlib.metadata.PackageNotFoundError:
        pass
    return (
        "the installed JAX has no CUDA backend (no jax_cuda*_plugin; "
        "pip install 'jax[cuda13]' or 'jax[cuda12]' to match the machine's CUDA)"
    )


def _jax_tf32_use() -> Tf32Use:
    """XLA computes fp32 dots and convolutions in TF32 on GPUs unless JAX's default matmul
    precision asks for full fp32 ('highest', 'float32', or the F32_F32_F32 algorithm). Read
    where JAX trained, so already imported; elsewhere XLA's default."""
    jax = sys.modules.get("jax")
    if jax is None:
        return ALL_TF32
    asked = str(getattr(jax.config, "jax_default_matmul_precision", None) or "").lower()
    return NO_TF32 if asked in ("highest", "float32", "f32_f32_f32") else ALL_TF32


def _pytorch_trainer() -> TrainFunction:
    from trainscale.train.trainer import train

    return train


def _tensorflow_trainer() -> TrainFunction:
    from trainscale.frameworks.tensorflow.trainer import train

    return train


def _jax_trainer() -> TrainFunction:
    from trainscale.frameworks.jax.trainer import train

    return train


FRAMEWORKS: dict[str, Framework] = {
    PYTORCH: Framework(
        PYTORCH,
        "PyTorch",
        ("torch",),
        "torch",
        None,
        _pytorch_trainer,
        data_parallelism="DDP",
    ),
    TENSORFLOW: Framework(
        TENSORFLOW,
        "TensorFlow",
        ("tensorflow", "keras"),
        "tensorflow",
        "tensorflow",
        _tensorflow_trainer,
        data_parallelism="MultiWorkerMirroredStrategy",
        cuda=False,
        single_process=True,
        refused_settings=PYTORCH_STEP_SETTINGS,
        # TensorFlow's default (tf.config.experimental.enable_tensor_float_32_execution).
        gpu_tf32=lambda: ALL_TF32,
    ),
    JAX: Framework(
        JAX,
        "JAX",
        ("jax", "flax", "optax"),
        "jax",
        "jax",
        _jax_trainer,
        data_parallelism="jax.distributed",
        single_process=True,
        fp16=False,
        missing_gpu_backend=_jax_gpu_backend_missing,
        gpu_tf32=_jax_tf32_use,
        refused_settings=PYTORCH_STEP_SETTINGS,
        auto_fp32={
            # bf16 with JAX is measured on the CPU only: no claim on GPUs.
            "cuda": "auto: fp32 with jax (--precision bf16 asks for bf16 on the GPU)",
            "cpu": "auto: fp32 with jax, whose CPU backend (XLA) runs bf16 slower than fp32",
        },
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


def trainer(name: str) -> TrainFunction:
    """The framework's train function (imports the framework, once found installed)."""
    return require(name).load_trainer()
