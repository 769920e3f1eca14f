"""`emulation.run.run_emulation`: an emulation as a library call on tiny real files."""

from __future__ import annotations

import pytest

from trainscale.config.options import RunOptions
from trainscale.emulation.options import EmulationOptions
from trainscale.emulation.run import EmulationListener, EmulationResult, run_emulation
from trainscale.errors import ConfigError
from trainscale.results.store import RunStore

from tests.helpers.mnist_files import write_random_mnist


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)


class Heard(EmulationListener):
    def __init__(self) -> None:
        self.started_with: list[tuple[int, int, int]] = []

    def started(self, index, total, spec, config, plan) -> None:
        self.started_with.append((index, total, spec.workers))


def test_each_worker_count_is_a_stored_run_and_a_row(tmp_path):
    data = write_random_mnist(tmp_path / "mnist", 96, 20)
    options = RunOptions.of("mnist-cnn", data_dir=str(data), download=False, steps=2)
    heard = Heard()
    result = run_emulation(
        options,
        EmulationOptions(workers=(1, 2), mode="sync", per_worker_batch_size=8),
        store=str(tmp_path / "e.db"),
        listener=heard,
    )
    assert isinstance(result, EmulationResult)
    assert heard.started_with == [(1, 2, 1), (2, 2, 2)]
    assert [row["workers"] for row in result.rows] == [1, 2]
    assert [row["global_batch_size"] for row in result.rows] == [8, 16]
    with RunStore(tmp_path / "e.db") as store:
        stored = {r.run_id: r for r in store.list_runs(tag=result.tag)}
    assert set(stored) == {row["run_id"] for row in result.rows}
    assert result.report_command.endswith(
        f"--out emulate-{result.emulation_id} --store {tmp_path / 'e.db'}"
    )
    assert result.to_dict()["runs"] == result.rows
    lines = result.table_lines()
    assert lines[0].startswith(f"emulation {result.emulation_id}: mnist-cnn, mode sync")
    assert len(lines) == 2 + 2 + 1


def test_mistakes_are_refused_before_any_training(tmp_path):
    options = RunOptions.of("mnist-cnn", download=False)
    with pytest.raises(ConfigError, match="--local-steps"):
        run_emulation(
            options,
            EmulationOptions(workers=(2,), mode="sync", local_steps=4),
            store=str(tmp_path / "e.db"),
        )
    assert not (tmp_path / "e.db").exists()
