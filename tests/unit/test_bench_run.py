"""`bench.run_bench`: the bench as a library call, with stand-ins for the runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.bench import BenchListener, RungResult, Skipped, run_bench
from trainscale.errors import ConfigError, DataError

from tests.helpers.cli import run_cli
from tests.helpers.mnist_files import write_random_mnist

FOUR_CORES = {
    "cpu_model": "Test CPU",
    "usable_cores": [0, 1, 2, 3],
    "bf16_native": False,
    "gpus": [],
    "torch_version": "2.x",
}


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("trainscale.hardware.facts.collect_environment", lambda *a, **k: FOUR_CORES)

    def offline(url: str, *args: object, **kwargs: object) -> Path:
        raise DataError(f"could not download {url} (offline in this test)")

    monkeypatch.setattr("trainscale.data.cache.download", offline)


class Runs:
    """Stands in for execute_run: every rung's options; the naive rung fails."""

    def __init__(self) -> None:
        self.options: list = []

    def __call__(self, options, store_path=None, *args, **kwargs):
        from trainscale.run.launch import RunFailed

        self.options.append(options)
        workers = options.parallel.workers
        if options.parallel.affinity == "none":
            raise RunFailed("run0001", "worker 1 crashed")
        return {
            "run_id": f"run{len(self.options):04d}",
            "samples_per_s": 100.0 * workers,
            "threads_per_worker": options.parallel.threads_per_worker,
            "world_size": workers,
            "step_time_s_median": 0.1 / workers,
            "step_time_s_iqr": 0.001,
            "test_accuracy": 0.9 if options.measurement.evaluate else None,
            "time_to_target_s": 12.0 if options.measurement.evaluate else None,
        }


class Heard(BenchListener):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def data_note(self, note: str) -> None:
        self.events.append(("note", note))

    def rung_started(self, index, total, rung) -> None:
        self.events.append(("rung", index, total))

    def rung_failed(self, rung, error) -> None:
        self.events.append(("failed", rung.name, error))

    def full_recipe_started(self, fastest) -> None:
        self.events.append(("full", fastest.name))


def test_synthetic_bench_measures_the_ladder_and_writes_the_table(monkeypatch, tmp_path):
    runs = Runs()
    monkeypatch.setattr("trainscale.run.launch.execute_run", runs)
    heard = Heard()
    result = run_bench("mnist-cnn", data="synthetic", quick=True, out="t.md", listener=heard)
    assert result.steps == 30 and result.options.data.kind == "synthetic"
    assert {o.optimisation.global_batch_size for o in runs.options} == {64}
    assert all(o.tag == f"bench:{result.bench_id}" for o in runs.options)
    naive = "naive DDP: 4 unpinned workers, torch-default threads"
    assert [e for e in heard.events if e[0] == "failed"] == [
        ("failed", naive, "run run0001 failed: worker 1 crashed")
    ]
    assert not any(e[0] in ("full", "note") for e in heard.events)  # quick, synthetic
    rows = {row["setting"]: row for row in result.rows}
    assert rows["4 pinned workers x 1 thread"]["speedup"] == "4.00x"
    assert rows["bf16 autocast"]["note"].startswith("skipped: this CPU has no native bf16")
    text = (tmp_path / "t.md").read_text()
    assert result.out == Path("t.md")
    assert f"`trainscale runs list --tag bench:{result.bench_id}`" in text
    assert "| 4 pinned workers x 1 thread | 4 x 1 | 400 |" in text
    assert not result.all_failed


def test_auto_without_real_data_says_so_and_measures_synthetic(monkeypatch):
    runs = Runs()
    monkeypatch.setattr("trainscale.run.launch.execute_run", runs)
    heard = Heard()
    result = run_bench(quick=True, out=None, listener=heard)
    assert result.out is None and not Path("trainscale-bench.md").exists()
    assert heard.events[0][0] == "note"
    assert heard.events[0][1].startswith("REAL DATA NOT FOUND, measuring on SYNTHETIC data")
    assert result.data_note == heard.events[0][1]
    assert {o.data.kind for o in runs.options} == {"synthetic"}
    assert f"**{result.data_note}**" in result.markdown()


def test_real_data_adds_the_full_recipe_on_the_fastest_sound_setting(monkeypatch, tmp_path):
    runs = Runs()
    monkeypatch.setattr("trainscale.run.launch.execute_run", runs)
    data = write_random_mnist(tmp_path / "mnist", 256, 64)
    heard = Heard()
    result = run_bench(data="real", data_dir=str(data), download=False, listener=heard)
    assert result.steps == 100
    full = result.results[-1]
    assert isinstance(full, RungResult) and not isinstance(full.rung, Skipped)
    # The naive rung failed; of the others the 4 pinned workers are fastest.
    assert heard.events[-1] == ("full", "4 pinned workers x 1 thread")
    assert full.rung.options.measurement.evaluate and full.rung.options.optimisation.steps is None
    assert full.rung.options.data.data_dir == str(data)
    assert next(r for r in result.rows if r["setting"] == full.rung.name)["test acc"] == "0.9000"


def test_every_rung_failing_is_all_failed_and_exit_1(monkeypatch, capsys):
    from trainscale.run.launch import RunFailed

    def fail(options, *args, **kwargs):
        raise RunFailed("r", "no")

    monkeypatch.setattr("trainscale.run.launch.execute_run", fail)
    assert run_bench(data="synthetic", quick=True).all_failed
    assert run_cli(["bench", "--data", "synthetic", "--quick"]) == 1
    assert "table written to trainscale-bench.md" in capsys.readouterr().err


def test_mistakes_are_refused_before_any_rung(monkeypatch):
    runs = Runs()
    monkeypatch.setattr("trainscale.run.launch.execute_run", runs)
    with pytest.raises(ConfigError, match="--steps must be a whole number >= 1, got 0"):
        run_bench(data="synthetic", steps=0)
    with pytest.raises(DataError):
        run_bench(data="real", download=False)
    assert not runs.options
