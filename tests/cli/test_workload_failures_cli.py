"""A custom workload whose code misbehaves: it calls sys.exit, its loss diverges, it prints,
it raises. Each is one line on the terminal and a run stored failed with why (or, when the
file cannot even be loaded, one line and nothing stored); `--json` stdout stays JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli
from tests.helpers.custom_workloads import fresh_custom_workloads, tiny_workload

pytestmark = pytest.mark.usefixtures("fresh_custom_workloads")
__all__ = ["fresh_custom_workloads"]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))


def _line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def _only_run(store_path: Path):
    with RunStore(store_path) as store:
        (record,) = store.list_runs()
    return record


def test_sys_exit_in_forward_fails_the_run_in_one_line(capfd, store_path, tmp_path):
    path = tiny_workload(tmp_path, "exit-fwd", forward="import sys; sys.exit(0)")
    code = run_cli(["run", str(path), "--steps", "5", "--quiet", "--store", str(store_path)])
    err = capfd.readouterr().err
    assert code == 1, err
    line = _line_of(path, "        import sys; sys.exit(0)")
    reason = (
        "workload exit_fwd_workload.py:make_workload: SystemExit: the workload called "
        f"sys.exit(0) (exit_fwd_workload.py line {line}, in forward)"
    )
    assert reason in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    record = _only_run(store_path)
    assert record.status == "failed" and reason in record.error


@pytest.mark.parametrize("where", ["import", "factory", "builtins:exit"])
def test_sys_exit_while_loading_is_one_error_line_and_nothing_stored(
    capfd, store_path, tmp_path, where
):
    reference = where
    if where != "builtins:exit":
        path = tiny_workload(tmp_path, "exit-load")
        text = path.read_text()
        if where == "import":
            text = "import sys\nsys.exit(0)\n" + text
        else:
            text = text.replace("def make_workload():\n", "def make_workload():\n    exit(3)\n")
        path.write_text(text)
        reference = str(path)
    code = run_cli(["run", reference, "--steps", "5", "--store", str(store_path)])
    err = capfd.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    expected = {
        "import": "exit_load_workload.py failed to import: SystemExit: the workload called "
        "sys.exit(0) (exit_load_workload.py line 2, in <module>)",
        "factory": "exit_load_workload.py:make_workload raised SystemExit: the workload "
        "called sys.exit(3) (exit_load_workload.py line 18, in make_workload)",
        "builtins:exit": "builtins:exit raised SystemExit: the workload called sys.exit()",
    }[where]
    assert err == f"trainscale: error: {expected}"
    assert not store_path.exists()


def test_a_nan_loss_fails_the_run_as_diverged(capfd, store_path, tmp_path):
    path = tiny_workload(tmp_path, "nan-loss", forward="return self.fc(x) * float('nan')")
    code = run_cli(["run", str(path), "--steps", "5", "--quiet", "--store", str(store_path)])
    err = capfd.readouterr().err
    assert code == 1, err
    reason = "diverged: non-finite loss at step 1 of 5"
    assert f"failed: {reason}" in err and "Traceback" not in err
    record = _only_run(store_path)
    assert record.status == "failed" and record.error.startswith(reason)


def test_what_a_workload_prints_leaves_json_stdout_one_document(capfd, store_path, tmp_path):
    path = tiny_workload(
        tmp_path, "chatty", forward="print('hello from forward'); return self.fc(x)"
    )
    path.write_text("print('hello from import')\n" + path.read_text())
    code = run_cli(["run", str(path), "--steps", "3", "--json", "--store", str(store_path)])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert json.loads(out)["status"] == "completed"
    assert "hello from forward" in err and "hello from import" in err


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_in_forward_is_one_line_with_the_traceback_saved(
    capfd, store_path, tmp_path, workers
):
    path = tiny_workload(tmp_path, "raising", forward="return self.fc(x[:, :3])")
    args = ["--steps", "5", "--workers", str(workers), "--quiet", "--store", str(store_path)]
    code = run_cli(["run", str(path), *args])
    err = capfd.readouterr().err.strip()
    assert code == 1, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in err
    saved = Path(err.rpartition("(full traceback: ")[2].rstrip(")"))
    assert saved.parent == tmp_path / "cache" / "failures"
    text = saved.read_text()
    assert text.startswith("Traceback") and "in forward" in text
    record = _only_run(store_path)
    assert "full traceback" not in record.error  # the stored reason stays the reason


def test_what_a_workload_prints_leaves_emulate_json_stdout_one_document(
    capfd, store_path, tmp_path
):
    # emulate trains in the command's own process: a print() there went to stdout.
    path = tiny_workload(
        tmp_path, "chatty-emulated", forward="print('hello from forward'); return self.fc(x)"
    )
    args = ["--workers", "1", "--mode", "sync", "--steps", "3", "--json"]
    code = run_cli(["emulate", str(path), *args, "--store", str(store_path)])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert json.loads(out)
    assert "hello from forward" in err and "hello from forward" not in out
