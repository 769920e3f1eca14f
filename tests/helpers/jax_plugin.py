"""Whether JAX finds a CUDA plugin, decided by the test: trainscale looks for one among the
importable modules (`pkgutil.iter_modules`), without importing JAX."""

from __future__ import annotations

import pkgutil

import pytest

PLUGIN = "jax_cuda13_plugin"


def pretend_jax_cuda_plugin(monkeypatch: pytest.MonkeyPatch, installed: bool) -> None:
    """Make the module listing hold a JAX CUDA plugin (`installed`) or none at all."""
    real = [m for m in pkgutil.iter_modules() if not m.name.startswith("jax_cuda")]
    fake = [pkgutil.ModuleInfo(real[0].module_finder, PLUGIN, True)] if installed else []
    monkeypatch.setattr(pkgutil, "iter_modules", lambda *a, **k: iter(real + fake))
