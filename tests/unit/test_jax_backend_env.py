"""What a JAX worker sets before XLA's backend starts, on the CPU and on a GPU (pure
functions: no backend is started here)."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from trainscale.config.options import RunConfig, RunOptions  # noqa: E402
from trainscale.frameworks.jax.distribute import (  # noqa: E402
    backend_environment,
    backend_options,
)
from trainscale.runner.resolve import resolve  # noqa: E402


def config(device: str = "cpu", **changes: object) -> RunConfig:
    """A resolved JAX run on the CPU, its device then set to `device` (resolving cuda needs
    a GPU; these functions only read the config)."""
    flat = {
        "workload": "mnist-cnn",
        "framework": "jax",
        "data": "synthetic",
        "threads_per_worker": 1,
        "affinity": "none",
        "allow_oversubscribe": True,
    }
    resolved = resolve(RunOptions.from_flat(flat))
    return resolved.with_(device=device, **changes)


def test_a_gpu_worker_does_not_preallocate_and_gets_no_cpu_flags():
    env = backend_environment(config("cuda"), {"XLA_FLAGS": "--xla_dump_to=/tmp/x"})
    assert env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}  # XLA_FLAGS left as it was


def test_a_users_own_preallocation_choice_is_kept():
    assert backend_environment(config("cuda"), {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}) == {}


def test_a_cpu_worker_gets_collective_timeouts_after_the_users_flags_and_its_threads():
    cfg = config("cpu", timeout_s=42.5)
    env = backend_environment(cfg, {"XLA_FLAGS": "--xla_dump_to=/tmp/x"})
    assert env["XLA_FLAGS"].startswith("--xla_dump_to=/tmp/x ")
    assert "--xla_cpu_collective_timeout_seconds=43" in env["XLA_FLAGS"]
    assert "--xla_cpu_collective_call_terminate_timeout_seconds=43" in env["XLA_FLAGS"]
    assert env["NPROC"] == "1"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in env


def test_a_gpu_worker_sees_its_local_ranks_gpu_only_on_the_cuda_platform():
    options = backend_options(config("cuda"), local_rank=3)
    assert options["jax_platforms"] == "cuda"
    assert options["jax_cuda_visible_devices"] == "3"
    assert not any(name.startswith("jax_cpu") or name == "jax_num_cpu_devices" for name in options)


def test_a_cpu_worker_uses_gloo_and_one_process_gets_its_host_devices():
    options = backend_options(config("cpu"), local_rank=0)
    assert options["jax_platforms"] == "cpu"
    assert options["jax_cpu_collectives_implementation"] == "gloo"
    assert "jax_cuda_visible_devices" not in options
    single = backend_options(config("cpu", workers=2, single_process=True), local_rank=0)
    assert single["jax_num_cpu_devices"] == 2
