"""Bad input around --framework: one line, exit 2, before any worker starts."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from trainscale import frameworks
from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.frameworks import FRAMEWORKS, missing_modules, require
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.jax_plugin import pretend_jax_cuda_plugin


def _pretend_missing(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make `modules` look uninstalled to the framework check (nothing is imported)."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args, **kwargs):
        return None if name in modules else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_unknown_framework_is_refused_in_one_line(capsys, tmp_path):
    store = tmp_path / "runs.db"
    code = run_cli(["run", "mnist-cnn", "--framework", "mxnet", "--store", str(store)])
    assert code == 2
    line = one_error_line(capsys)
    assert "mxnet" in line and "tensorflow" in line and "jax" in line
    assert not store.exists()


@pytest.mark.parametrize(
    ("framework", "module", "extra"),
    [("tensorflow", "tensorflow", "trainscale[tensorflow]"), ("jax", "flax", "trainscale[jax]")],
)
def test_a_framework_not_installed_names_its_extra(
    capsys, tmp_path, monkeypatch, framework, module, extra
):
    _pretend_missing(monkeypatch, module)
    store = tmp_path / "runs.db"
    code = run_cli(
        ["run", "mnist-cnn", "--framework", framework, "--data", "synthetic", "--steps", "2",
         "--store", str(store)]
    )  # fmt: skip
    assert code == 2
    line = one_error_line(capsys)
    assert module in line and f"pip install '{extra}'" in line
    # Refused before the run existed: nothing stored, not even a failed row.
    with RunStore(store) as runs:
        assert runs.list_runs() == []


def test_bench_refuses_a_missing_framework_before_the_first_rung(capsys, tmp_path, monkeypatch):
    _pretend_missing(monkeypatch, "jax")
    code = run_cli(
        ["bench", "--framework", "jax", "--quick", "--store", str(tmp_path / "b.db"),
         "--out", str(tmp_path / "bench.md")]
    )  # fmt: skip
    assert code == 2
    assert "trainscale[jax]" in one_error_line(capsys)
    assert not (tmp_path / "bench.md").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--single-process", "--workers", "2"], ("--single-process", "tensorflow or jax")),
        (["--framework", "tensorflow", "--single-process"], ("--single-process", "N > 1")),
        (["--framework", "jax", "--compile"], ("--compile", "PyTorch setting")),
        (["--framework", "tensorflow", "--grad-accum", "2"], ("--grad-accum", "no_sync")),
        (["--framework", "jax", "--bucket-cap-mb", "4"], ("--bucket-cap-mb", "DDP")),
    ],
)
def test_unsupported_combinations_are_refused_in_one_line(capsys, tmp_path, args, words):
    code = run_cli(
        ["run", "mnist-cnn", "--data", "synthetic", "--steps", "2", "--store",
         str(tmp_path / "r.db"), *args]
    )  # fmt: skip
    assert code == 2
    line = one_error_line(capsys)
    for word in words:
        assert word in line


def test_every_refused_setting_is_a_run_option_refused_when_given():
    # A key that named no run option would never be refused: the setting silently ignored.
    from trainscale.runner.resolve import check_framework

    given = {
        "compile": True,
        "grad_accum": 2,
        "bucket_cap_mb": 4.0,
        "profile": "prof",
        "breakdown_every": 1,
    }
    for framework in FRAMEWORKS.values():
        assert set(framework.refused_settings) <= set(RunOptions.flat_fields())
        for key in framework.refused_settings:
            opts = RunOptions.of("mnist-cnn", framework=framework.name, **{key: given[key]})
            flag = "--" + key.replace("_", "-")
            with pytest.raises(ConfigError, match=f"^{flag} is a PyTorch setting"):
                check_framework(opts, "cpu")


def test_require_passes_for_pytorch_and_names_every_missing_module(monkeypatch):
    assert require("pytorch").name == "pytorch"
    _pretend_missing(monkeypatch, "flax", "optax")
    assert missing_modules("jax") == ["flax", "optax"]


def test_the_trainer_is_loaded_only_once_the_framework_is_found_installed(monkeypatch):
    loaded = []
    jax = dataclasses.replace(FRAMEWORKS["jax"], load_trainer=lambda: loaded.append("jax"))
    monkeypatch.setitem(frameworks.FRAMEWORKS, "jax", jax)
    _pretend_missing(monkeypatch, "optax")
    with pytest.raises(ConfigError, match=r"needs optax, which is not installed"):
        frameworks.trainer("jax")
    assert loaded == []
    monkeypatch.undo()
    monkeypatch.setitem(frameworks.FRAMEWORKS, "jax", jax)
    frameworks.trainer("jax")
    assert loaded == ["jax"]


def test_the_framework_is_part_of_a_runs_settings_but_pytorch_hashes_as_before():
    from trainscale.runner.resolve import resolve

    base = resolve(RunOptions.of("mnist-cnn", data="synthetic", steps=2))
    flat = base.flat()
    assert flat["framework"] == "pytorch" and flat["single_process"] is False
    # Stored PyTorch runs keep their settings hash (repeats and resumed sweeps match them).
    legacy = {k: v for k, v in flat.items() if k not in ("framework", "single_process")}
    from trainscale.config.options import RunConfig

    assert RunConfig.from_flat(legacy).settings_hash() == base.settings_hash()
    if not missing_modules("tensorflow"):
        other = resolve(
            RunOptions.of("mnist-cnn", data="synthetic", steps=2, framework="tensorflow")
        )
        assert other.settings_hash() != base.settings_hash()


def test_every_framework_names_an_extra_or_is_the_core():
    assert FRAMEWORKS["pytorch"].extra is None
    assert {FRAMEWORKS[n].extra for n in ("tensorflow", "jax")} == {"tensorflow", "jax"}


def test_tensorflow_on_a_gpu_is_refused_before_launch():
    from trainscale.errors import ConfigError
    from trainscale.runner.resolve import check_framework

    if missing_modules("tensorflow"):
        pytest.skip("tensorflow is not installed")
    opts = RunOptions.of("mnist-cnn", framework="tensorflow", device="cuda")
    with pytest.raises(ConfigError, match="CPU only"):
        check_framework(opts, "cuda")
    check_framework(opts.with_(device="cpu"), "cpu")  # the CPU is fine


def test_jax_on_a_gpu_is_one_process_per_gpu(monkeypatch):
    from trainscale.errors import ConfigError
    from trainscale.runner.resolve import check_framework

    if missing_modules("jax"):
        pytest.skip("jax is not installed")
    pretend_jax_cuda_plugin(monkeypatch, installed=True)  # jax[cuda13], as on a GPU machine
    opts = RunOptions.of("mnist-cnn", framework="jax", device="cuda")
    check_framework(opts, "cuda")  # offered on GPUs
    check_framework(opts.with_(workers=2), "cuda")
    with pytest.raises(ConfigError, match="one process per GPU"):
        check_framework(opts.with_(workers=2, single_process=True), "cuda")


def test_every_bench_rung_trains_with_the_chosen_framework():
    from trainscale.benchmark.ladder import Rung, plan_ladder

    base = RunOptions.of("mnist-cnn", framework="jax", steps=4)
    rungs = [r for r in plan_ladder(base, 2, True, 0) if isinstance(r, Rung)]
    assert {r.options.parallel.framework for r in rungs} == {"jax"}
    naive = next(r for r in rungs if r.pitfall)
    assert "jax-default threads" in naive.name and "torch" not in naive.name


def test_workloads_lists_the_frameworks_and_how_to_install_a_missing_one(capsys, monkeypatch):
    _pretend_missing(monkeypatch, "jax")
    assert run_cli(["workloads"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich may wrap the line
    assert "pytorch," in out
    assert "jax (not installed: pip install 'trainscale[jax]')" in out
