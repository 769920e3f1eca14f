"""A stored run's settings, typed: what each reader got from `config.get` with its own
default, said once (results/stored_settings.py)."""

from __future__ import annotations

import dataclasses

from trainscale.config.options import MeasurementOptions
from trainscale.config.script import ScriptRun
from trainscale.results.store import RunStore
from trainscale.results.stored_settings import StoredSettings

from tests.helpers.tiny import tiny_config


def test_a_stored_run_config_reads_back_as_it_was_resolved():
    config = tiny_config(grad_accum=2, bucket_cap_mb=5.0, steps=7).with_(
        core_sets=[[0], [1]], compile=True
    )
    settings = StoredSettings.of(config.flat())
    parallel = config.parallel
    assert settings.device == parallel.device == "cpu"
    assert settings.grad_accum == 2 and settings.bucket_cap_mb == 5.0
    assert settings.core_sets == ((0,), (1,))
    assert settings.threads_per_worker == parallel.threads_per_worker == 1
    assert settings.workers == parallel.workers
    assert settings.batch_size == config.optimisation.batch_size
    assert settings.compile and settings.steps == 7
    assert settings.epochs == config.flat()["epochs"]
    assert settings.framework == "pytorch" and not settings.single_process
    assert settings.script is None and settings.workload_source is None


def test_a_config_stored_before_the_settings_existed_takes_the_values_runs_had_then():
    assert StoredSettings.of({}) == StoredSettings(
        framework="pytorch", device="cpu", nnodes=1, grad_accum=1, compile=False, core_sets=()
    )


def test_a_value_of_the_wrong_type_means_what_a_missing_one_does():
    # A hand-edited store: the readers used to check each type themselves, or not at all.
    edited = StoredSettings.of(
        {
            "grad_accum": "2",
            "nnodes": True,  # a bool is an int to Python, never a count
            "threads_per_worker": 0,
            "core_sets": [[0, "1", 2], "3", [True]],
            "bucket_cap_mb": "25",
            "epochs": False,
            "device": 7,
        }
    )
    assert edited.grad_accum == 1 and edited.nnodes == 1
    assert edited.threads_per_worker is None and edited.bucket_cap_mb is None
    assert edited.core_sets == ((0, 2), ())
    assert edited.epochs is None and edited.device == "cpu"


def test_a_script_runs_config_names_its_script_and_no_batch():
    config = tiny_config()
    run = ScriptRun(
        script="/home/me/train.py",
        sha256="ab" * 32,
        args=("--lr", "0.1"),
        parallel=dataclasses.replace(config.parallel, workers=2),
        measurement=MeasurementOptions(),
    )
    settings = StoredSettings.of(run.flat())
    assert settings.script == "/home/me/train.py" and settings.script_sha256 == "ab" * 32
    assert settings.batch_size is None and settings.workers == 2


def test_a_stored_record_hands_out_its_settings(tmp_path):
    config = tiny_config(grad_accum=4)
    with RunStore(tmp_path / "s.db") as store:
        store.create_run(
            "r1",
            "mnist-cnn",
            config.flat(),
            {},
            data_kind="synthetic",
            world_size=1,
            threads_per_worker=1,
            affinity=None,
            precision="fp32",
            global_batch_size=16,
        )
        record = store.get_run("r1")
    assert record.settings.grad_accum == 4
    assert record.settings is record.settings, "read once"
