"""`--compile` on the CPU needs the C++ compiler TorchInductor builds its kernels with."""

from __future__ import annotations

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.runner.resolve import resolve
from trainscale.train.compile import inductor_cpu_compiler


def test_compile_on_the_cpu_without_a_compiler_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++ (nor anything) on PATH
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(ConfigError, match=r"--compile on the CPU needs a C\+\+ compiler.*'g\+\+'"):
        resolve(RunOptions.of("mnist-cnn", compile=True), available_cores=[0])
    resolve(RunOptions.of("mnist-cnn", compile=False), available_cores=[0])  # eager needs none


def test_the_compiler_is_cxx_when_set(monkeypatch, tmp_path):
    compiler = tmp_path / "my-c++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CXX", "my-c++")
    assert inductor_cpu_compiler() == ("my-c++", str(compiler))
    resolve(RunOptions.of("mnist-cnn", compile=True), available_cores=[0])
