"""A worker completes the run in the store its launching process created the row in: a
store deleted in between is an error naming it, never a new empty store at the path (which
would hold no row, so that the run's result had nowhere to go)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WORKER = """
import sys
from tests.helpers.tiny import tiny_config
from trainscale.errors import StoreError
from trainscale.runner.worker import worker_main
try:
    worker_main(tiny_config(data="synthetic").flat(), "0" * 32, sys.argv[1], quiet=True)
except StoreError as error:
    print(error)
"""


def test_a_store_deleted_before_the_worker_opens_it_is_not_made_again(tmp_path: Path):
    store = tmp_path / "runs.db"  # the parent made it and its row; it is gone since
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(store)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"results store {store} was deleted after the run was created in it; the run did not start"
    ), done.stdout + done.stderr
    assert not store.exists()
