"""A custom workload's sys.exit and errors through the Python API: the API's own errors,
never a SystemExit into the caller, and no traceback printed by the workers."""

from __future__ import annotations

import pytest

import trainscale
from trainscale.errors import WorkloadError
from trainscale.results.store import RunStore

from tests.helpers.custom_workloads import fresh_custom_workloads, tiny_workload

pytestmark = pytest.mark.usefixtures("fresh_custom_workloads")
__all__ = ["fresh_custom_workloads"]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))


def test_sys_exit_in_forward_raises_run_failed_quietly(capfd, tmp_path):
    path = tiny_workload(tmp_path, "api-exit", forward="raise SystemExit")
    store = tmp_path / "r.db"
    with pytest.raises(trainscale.RunFailed, match=r"the workload called sys.exit\(\)") as info:
        trainscale.run(path, steps=5, store=store)
    assert "Traceback" not in capfd.readouterr().err
    assert info.value.traceback_file is not None and info.value.traceback_file.is_file()
    with RunStore(store) as opened:
        record = opened.get_run(info.value.run_id)
    assert record.status == "failed" and "sys.exit()" in record.error


def test_sys_exit_at_import_is_a_workload_error_before_anything_is_stored(tmp_path):
    path = tiny_workload(tmp_path, "api-exit-import")
    path.write_text("import sys\nsys.exit('bye')\n" + path.read_text())
    with pytest.raises(WorkloadError, match=r"the workload called sys.exit\('bye'\)"):
        trainscale.run(path, steps=5, store=tmp_path / "r.db")
    assert not (tmp_path / "r.db").exists()
