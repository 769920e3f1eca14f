"""`trainscale compare` on a fixture store: runs, sweeps, unlike runs and bad ids."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trainscale.cli import main
from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.stored_runs import add_run as add_stored_run
from tests.helpers.trainer_output import machine_figures, trainer_summary

WARMUP = 3


def add_run(
    store: RunStore,
    run_id: str,
    median_s: float,
    *,
    seed: int,
    workload: str = "mnist-cnn",
    global_batch: int = 64,
    status: str = "completed",
    sweep: tuple[str, int, str, int] | None = None,
    num_steps: int = 60,
    framework: str | None = None,
    settings: dict | None = None,
) -> None:
    """A stored run whose timed steps scatter around `median_s`; warm-up steps are slow.
    `framework` stores it as a run of that framework (release 1.0); None: a run stored
    before frameworks (PyTorch)."""
    config: dict = {"workload": workload, **(settings or {})}
    env: dict = {"hostname": "fixture", "cpu_model": "fixture cpu"}
    if framework is not None:
        config["framework"] = framework
        env["framework"] = {"name": framework, "version": "1.0"}
    store.create_run(
        run_id,
        workload,
        config,
        env,
        data_kind="synthetic",
        world_size=1,
        threads_per_worker=1,
        affinity="compact",
        precision="fp32",
        global_batch_size=global_batch,
        config_hash=sweep[2] if sweep else None,
        sweep_id=sweep[0] if sweep else None,
        sweep_item=sweep[1] if sweep else None,
        repeat_index=sweep[3] if sweep else None,
    )
    if status == "failed":
        store.fail_run(run_id, "worker 1 crashed")
        return
    if status == "running":
        return
    rng = np.random.default_rng(seed)
    timed = list(median_s * np.exp(rng.normal(0, 0.05, size=num_steps)))
    # Warm-up steps ten times slower: they must not reach the comparison.
    steps = [median_s * 10] * WARMUP + timed
    # The keys a real run stores (trainer_output), with this run's own figures.
    # A run's throughput is its global batch over its median timed step, as a run stores it.
    rate = global_batch / float(np.median(timed))
    summary = trainer_summary(
        {
            "samples_per_s": rate,
            "samples_per_s_per_worker": rate,
            "step_time_s_median": float(np.median(timed)),
            "step_time_s_p90": float(np.percentile(timed, 90)),
            "step_time_s_iqr": float(np.subtract(*np.percentile(timed, [75, 25]))),
            "num_steps": len(steps),
            "num_timed_steps": num_steps,
            "warmup_steps_excluded": WARMUP,
            "num_samples": len(steps) * global_batch,
            "train_time_s": float(sum(steps)),
            "supervised_time_s": float(sum(steps)),
            "workers": [{"rank": 0, "hostname": "fixture"}],
            "flops_per_sample": None,
            **machine_figures(
                cpu_model="fixture cpu",
                workers=[{"rank": 0, "hostname": "fixture"}],
                samples_per_s=rate,
                flops_per_sample=None,
                interval_s=float(sum(steps)),
            ),
        }
    )
    store.complete_run(run_id, summary, [], steps)


@pytest.fixture
def fixture_store(tmp_path):
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        add_run(store, "aaaa0001", 0.050, seed=1)
        add_run(store, "aaaa0002", 0.050, seed=2)
        add_run(store, "bbbb0001", 0.060, seed=3)  # 20% slower
        add_run(store, "cccc0001", 0.050, seed=4, workload="mnist-dbn", global_batch=128)
        add_run(store, "dddd0001", 0.050, seed=5, status="failed")
        add_run(store, "jjjj0001", 0.100, seed=7, framework="jax")
        add_run(store, "eeee0001", 0.050, seed=6, status="running")
        store.create_run(
            "ffff0001",
            "mnist-cnn",
            {},
            {},
            data_kind="synthetic",
            world_size=1,
            threads_per_worker=1,
            affinity="compact",
            precision="fp32",
            global_batch_size=64,
        )
        store.complete_run("ffff0001", {"warmup_steps_excluded": 5}, [], [0.1] * 5)
        # Two sweeps, two configurations each, two repeats: B's 'w2' is 20% faster.
        for sweep_id in ("5weep0aa", "5weep0bb"):
            plan = []
            for item, (label, chash) in enumerate((("w1", "h1"), ("w2", "h2"))):
                plan += [
                    {"item": item, "label": label, "config_hash": chash, "repeat": r}
                    for r in range(2)
                ]
            store.create_sweep(sweep_id, sweep_id, "test", sweep_id, {}, plan)
        seed = 10
        for sweep_id, w2_median in (("5weep0aa", 0.05), ("5weep0bb", 0.04)):
            for label, chash, median in (("w1", "h1", 0.05), ("w2", "h2", w2_median)):
                for repeat in range(2):
                    seed += 1
                    add_run(
                        store,
                        f"{sweep_id}-{label}-{repeat}",
                        median * (1 + 0.01 * repeat),
                        seed=seed,
                        sweep=(sweep_id, 0, chash, repeat),
                    )
        # A single-configuration sweep with one failed repeat.
        store.create_sweep(
            "0ne0cfg0", "one", "test", "x", {}, [{"label": "base", "config_hash": "h9"}]
        )
        add_run(store, "0ne0cfg0-r0", 0.05, seed=30, sweep=("0ne0cfg0", 0, "h9", 0))
        add_run(store, "0ne0cfg0-r1", 0.05, seed=31, sweep=("0ne0cfg0", 0, "h9", 1))
        add_run(
            store, "0ne0cfg0-r2", 0.05, seed=32, sweep=("0ne0cfg0", 0, "h9", 2), status="failed"
        )
    return path


def compare_json(capsys, store, *args) -> dict:
    code = main(["compare", *args, "--store", str(store), "--json", "--resamples", "500"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_two_runs_twenty_percent_apart(fixture_store, capsys):
    data = compare_json(capsys, fixture_store, "aaaa0001", "bbbb0001")
    (row,) = data["comparisons"]
    assert data["a"]["kind"] == "run" and data["a"]["id"] == "aaaa0001"
    assert row["step_time_ratio"] == pytest.approx(1.2, rel=0.03)
    assert row["throughput_ratio"] == pytest.approx(1 / 1.2, rel=0.03)
    assert row["significant"] is True
    # The warm-up steps (10x slower) were left out.
    assert row["a"]["num_steps"] == 60
    assert row["a"]["median_step_s"] == pytest.approx(0.05, rel=0.03)
    assert any("one run on a side" in w for w in row["warnings"])


def test_close_runs_are_not_significant(fixture_store, capsys):
    (row,) = compare_json(capsys, fixture_store, "aaaa0001", "aaaa0002")["comparisons"]
    assert row["significant"] is False
    low, high = row["throughput_ratio_ci"]
    assert low <= 1.0 <= high


def test_table_output_and_unlike_runs_flagged(fixture_store, capsys):
    code = main(["compare", "aaaa0001", "cccc0001", "--store", str(fixture_store)])
    assert code == 0
    out = capsys.readouterr().out
    assert "throughput B/A" in out and "significant" in out
    assert "different workloads" in out
    assert "different global batch" in out


def test_runs_of_two_frameworks_are_compared_and_the_frameworks_named(fixture_store, capsys):
    (row,) = compare_json(capsys, fixture_store, "aaaa0001", "jjjj0001")["comparisons"]
    assert row["step_time_ratio"] == pytest.approx(2.0, rel=0.05)
    assert "different frameworks (pytorch vs jax 1.0)" in row["warnings"]
    (same,) = compare_json(capsys, fixture_store, "aaaa0001", "bbbb0001")["comparisons"]
    assert not any("framework" in w for w in same["warnings"])


def test_multi_configuration_sweeps_match_by_label(fixture_store, capsys):
    data = compare_json(capsys, fixture_store, "5weep0aa", "5weep0bb")
    rows = {row["label"]: row for row in data["comparisons"]}
    assert set(rows) == {"w1", "w2"}
    assert rows["w1"]["hierarchical"] and rows["w1"]["a"]["num_runs"] == 2
    assert rows["w2"]["step_time_ratio"] == pytest.approx(0.8, rel=0.04)
    assert rows["w2"]["throughput_ratio"] > 1.0


def test_config_picks_one_configuration(fixture_store, capsys):
    data = compare_json(capsys, fixture_store, "5weep0aa", "aaaa0001", "--config", "w2")
    (row,) = data["comparisons"]
    assert row["label"] == "w2" and row["a"]["num_runs"] == 2 and row["b"]["num_runs"] == 1


def test_config_labels_a_run_that_is_not_that_configuration_by_how_they_differ(
    fixture_store, capsys
):
    with RunStore(fixture_store) as store:
        add_run(store, "tttt0001", 0.05, seed=40, settings={"threads_per_worker": 4})
    data = compare_json(capsys, fixture_store, "5weep0aa", "tttt0001", "--config", "w2")
    (row,) = data["comparisons"]
    assert row["label"] != "w2" and "threads_per_worker=4" in row["label"]


def test_single_configuration_sweep_uses_its_completed_runs(fixture_store, capsys):
    data = compare_json(capsys, fixture_store, "0ne0", "aaaa0001")
    (row,) = data["comparisons"]
    assert row["a"]["num_runs"] == 2
    assert data["a"]["skipped_runs"] == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nosuch", "aaaa0001"], "no run or sweep 'nosuch'"),
        (["aaaa", "bbbb0001"], "matches 2 runs"),
        (["dddd0001", "aaaa0001"], "failed (worker 1 crashed)"),
        (["aaaa0001", "eeee0001"], "still running"),
        (["ffff0001", "aaaa0001"], "no timed steps"),
        (["5weep0aa", "aaaa0001"], "--config"),
        (["5weep0aa", "5weep0bb", "--config", "w9"], "no completed configuration 'w9'"),
        (
            ["aaaa0001", "bbbb0001", "--config", "bogus"],
            "--config 'bogus' does not apply: run aaaa0001 and run bbbb0001 have one "
            "configuration each; --config takes the label of one configuration of a sweep "
            "side that has several",
        ),
        (["0ne0cfg0", "aaaa0001", "--config", "base"], "does not apply: sweep 0ne0cfg0 and"),
        (["aaaa0001", "bbbb0001", "--confidence", "1.5"], "--confidence"),
        (["aaaa0001", "bbbb0001", "--resamples", str(10**12)], "--resamples must be at most"),
        (
            ["5weep0aa:w9", "aaaa0001"],
            "sweep 5weep0aa has no configuration 'w9'; its configurations: 'w1', 'w2'",
        ),
        (["5weep0aa:W1", "aaaa0001"], "no configuration 'W1'"),  # labels match exactly
        (["nosuch:w1", "aaaa0001"], "no sweep 'nosuch' (id, id prefix or name)"),
        (["5weep0:w1", "aaaa0001"], "matches several sweeps"),
        (["5weep0aa:w1", "5weep0aa:w2", "--config", "w1"], "does not apply"),
        (["aaaa0001", "aaaa0001"], "A and B are the same run(s) (aaaa0001): a comparison"),
        (["5weep0aa", "5weep0a"], "A and B are the same run(s) ("),  # a sweep and itself
    ],
)
def test_mistakes_cost_one_line(fixture_store, capsys, args, fragment):
    code = run_cli(["compare", *args, "--store", str(fixture_store)])
    assert code == 2
    assert fragment in one_error_line(capsys)


def test_missing_store_is_one_line(tmp_path, capsys):
    code = run_cli(["compare", "a", "b", "--store", str(tmp_path / "none.db")])
    assert code == 2
    assert "no results store" in one_error_line(capsys)


def _report_rows(store, sweep_id: str, out) -> dict[str, dict[str, str]]:
    import csv

    argv = ["report", "--sweep", sweep_id, "--out", str(out), "--store", str(store)]
    assert run_cli(argv) == 0
    with (out / "report.csv").open(newline="") as handle:
        return {row["configuration"]: row for row in csv.DictReader(handle)}


def test_two_configurations_of_one_sweep_give_the_report_s_figures(fixture_store, capsys, tmp_path):
    """SWEEP:LABEL takes a configuration's repeats; with two of them on each side (an even
    count, where a median is a mean of two) the throughput ratio and each side's step time
    are still exactly the report's."""
    rows = _report_rows(fixture_store, "5weep0bb", tmp_path / "report")
    capsys.readouterr()
    data = compare_json(capsys, fixture_store, "5weep0bb:w1", "5weep0bb:w2")
    (row,) = data["comparisons"]
    assert row["a_runs"] == ["5weep0bb-w1-0", "5weep0bb-w1-1"]
    assert row["a"]["num_runs"] == row["b"]["num_runs"] == 2 and row["hierarchical"]
    report_ratio = float(rows["w2"]["samples_per_s_median"]) / float(
        rows["w1"]["samples_per_s_median"]
    )
    assert row["throughput_ratio"] == pytest.approx(report_ratio, rel=1e-12)
    assert row["throughput_ratio"] == pytest.approx(0.05 / 0.04, rel=0.05)  # w2: 40 ms, w1: 50
    for side, label in (("a", "w1"), ("b", "w2")):
        assert row[side]["median_step_s"] * 1000 == pytest.approx(
            float(rows[label]["step_time_ms_median"]), rel=1e-12
        )
        assert row[side]["samples_per_s"] == pytest.approx(
            float(rows[label]["samples_per_s_median"]), rel=1e-12
        )
    low, high = row["throughput_ratio_ci"]
    assert low < row["throughput_ratio"] < high
    assert data["a"] == {
        "kind": "sweep", "id": "5weep0bb", "configuration": "w1", "skipped_runs": 0
    }  # fmt: skip


