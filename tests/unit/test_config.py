from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING

import pytest
import torch

from trainscale.config.options import RunConfig, RunOptions, settings_hash
from trainscale.errors import ConfigError
from trainscale.runner.resolve import resolve
from trainscale.train.lr import scaled_lr
from trainscale.workloads import get_workload

from tests.helpers.hashed_configs import serial_config


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"workers": 0}, "--workers"),
        ({"batch_size": -4}, "--batch-size"),
        ({"lr": float("nan")}, "--lr"),
        ({"epochs": 0}, "--epochs"),
        ({"precision": "fp8"}, "--precision"),
        ({"lr_scaling": "cubic"}, "--lr-scaling"),
        ({"target_accuracy": 99.0}, "--target-accuracy"),
        ({"batch_size": 8, "global_batch_size": 16}, "not both"),
        ({"workers": 3, "global_batch_size": 16, "allow_oversubscribe": True}, "divisible"),
        ({"threads_per_worker": "many"}, "--threads-per-worker"),
        ({"compile": True, "compile_mode": "turbo"}, "--compile-mode"),
        ({"compile_mode": "reduce-overhead"}, "--compile-mode reduce-overhead is a mode of"),
    ],
)
def test_invalid_options_name_the_option(changes, fragment):
    # Options check themselves when they are made: no run can hold an invalid one.
    with pytest.raises(ConfigError, match=fragment):
        RunOptions.of(workload="mnist-cnn", **changes)


def test_unknown_workload_lists_valid_ones():
    with pytest.raises(ConfigError, match="valid workloads: .*mnist-cnn"):
        resolve(RunOptions.of(workload="resnet-9000"))


def test_more_workers_than_cores_is_refused_without_flag():
    with pytest.raises(ConfigError, match="oversubscribes"):
        resolve(
            RunOptions.of(workload="mnist-cnn", workers=4, threads_per_worker=1),
            available_cores=[0, 1],
        )
    config = resolve(
        RunOptions.of(
            workload="mnist-cnn", workers=4, threads_per_worker=1, allow_oversubscribe=True
        ),
        available_cores=[0, 1],
    )
    assert config.parallel.oversubscribed


def test_defaults_plan_threads_and_batch():
    config = resolve(RunOptions.of(workload="mnist-cnn", workers=2), available_cores=[0, 1, 2, 3])
    assert config.parallel.threads_per_worker == 2
    assert config.parallel.core_sets == [[0, 1], [2, 3]]
    recipe_batch = get_workload("mnist-cnn").recipe.batch_size
    assert (
        config.optimisation.batch_size == recipe_batch
        and config.optimisation.global_batch_size == 2 * recipe_batch
    )
    assert not config.parallel.oversubscribed


def test_global_batch_is_split_and_lr_scaled():
    config = resolve(
        RunOptions.of(
            workload="mnist-cnn", workers=2, global_batch_size=512, lr_scaling="linear", lr=0.01
        ),
        available_cores=[0, 1],
    )
    assert config.optimisation.batch_size == 256
    reference = get_workload("mnist-cnn").recipe.batch_size
    assert config.optimisation.reference_batch_size == reference
    assert config.optimisation.lr == pytest.approx(0.01 * 512 / reference)
    assert config.optimisation.warmup_fraction >= 0.1  # scaled lr gets a warm-up


@pytest.mark.parametrize(("default_threads", "oversubscribed"), [(2, True), (1, False)])
def test_torch_default_threads_is_unset_and_oversubscribed_when_its_threads_are(
    monkeypatch, default_threads, oversubscribed
):
    # torch's default is one thread a core, or OMP_NUM_THREADS: with OMP_NUM_THREADS=1 two
    # workers run 2 threads on 2 cores, which was stored as oversubscribed all the same.
    monkeypatch.setattr(torch, "get_num_threads", lambda: default_threads)
    config = resolve(
        RunOptions.of(
            workload="mnist-cnn", workers=2, threads_per_worker="torch-default", affinity="none"
        ),
        available_cores=[0, 1],
    )
    assert config.parallel.threads_per_worker is None and config.parallel.core_sets is None
    assert config.parallel.oversubscribed is oversubscribed


def test_scaled_lr_rules():
    assert scaled_lr(0.1, 256, 128, "none") == 0.1
    assert scaled_lr(0.1, 256, 128, "linear") == pytest.approx(0.2)
    assert scaled_lr(0.1, 512, 128, "sqrt") == pytest.approx(0.2)
    assert math.isclose(scaled_lr(0.1, 64, 128, "linear"), 0.05)


def test_config_roundtrips_through_its_flat_form():
    config = resolve(RunOptions.of(workload="mnist-cnn"), available_cores=[0])
    assert RunConfig.from_flat(config.flat()) == config


def test_an_unknown_key_in_a_flat_config_is_refused():
    flat = resolve(RunOptions.of(workload="mnist-cnn"), available_cores=[0]).flat()
    with pytest.raises(ConfigError, match="unknown RunConfig field 'wrokers'"):
        RunConfig.from_flat({**flat, "wrokers": 2})


# -- options declared once -------------------------------------------------------------------


