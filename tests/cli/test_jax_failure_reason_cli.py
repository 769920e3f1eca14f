"""A JAX worker that XLA ends from C++ (an unknown XLA_FLAGS entry) is stored with what it
was doing, not a bare exit status."""

from __future__ import annotations

import pytest

pytest.importorskip("jax")

from trainscale.results.store import RunStore  # noqa: E402

from tests.helpers.cli import run_cli  # noqa: E402


def test_an_unknown_xla_flag_is_stored_as_the_backend_start_it_broke(
    store_path, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XLA_FLAGS", "--xla_no_such_flag")
    args = ["run", "mnist-cnn", "--framework", "jax", "--data", "synthetic", "--steps", "2"]
    args += ["--batch-size", "16", "--threads-per-worker", "1", "--no-eval", "--quiet"]

    code = run_cli([*args, "--store", str(store_path)])

    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    with RunStore(store_path) as store:
        (record,) = store.list_runs()
    assert record.status == "failed"
    assert "exit code 1 while starting JAX's XLA backend (XLA_FLAGS='--xla_no_such_flag" in (
        record.error
    )
    assert record.error.endswith("XLA's own message is in the output above")
    assert record.error in last
