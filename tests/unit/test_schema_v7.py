"""Schema 7: a schema-6 store's settings hashes are recomputed by the rule that leaves every
setting at its default out, and each sweep's plan follows its runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from trainscale.config.options import EMULATION_KEY, RunConfig, settings_hash
from trainscale.results.schema import SCHEMA_VERSION
from trainscale.results.store import RunStore
from trainscale.sweeps.execute import open_sweep
from trainscale.sweeps.plan import make_plan
from trainscale.sweeps.spec import parse_spec

from tests.helpers.hashed_configs import serial_config

V6_HASH = "53bcb0f8d4a226d9"
"""The hash schema 6 stored for `serial_config()` (that version hashed every setting but five)."""
V6_UNRUN_HASH = "feedfeedfeedfeed"
"""A planned run's hash in a schema-6 sweep that never made it."""


def _create(store: RunStore, run_id: str, config: dict, config_hash: str | None, **kw) -> None:
    store.create_run(
        run_id,
        "mnist-cnn",
        config,
        {"cpu_model": "X"},
        data_kind="synthetic",
        world_size=2,
        threads_per_worker=1,
        affinity="compact",
        precision="fp32",
        global_batch_size=64,
        config_hash=config_hash,
        **kw,
    )


def _v6_store(path: Path, config: RunConfig) -> dict:
    emulated = {**config.flat(), EMULATION_KEY: {"workers": 8, "mode": "serial"}}
    plan = [
        {"item": 0, "label": "seed=0", "config_hash": V6_HASH, "repeat": 0},
        {"item": 1, "label": "seed=1", "config_hash": V6_UNRUN_HASH, "repeat": 0},
        {"item": 2, "label": "edited by hand", "config_hash": ["not", "a", "hash"]},
    ]
    with RunStore(path) as store:
        store.create_sweep("sweep-v6", "old", "old.toml", "spec", {"base": {}}, plan)
        _create(store, "swept", config.flat(), V6_HASH, sweep_id="sweep-v6", sweep_item=0)
        _create(store, "emulated", emulated, "0123456789abcdef")
        _create(store, "alone", config.flat(), None)
        _create(store, "damaged", config.flat(), "damagedhash00000")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE runs SET config_json = '{not json' WHERE run_id = 'damaged'")
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    return emulated


def test_a_schema_6_store_rehashes_its_runs_and_their_sweeps_plans(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    config = serial_config()
    emulated = _v6_store(path, config)
    with RunStore(path) as store:
        swept = store.get_run("swept")
        plan = store.get_sweep("sweep-v6").plan
        # The run is found by the hash a run of the same settings gets today.
        assert swept.config_hash == config.settings_hash() != V6_HASH
        assert plan[0]["config_hash"] == swept.config_hash
        # A planned run never made keeps its old hash (nothing to recompute it from).
        assert plan[1]["config_hash"] == V6_UNRUN_HASH
        assert plan[2]["config_hash"] == ["not", "a", "hash"]  # left for its readers to refuse
        assert store.get_run("emulated").config_hash == settings_hash(emulated)
        assert store.get_run("alone").config_hash is None
    conn = sqlite3.connect(path)
    (damaged,) = conn.execute("SELECT config_hash FROM runs WHERE run_id = 'damaged'").fetchone()
    conn.close()
    assert damaged == "damagedhash00000"  # unreadable: left for the store to report
    assert SCHEMA_VERSION >= 7


def test_an_emulations_hash_covers_its_emulation_settings() -> None:
    flat = serial_config().flat()
    serial = settings_hash({**flat, EMULATION_KEY: {"workers": 8, "mode": "serial"}})
    threads = settings_hash({**flat, EMULATION_KEY: {"workers": 8, "mode": "threads"}})
    assert len({serial, threads, settings_hash(flat)}) == 3


def test_a_sweep_stored_before_the_rule_resumes_after_the_migration(tmp_path: Path) -> None:
    """The plan a sweep makes today matches a schema-6 sweep whose runs were all made."""
    spec = parse_spec(
        {
            "name": "old",
            "base": {
                "workload": "mnist-cnn",
                "data": "synthetic",
                "threads_per_worker": 1,
                "precision": "fp32",
                "epochs": 2.0,
                "warmup_fraction": 0.3,
            },
            "grid": {"workers": [2]},
        },
        default_name="old",
    )
    plan = make_plan(spec)
    (planned,) = plan.runs
    path = tmp_path / "v6.db"
    with RunStore(path) as store:
        old_entry = {**planned.to_dict(), "config_hash": V6_HASH}
        store.create_sweep("sweep-v6", "old", "old.toml", spec.spec_hash(), {}, [old_entry])
        _create(store, "swept", planned.config.flat(), V6_HASH, sweep_id="sweep-v6")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with RunStore(path) as store:
        sweep, resumed = open_sweep(store, spec, plan, "old.toml", resume=True)
    assert resumed and sweep.sweep_id == "sweep-v6"
    assert sweep.plan[0]["config_hash"] == planned.config_hash