def test_a_sweep_is_found_by_its_name_and_a_configuration_against_a_run(fixture_store, capsys):
    data = compare_json(capsys, fixture_store, "one:base", "aaaa0001")
    (row,) = data["comparisons"]
    assert row["a_runs"] == ["0ne0cfg0-r0", "0ne0cfg0-r1"]  # the failed repeat left out
    assert data["a"]["skipped_runs"] == 1


def test_sides_sharing_runs_are_warned_of(fixture_store, capsys):
    data = compare_json(capsys, fixture_store, "one:base", "0ne0cfg0-r0")
    (row,) = data["comparisons"]
    assert "A and B share 1 run(s): the ratio is pulled towards 1" in " ".join(row["warnings"])


def test_two_runs_are_labelled_by_the_settings_that_set_them_apart(fixture_store, capsys):
    (same,) = compare_json(capsys, fixture_store, "aaaa0001", "aaaa0002")["comparisons"]
    assert same["label"] == ""  # the same settings: nothing to name
    (unlike,) = compare_json(capsys, fixture_store, "aaaa0001", "cccc0001")["comparisons"]
    assert unlike["label"] == "A workload=mnist-cnn; B workload=mnist-dbn"


def _add_text_run(store: RunStore, run_id: str, long_s: float, seed: int) -> float:
    """A stored run of a text workload, whose steps do unequal work by design: short,
    medium and long batches; rated over its mean step, as such a run stores itself. Returns
    its stored samples/s."""
    rng = np.random.default_rng(seed)
    timed = [s * float(np.exp(rng.normal(0, 0.02))) for s in [0.1, 0.1, 0.2, long_s] * 15]
    steps = [1.0] * WARMUP + timed
    rate = 64 / float(np.mean(timed))
    machine = {"hostname": "fixture", "cpu_model": "fixture cpu"}
    add_stored_run(store, run_id, workload="imdb-bilstm", env=machine)
    summary = trainer_summary(
        {
            "samples_per_s": rate,
            "samples_per_s_mean": rate,
            "step_time_s_median": float(np.median(timed)),
            "step_time_s_mean": float(np.mean(timed)),
            "unequal_steps": True,
            "num_timed_steps": len(timed),
            "warmup_steps_excluded": WARMUP,
        }
    )
    store.complete_run(run_id, summary, [], steps)
    return rate


def test_text_runs_compare_as_reports_rate_them_over_the_mean_step(tmp_path, capsys):
    """The long batches differ, the median (a short batch) hardly: compare's throughput
    ratio is the ratio of the stored (and reported) throughputs, not of the medians."""
    path = tmp_path / "text.db"
    with RunStore(path) as store:
        rate_a = _add_text_run(store, "text000a", 0.8, seed=1)
        rate_b = _add_text_run(store, "text000b", 0.4, seed=2)
    (row,) = compare_json(capsys, path, "text000a", "text000b")["comparisons"]
    assert rate_b / rate_a == pytest.approx(1.57, rel=0.05)
    assert row["throughput_ratio"] == pytest.approx(rate_b / rate_a, rel=1e-9)
    low, high = row["throughput_ratio_ci"]
    assert 1.0 < low <= row["throughput_ratio"] <= high and row["significant"] is True
    assert row["step_time_ratio"] == pytest.approx(1.0, abs=0.1)  # the medians: short batches
    assert row["a"]["unequal_steps"] is True
    assert "A and B: texts of unequal length: throughput is over the mean step" in " ".join(
        row["warnings"]
    )
