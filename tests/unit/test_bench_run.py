"""`bench.run_bench`: the bench as a library call, with stand-ins for the runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.benchmark import BenchListener, RungResult, Skipped, run_bench
from trainscale.benchmark.options import BenchOptions
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
        self.rounds: list = []

    def __call__(self, options, store_path=None, *args, repeat_index=None, **kwargs):
        from trainscale.runner.launch import RunFailed

        self.options.append(options)
        self.rounds.append(repeat_index)
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
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    heard = Heard()
    result = run_bench(
        "mnist-cnn", options=BenchOptions(quick=True), data="synthetic", out="t.md", listener=heard
    )
    assert result.steps == 30 and result.options.data.kind == "synthetic"
    assert {o.optimisation.global_batch_size for o in runs.options} == {64}
    assert all(o.tag == f"bench:{result.bench_id}" for o in runs.options)
    naive = "naive DDP: 4 unpinned workers, torch-default threads"
    # The naive rung fails in both rounds of --quick.
    assert result.rounds == 2
    assert [e for e in heard.events if e[0] == "failed"] == [
        ("failed", naive, "run run0001 failed: worker 1 crashed")
    ] * 2
    assert not any(e[0] in ("full", "note") for e in heard.events)  # quick, synthetic
    rows = {row["setting"]: row for row in result.rows}
    assert rows["4 pinned workers x 1 thread"]["speedup"] == "4.00x [4.00, 4.00]"
    assert rows["4 pinned workers x 1 thread"]["verdict"] == "faster than serial"
    assert rows["bf16 autocast"]["note"].startswith("skipped: this CPU has no native bf16")
    text = (tmp_path / "t.md").read_text()
    assert result.out == Path("t.md")
    assert f"`trainscale runs list --tag bench:{result.bench_id}`" in text
    assert "| 4 pinned workers x 1 thread | 4 x 1 | 400 |" in text
    # What each run trained: 30 steps over 2 rounds is 15 a run.
    assert "throughput rungs train 15 steps a run" in text and "in 2 round(s) (--steps 30" in text
    assert not result.all_failed


def test_auto_without_real_data_says_so_and_measures_synthetic(monkeypatch):
    runs = Runs()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    heard = Heard()
    result = run_bench(options=BenchOptions(quick=True), out=None, listener=heard)
    assert result.out is None and not Path("trainscale-bench.md").exists()
    assert heard.events[0][0] == "note"
    assert heard.events[0][1].startswith("REAL DATA NOT FOUND, measuring on SYNTHETIC data")
    assert result.data_note == heard.events[0][1]
    assert {o.data.kind for o in runs.options} == {"synthetic"}
    assert f"**{result.data_note}**" in result.markdown()


def test_data_found_but_damaged_is_said_so_not_called_missing(monkeypatch, tmp_path):
    runs = Runs()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    folder = write_random_mnist(tmp_path / "mnist", 64, 16)
    damaged = folder / "train-images-idx3-ubyte"
    damaged.write_bytes(damaged.read_bytes()[:1000])  # cut short
    monkeypatch.setenv("TRAINSCALE_DATA_DIR", str(folder))
    heard = Heard()
    run_bench(options=BenchOptions(quick=True), out=None, listener=heard)
    note = heard.events[0][1]
    assert note.startswith("REAL DATA UNREADABLE (") and "train-images-idx3-ubyte" in note
    assert "measuring on SYNTHETIC data" in note and "NOT FOUND" not in note


def test_real_data_adds_the_full_recipe_on_the_fastest_sound_setting(monkeypatch, tmp_path):
    runs = Runs()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    data = write_random_mnist(tmp_path / "mnist", 256, 64)
    heard = Heard()
    result = run_bench(data="real", data_dir=str(data), download=False, listener=heard)
    assert result.steps == 100
    assert result.rounds == 5 and result.steps_per_run == 20  # 100 steps over 5 rounds
    full = result.results[-1]
    assert isinstance(full, RungResult) and not isinstance(full.rung, Skipped)
    # The naive rung failed; of the others the 4 pinned workers are fastest.
    assert heard.events[-1] == ("full", "4 pinned workers x 1 thread")
    assert full.rung.options.measurement.evaluate and full.rung.options.optimisation.steps is None
    assert full.rung.options.data.data_dir == str(data)
    assert next(r for r in result.rows if r["setting"] == full.rung.name)["test acc"] == "0.9000"


def test_every_rung_failing_is_all_failed_and_exit_1(monkeypatch, capsys):
    from trainscale.runner.launch import RunFailed

    def fail(options, *args, **kwargs):
        raise RunFailed("r", "no")

    monkeypatch.setattr("trainscale.runner.launch.execute_run", fail)
    assert run_bench(options=BenchOptions(quick=True), data="synthetic").all_failed
    assert run_cli(["bench", "--data", "synthetic", "--quick"]) == 1
    assert "table written to trainscale-bench.md" in capsys.readouterr().err


def test_mistakes_are_refused_before_any_rung(monkeypatch):
    runs = Runs()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    with pytest.raises(ConfigError, match=r"--steps must be at least 2 \(a run's first step"):
        run_bench(options=BenchOptions(steps=0), data="synthetic")
    with pytest.raises(DataError):
        run_bench(data="real", download=False)
    assert not runs.options


def test_rungs_run_in_rotated_rounds_each_run_stored_with_its_round(monkeypatch):
    runs = Runs()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    heard = Heard()
    result = run_bench(
        options=BenchOptions(steps=12, rounds=4), data="synthetic", out=None, listener=heard
    )
    assert result.rounds == 4 and result.steps_per_run == 3
    assert {o.optimisation.steps for o in runs.options} == {3}
    names = ["serial", "threads", "pinned", "naive"]

    def name(options):
        if options.parallel.affinity == "none":
            return "naive"
        if options.parallel.workers > 1:
            return "pinned"
        return "threads" if options.parallel.threads_per_worker > 1 else "serial"

    ran = [name(o) for o in runs.options]
    assert ran == [
        *names,
        *names[1:], names[0],
        *names[2:], *names[:2],
        names[3], *names[:3],
    ]  # fmt: skip
    assert runs.rounds == [r for r in range(4) for _ in names]
    assert [e[1:] for e in heard.events if e[0] == "rung"] == [(i, 16) for i in range(1, 17)]
    rows = {row["setting"]: row for row in result.rows}
    assert rows["1 process, 4 threads"]["speedup"] == "1.00x [1.00, 1.00]"
    assert rows["1 process, 4 threads"]["verdict"] == "no difference measurable here"
    assert "4 round(s): with fewer than 5 rounds the interval is wide" in result.markdown()


def test_the_accuracy_run_takes_the_highest_median_throughput_over_rounds(monkeypatch, tmp_path):
    class Drifting(Runs):
        """Threads beat pinned workers in one round of three, pinned win the median."""

        def __call__(self, options, store_path=None, *args, repeat_index=None, **kwargs):
            out = super().__call__(options, store_path, repeat_index=repeat_index)
            if options.parallel.workers == 1 and options.parallel.threads_per_worker == 4:
                out["samples_per_s"] = 1000.0 if repeat_index == 0 else 300.0
            return out

    monkeypatch.setattr("trainscale.runner.launch.execute_run", Drifting())
    data = write_random_mnist(tmp_path / "mnist", 256, 64)
    heard = Heard()
    run_bench(
        options=BenchOptions(rounds=3),
        data="real",
        data_dir=str(data),
        download=False,
        listener=heard,
    )
    assert heard.events[-1] == ("full", "4 pinned workers x 1 thread")


def test_rounds_are_checked_before_any_rung(monkeypatch):
    runs = Runs()
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    with pytest.raises(ConfigError, match="--rounds must be a whole number >= 1, got 0"):
        run_bench(options=BenchOptions(rounds=0), data="synthetic")
    with pytest.raises(ConfigError, match="--rounds 40 is more than the 30 steps a rung trains"):
        run_bench(options=BenchOptions(quick=True, rounds=40), data="synthetic")
    # Each round's run needs a step untimed and one timed: 30 steps make 29 rounds at most.
    with pytest.raises(ConfigError, match="give at most --rounds 29, or more --steps"):
        run_bench(options=BenchOptions(quick=True, rounds=30), data="synthetic")
    with pytest.raises(ConfigError, match="--max-extra-rounds must be at most 9,998"):
        run_bench(options=BenchOptions(quick=True, max_extra_rounds=10**8), data="synthetic")
    assert not runs.options


def test_a_few_steps_make_fewer_rounds_of_two_steps_or_more():
    from trainscale.benchmark.run import bench_rounds, bench_warmup_steps, steps_per_run

    for steps in (2, 3, 5, 9, 10, 100):
        rounds = bench_rounds(None, False, steps)
        run_steps = steps_per_run(steps, rounds)
        assert run_steps >= 2 and bench_warmup_steps(run_steps) >= 1  # the first step untimed
    assert bench_rounds(None, False, 5) == 4 and bench_rounds(None, False, 100) == 5


def test_rungs_name_their_precision_and_a_faster_bf16_trains_the_accuracy_run(
    monkeypatch, tmp_path
):
    # Where bf16 is native and fastest, the accuracy run trains in it; every throughput
    # rung names its precision, so the default (auto) never turns an fp32 rung into bf16.
    monkeypatch.setattr(
        "trainscale.hardware.facts.collect_environment",
        lambda *a, **k: {**FOUR_CORES, "bf16_native": True},
    )
    runs = Runs()

    def faster_in_bf16(options, *args, **kwargs):
        result = runs(options, *args, **kwargs)
        if options.optimisation.precision == "bf16":
            result["samples_per_s"] *= 2
        return result

    monkeypatch.setattr("trainscale.runner.launch.execute_run", faster_in_bf16)
    data = write_random_mnist(tmp_path / "mnist", 256, 64)
    heard = Heard()
    result = run_bench(data="real", data_dir=str(data), download=False, listener=heard)
    assert {o.optimisation.precision for o in runs.options} == {"fp32", "bf16"}
    assert heard.events[-1] == ("full", "4 pinned workers x 1 thread, bf16")
    full = result.results[-1]
    assert isinstance(full, RungResult) and not isinstance(full.rung, Skipped)
    assert full.rung.options.optimisation.precision == "bf16"
    assert full.rung.options.measurement.evaluate


BUSY = {"contention": {"verdict": "busy", "reason": "other processes used 0.90 cores"}}
QUIET = {"contention": {"verdict": "quiet", "reason": "other processes used 0.01 cores"}}


class Neighbours(Runs):
    """Runs on a machine some other work shares: the rounds in `busy` ran busy (every rung's
    run of those rounds), the others quiet; no rung fails."""

    def __init__(self, busy: set[int]) -> None:
        super().__init__()
        self.busy = busy

    def __call__(self, options, store_path=None, *args, repeat_index=None, **kwargs):
        options = (
            options.with_(affinity="compact") if options.parallel.affinity == "none" else options
        )
        out = super().__call__(options, store_path, repeat_index=repeat_index)
        return out | (BUSY if repeat_index in self.busy else QUIET)


class HeardBusy(Heard):
    def busy_round(self, result, busiest, again) -> None:
        self.events.append(("busy", again, result.busy_round_line(busiest, again)))


@pytest.fixture
def neighbour(monkeypatch):
    from trainscale.hardware.contention import OtherProcess

    found = [OtherProcess(pid=4242, name="stress", cpu_percent=97.0)]
    monkeypatch.setattr("trainscale.hardware.contention.busiest_processes", lambda: found)


def test_a_busy_round_is_measured_again_and_named_as_it_waits(monkeypatch, neighbour):
    runs = Neighbours(busy={0})
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    heard = HeardBusy()
    result = run_bench(options=BenchOptions(quick=True), data="synthetic", out=None, listener=heard)
    assert result.rounds == 2 and result.extra_rounds == 1 and result.max_extra_rounds == 2
    assert runs.rounds == [r for r in range(3) for _ in range(4)]  # round 3 (index 2) added
    ((_, again, line),) = [e for e in heard.events if e[0] == "busy"]
    assert again
    assert "stress (pid 4242) 97% CPU" in line
    assert "0 of 2 rounds quiet so far: measuring one more round (1 of at most 2 extra)" in line
    rows = {row["setting"]: row for row in result.rows}
    # The busy round is out of every pair: the two quiet rounds give a verdict.
    assert rows["4 pinned workers x 1 thread"]["verdict"] == "faster than serial"
    assert result.busy_lines[0].startswith("busy machine: 1 of 3 round(s) had a run")
    assert len(result.busy_lines) == 1  # nothing untrusted


def test_every_round_busy_stops_at_the_budget_and_shows_the_ratios_not_trusted(
    monkeypatch, neighbour
):
    runs = Neighbours(busy=set(range(10)))
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    heard = HeardBusy()
    result = run_bench(
        options=BenchOptions(quick=True, max_extra_rounds=1),
        data="synthetic",
        out="t.md",
        listener=heard,
    )
    assert result.extra_rounds == 1 and sorted(set(runs.rounds)) == [0, 1, 2]
    # Round 1 busy: 2 quiet rounds are out of reach at once, so one is added (the budget).
    assert [e[1] for e in heard.events if e[0] == "busy"] == [True, False, False]
    rows = {row["setting"]: row for row in result.rows}
    pinned = rows["4 pinned workers x 1 thread"]
    assert pinned["speedup"] == "4.00x [4.00, 4.00]"  # the ratio as measured
    assert pinned["verdict"] == "not trusted: busy machine"
    untrusted = result.busy_lines[1]
    assert untrusted.startswith("not trusted (a busy run in every round): 1 process, 4 threads")
    assert "Using the cores: stress (pid 4242) 97% CPU: stop it" in untrusted
    assert "--rounds 5" in untrusted
    assert f"**{untrusted}**" in (Path("t.md")).read_text()


def test_a_quiet_machine_measures_the_rounds_planned_and_says_nothing_of_busy(monkeypatch):
    runs = Neighbours(busy=set())
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)

    def never(*args, **kwargs):
        raise AssertionError("neighbours are looked for only after a busy round")

    monkeypatch.setattr("trainscale.hardware.contention.busiest_processes", never)
    result = run_bench(options=BenchOptions(quick=True), data="synthetic", out=None)
    assert result.extra_rounds == 0 and sorted(set(runs.rounds)) == [0, 1]
    assert result.busy_lines == [] and "busy" not in result.markdown()


def test_max_extra_rounds_zero_never_adds_a_round_and_a_negative_one_is_refused(
    monkeypatch, neighbour
):
    runs = Neighbours(busy={0, 1})
    monkeypatch.setattr("trainscale.runner.launch.execute_run", runs)
    with pytest.raises(ConfigError, match="--max-extra-rounds must be a whole number >= 0"):
        run_bench(options=BenchOptions(quick=True, max_extra_rounds=-1), data="synthetic")
    assert not runs.options
    result = run_bench(
        options=BenchOptions(quick=True, max_extra_rounds=0), data="synthetic", out=None
    )
    assert result.extra_rounds == 0 and sorted(set(runs.rounds)) == [0, 1]


def test_the_cli_prints_the_busy_lines_under_the_table_and_exits_0(monkeypatch, neighbour, capsys):
    monkeypatch.setattr("trainscale.runner.launch.execute_run", Neighbours(busy={0, 1, 2}))
    code = run_cli(["bench", "--data", "synthetic", "--quick", "--max-extra-rounds", "1"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "not trusted (a busy run in every round)" in " ".join(out.split())
    assert "measuring one more round (1 of at most 1 extra)" in " ".join(err.split())


def test_the_api_bench_carries_the_busy_lines(monkeypatch, neighbour, tmp_path):
    import trainscale

    monkeypatch.setattr("trainscale.runner.launch.execute_run", Neighbours(busy={0, 1, 2}))
    # The stand-in runs are not stored: no per-configuration figures to read back.
    monkeypatch.setattr("trainscale.benchmark.document.bench_configurations", lambda *a: [])
    found = trainscale.bench(
        data="synthetic", quick=True, max_extra_rounds=1, out=None, store=tmp_path / "s.db"
    )
    assert found.extra_rounds == 1
    assert found.busy[1].startswith("not trusted (a busy run in every round)")
    assert {row["verdict"] for row in found.table} >= {"not trusted: busy machine"}


def test_a_stopped_bench_says_where_the_runs_it_finished_are(monkeypatch, tmp_path, capsys):
    runs = Runs()

    def stopped_in_the_second_run(options, *args, **kwargs):
        if len(runs.options) == 1:
            raise KeyboardInterrupt  # Ctrl-C (SIGTERM unwinds alike)
        return runs(options, *args, **kwargs)

    monkeypatch.setattr("trainscale.runner.launch.execute_run", stopped_in_the_second_run)
    store = tmp_path / "b.db"
    status = run_cli(["bench", "--data", "synthetic", "--quick", "--store", str(store)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert status == 130
    assert err.startswith("trainscale: bench ") and "interrupted (SIGINT)" in err
    assert "the runs it finished are stored: trainscale runs list --tag bench:" in err