def _two_configs() -> tuple[RunConfig, RunConfig]:
    nodes = RunOptions.of(
        "mnist-dbn",
        nnodes=2,
        rdzv_endpoint="h:1",
        rdzv_id="j",
        steps=7,
        tag="x",
        workload_options={"cd_k": "3"},
        precision="fp32",
    )
    return serial_config(), resolve(nodes, available_cores=[0, 1])


def test_the_settings_hash_is_that_of_the_runs_already_stored():
    # Stores match repeats and resumed sweeps by these hashes (schema 7 on): a change of
    # the rule or of a default must come with a store migration (results/hash_migration.py).
    serial, nodes = _two_configs()
    assert serial.settings_hash() == "0810c8d6db5a393e"
    assert nodes.settings_hash() == "e56822f1e2db8ba5"


def test_a_setting_at_its_default_hashes_as_if_it_did_not_exist():
    # One rule for every setting, so an option added later keeps earlier runs' hashes while
    # it keeps the default they trained with.
    for config in _two_configs():
        flat = config.flat()
        at_default = [
            key
            for key, leaf in RunConfig.flat_fields().items()
            if leaf.default() is not MISSING and flat[key] == leaf.default()
        ]
        assert {"framework", "single_process", "compile_mode", "profile"} <= set(at_default)
        for key in at_default:
            without = {k: v for k, v in flat.items() if k != key}
            assert settings_hash(without) == config.settings_hash(), key


def test_a_setting_away_from_its_default_shapes_the_hash_and_a_label_does_not():
    serial, _ = _two_configs()
    profiled = serial.with_(profile="prof")
    assert profiled.with_(profile_steps=21).settings_hash() != profiled.settings_hash()
    assert serial.with_(seed=1).settings_hash() != serial.settings_hash()
    assert serial.with_(tag="other", rdzv_timeout_s=9.0).settings_hash() == serial.settings_hash()


def test_the_settings_hash_compares_numbers_by_value_but_not_bools_with_numbers():
    serial, _ = _two_configs()
    flat = serial.flat()
    # A file's `profile_steps = 20.0` is the default of 20.
    assert settings_hash({**flat, "profile_steps": 20.0}) == settings_hash(flat)
    # nnodes defaults to 1; True == 1 in Python, but True is no node count.
    assert settings_hash({**flat, "nnodes": True}) != settings_hash(flat)


def test_the_settings_hash_of_a_stored_config_is_that_of_the_live_one():
    for config in _two_configs():
        stored = json.loads(json.dumps(config.flat()))
        assert settings_hash(stored) == config.settings_hash()
        # A name from an older version is not a setting of this one.
        assert settings_hash({**stored, "gone_option": 3}) == config.settings_hash()


def _run_help() -> str:
    import contextlib
    import io

    from trainscale.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["run", "--help"])
    return " ".join(out.getvalue().split())


def test_every_run_option_is_in_run_help_with_its_docstring():
    from trainscale.config.cli import field_docs, leaf_flag

    text = _run_help()
    for key, leaf in RunOptions.flat_fields().items():
        if key == "workload":
            continue
        owner = RunOptions if leaf.group is None else type(getattr(RunOptions.of("x"), leaf.group))
        doc = field_docs(owner)[leaf.name]
        assert doc, f"{key} has no docstring"
        assert f"{leaf_flag(leaf)} " in text, f"{leaf_flag(leaf)} missing from `run --help`"
        # argparse wraps lines (also at hyphens): compare without whitespace.
        assert "".join(doc.split()) in "".join(text.split()), f"{key}'s docstring is not its help"


def test_no_default_is_written_twice():
    # A field's default lives in its declaration; the help text appends it, so a docstring
    # that spells it out would say it twice (and go stale when it changes).
    from trainscale.cli import build_parser
    from trainscale.config.cli import DECLARED, field_docs

    for key, leaf in RunOptions.flat_fields().items():
        owner = RunOptions if leaf.group is None else type(getattr(RunOptions.of("x"), leaf.group))
        declared = leaf.item.default is not MISSING or leaf.item.default_factory is not MISSING
        default = leaf.default() if declared else None
        if default is None or isinstance(default, (bool, dict)):
            continue
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        doc = field_docs(owner).get(leaf.name, "")
        assert not re.search(rf"default[^)]*\b{re.escape(shown)}\b", doc), (key, doc)
    # Every command that takes run options gets their defaults from the declarations; the
    # only exception is said where it is made (sweep's --data overrides only when given).
    overridden = {("sweep", "data")}
    minimal = {
        "run": ["run", "mnist-cnn"],
        "emulate": ["emulate", "mnist-cnn", "--workers", "2", "--mode", "sync"],
        "recommend": ["recommend", "mnist-cnn"],
        "bench": ["bench"],
        "sweep": ["sweep", "f.toml"],
    }
    parser = build_parser()
    for command, argv in minimal.items():
        args = parser.parse_args(argv)
        keys = getattr(args, DECLARED)
        assert keys, f"{command} declares no run options"
        for key in keys:
            if (command, key) in overridden:
                continue
            leaf = RunOptions.flat_fields()[key]
            expected = [] if leaf.item.metadata.get("pairs") else leaf.default()
            assert getattr(args, key) == expected, (command, key)
