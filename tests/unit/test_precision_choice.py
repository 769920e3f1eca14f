"""`--precision auto`: bf16 where the device computes it natively, fp32 elsewhere, with why."""

from __future__ import annotations

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.frameworks import FRAMEWORKS
from trainscale.hardware.facts import cpu_bf16_native
from trainscale.hardware.precision_choice import choose_precision
from trainscale.runner.resolve import _resolve_optimisation, precision_line, resolve
from trainscale.workloads import get_workload


@pytest.mark.parametrize(
    ("device", "native", "expected"),
    [
        ("cpu", True, "bf16"),
        ("cpu", False, "fp32"),
        ("cuda", True, "bf16"),
        ("cuda", False, "fp32"),
    ],
)
def test_auto_is_bf16_only_where_the_device_computes_it_natively(device, native, expected):
    choice = choose_precision("auto", device, cpu_bf16=native, cuda_bf16=native)
    assert choice.precision == expected
    assert choice.reason.startswith("auto: ")
    assert ("no native bf16" in choice.reason) is (not native)


def auto_fp32(framework: str, device: str) -> str | None:
    return FRAMEWORKS[framework].auto_fp32.get(device)


def test_auto_keeps_jax_in_fp32_and_lets_tensorflow_use_native_bf16():
    jax = choose_precision("auto", "cpu", fp32_reason=auto_fp32("jax", "cpu"), cpu_bf16=True)
    assert jax.precision == "fp32" and "jax" in jax.reason
    tensorflow = choose_precision(
        "auto", "cpu", fp32_reason=auto_fp32("tensorflow", "cpu"), cpu_bf16=True
    )
    assert tensorflow.precision == "bf16"
    assert choose_precision("bf16", "cpu", fp32_reason=auto_fp32("jax", "cpu")).precision == "bf16"


def test_a_jax_run_resolves_to_fp32_with_its_reason():
    pytest.importorskip("jax")  # resolving a JAX run checks that it is installed
    options = RunOptions.of("mnist-cnn", data="synthetic", framework="jax")
    config = resolve(options, available_cores=[0])
    assert config.optimisation.precision == "fp32"
    assert config.optimisation.precision_reason == auto_fp32("jax", "cpu")


@pytest.mark.parametrize("asked", ["fp32", "bf16", "fp16"])
def test_a_named_precision_is_kept_whatever_the_device(asked):
    for native in (True, False):
        choice = choose_precision(asked, "cpu", cpu_bf16=native)
        assert (choice.precision, choice.reason) == (asked, f"--precision {asked}")


def test_the_cpu_flags_decide(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpu_bf16_native(tmp_path) is True
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f\n")
    assert cpu_bf16_native(tmp_path) is False


@pytest.mark.parametrize("native", [True, False])
def test_the_default_run_resolves_auto_and_stores_the_reason(native, monkeypatch):
    monkeypatch.setattr("trainscale.hardware.facts.cpu_bf16_native", lambda: native)
    config = resolve(RunOptions.of("mnist-cnn", data="synthetic"), available_cores=[0])
    precision = "bf16" if native else "fp32"
    assert config.optimisation.precision == precision
    flat = config.flat()
    assert flat["precision"] == precision and flat["precision_reason"].startswith("auto: ")
    assert precision_line(config) == f"precision {precision} ({flat['precision_reason']})"
    # The choice is the setting: auto's bf16 trains as --precision bf16 does, same hash.
    named = resolve(
        RunOptions.of("mnist-cnn", data="synthetic", precision=precision), available_cores=[0]
    )
    assert named.settings_hash() == config.settings_hash()
    assert named.optimisation.precision_reason == f"--precision {precision}"


def test_a_stored_config_without_a_reason_still_loads():
    config = resolve(RunOptions.of("mnist-cnn", data="synthetic"), available_cores=[0])
    flat = config.flat()
    del flat["precision_reason"]
    assert type(config).from_flat(flat).optimisation.precision_reason is None


def test_fp16_on_the_cpu_is_still_refused():
    with pytest.raises(ConfigError, match="fp16 needs --device cuda"):
        resolve(RunOptions.of("mnist-cnn", precision="fp16"), available_cores=[0])


def test_the_simulator_asks_for_a_named_precision():
    from trainscale.simulator.cluster import load_preset
    from trainscale.simulator.setup import calibrate

    with pytest.raises(ConfigError, match="--precision auto chooses for a run on this machine"):
        calibrate("mnist-cnn", load_preset("dgx1-v100"), None, precision="auto")


def test_this_machine_gets_what_its_flags_say():
    config = resolve(RunOptions.of("mnist-cnn", data="synthetic"), available_cores=[0])
    assert config.optimisation.precision == ("bf16" if cpu_bf16_native() else "fp32")


def test_auto_keeps_jax_in_fp32_on_a_gpu_without_blaming_the_cpu():
    choice = choose_precision("auto", "cuda", fp32_reason=auto_fp32("jax", "cuda"), cuda_bf16=True)
    assert choice.precision == "fp32" and "CPU" not in choice.reason


@pytest.mark.parametrize(
    ("workload", "device", "noted"),
    [
        ("imdb-bilstm", "cuda", True),
        ("imdb-bigru", "cuda", True),
        ("imdb-bilstm", "cpu", False),  # oneDNN computes the RNN in bf16 on the CPU
        ("tweets-text", "cuda", False),  # no recurrent layer
        ("mnist-cnn", "cuda", False),
    ],
)
def test_the_precision_reason_says_where_recurrent_layers_stay_fp32(workload, device, noted):
    optimisation = _resolve_optimisation(
        RunOptions.of(workload, precision="bf16"), get_workload(workload), device
    )
    assert optimisation.precision == "bf16"
    assert ("recurrent layers compute in fp32" in optimisation.precision_reason) is noted
