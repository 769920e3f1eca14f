"""`trainscale simulate` and `trainscale predict-time-to-accuracy` on fixture stores."""

from __future__ import annotations

import json

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.simulate import add_emulation, add_measured_run, run_id

BREAKDOWN = {"data": 0.001, "forward": 0.03, "backward": 0.06, "optimizer": 0.009}

CLUSTER = """
name = "two-cores"
source = "a test"
nodes = 1
devices_per_node = 2

[device]
kind = "cpu"
name = "Test CPU 9000"
match = ["sim-host"]
cores = 1

[intra_node]
alpha = "50 us"
bandwidth = "1 GB/s"

[communication]
overlap = 0.0
"""


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "sim.db"
    with RunStore(path) as store:
        add_measured_run(store, run_id(1), batch_size=64, step_s=0.1, breakdown=BREAKDOWN)
        add_measured_run(
            store, run_id(2), batch_size=64, step_s=0.104, breakdown=BREAKDOWN, repeat=1
        )
        add_measured_run(store, run_id(3), workers=2, batch_size=32, step_s=0.055)
        add_measured_run(store, run_id(4), workers=2, threads=None, pinned=False, step_s=0.3)
        add_measured_run(store, run_id(5), workload="tweets-text", step_s=0.05)
        for n, workers in enumerate((1, 2, 4, 8)):
            add_emulation(
                store,
                run_id(10 + n),
                workers=workers,
                per_worker_batch=64,
                steps_to_target=[2000, 1100, 700, 650][n],
            )
    return path


@pytest.fixture
def cluster_file(tmp_path):
    path = tmp_path / "two-cores.toml"
    path.write_text(CLUSTER)
    return path


def test_predict_from_stored_runs_as_json(store_path, cluster_file, capsys):
    code = run_cli(
        [
            "simulate",
            "mnist-cnn",
            "--cluster",
            str(cluster_file),
            "--workers",
            "1,2",
            "--store",
            str(store_path),
            "--samples",
            "501",
            "--json",
        ]
    )
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"]["source"] == "runs"
    assert set(out["calibration"]["run_ids"]) == {run_id(1), run_id(2)}
    one, two = out["predictions"]
    # the serial prediction is the calibrated serial step (median of the two runs' parts)
    assert one["step_time_s"] == pytest.approx(0.102, rel=0.03)
    assert two["workers"] == 2 and two["global_batch"] == 128
    assert two["comm_s"] > 0 and two["exposed_comm_s"] > 0
    assert 0 < two["exposed_comm_share"] < 1
    assert out["gradients"]["buckets"][0]["bytes"] > 0
    assert out["cluster"]["name"] == "two-cores"


def test_predict_on_a_preset_from_the_peak_with_plots(tmp_path, capsys):
    plots = tmp_path / "plots"
    code = run_cli(
        [
            "simulate",
            "mnist-cnn",
            "--cluster",
            "v100-nvlink-ib",
            "--workers",
            "1,4,16",
            "--global-batch-size",
            "512",
            "--store",
            str(tmp_path / "none.db"),
            "--plot",
            str(plots),
        ]
    )
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "v100-nvlink-ib" in out and "peak" in out
    names = sorted(p.name for p in plots.iterdir())
    assert names == [
        "breakdown-mnist-cnn-v100-nvlink-ib.png",
        "speedup-mnist-cnn-v100-nvlink-ib.png",
        "throughput-mnist-cnn-v100-nvlink-ib.png",
    ]
    assert all((plots / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in names)


def test_validate_reports_held_out_runs(store_path, tmp_path, capsys):
    plots = tmp_path / "v"
    code = run_cli(
        ["simulate", "--validate", "--store", str(store_path), "--json", "--plot", str(plots)]
    )
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    held_out = {row["run_id"]: row for row in out["rows"]}
    assert set(held_out) == {run_id(2), run_id(3), run_id(4)}
    assert held_out[run_id(4)]["modelled"] is False
    errors = sorted(abs(r["step_error"]) for r in out["rows"])
    assert out["median_abs_step_error"] == pytest.approx(errors[1])
    assert len(out["plots"]) == 2
    # and the table form
    assert run_cli(["simulate", "--validate", "--store", str(store_path)]) == 0
    text = capsys.readouterr().out
    assert "median |step-time error|" in text and "oversubscribed" in text


def test_validate_skips_runs_of_workloads_it_cannot_build_with_a_note(store_path, capsys):
    with RunStore(store_path) as store:
        source = "/home/someone/models.py:make_workload"
        custom = add_measured_run(store, run_id(20), workload="my-model", workload_source=source)
        add_measured_run(store, run_id(21), workload="my-model", workload_source=source, workers=2)
        gone = add_measured_run(store, run_id(22), workload="a-plugins-model")
        script = add_measured_run(
            store, run_id(23), workload="script:train.py", script="/home/someone/train.py"
        )

    code = run_cli(["simulate", "--validate", "--store", str(store_path), "--json"])

    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert {row["run_id"] for row in out["rows"]} == {run_id(2), run_id(3), run_id(4)}
    skipped = {s["run_id"]: s["reason"] for s in out["skipped"]}
    assert skipped[custom].startswith("custom workload my-model")
    assert run_id(21) in skipped
    assert "workload a-plugins-model is not known here" in skipped[gone]
    assert skipped[script].startswith("script run script:train.py")


def test_list_clusters(capsys):
    assert run_cli(["simulate", "--list-clusters", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = {p["name"] for p in out["presets"]}
    assert {"v100-nvlink-ib", "k80-pcie-ib", "cpu-25gbe"} <= names
    assert all(p["source"] for p in out["presets"])


def test_predict_time_to_accuracy(store_path, cluster_file, capsys, tmp_path):
    wide = tmp_path / "eight.toml"
    wide.write_text(CLUSTER.replace("devices_per_node = 2", "devices_per_node = 8"))
    code = run_cli(
        [
            "predict-time-to-accuracy",
            "mnist-cnn",
            "--cluster",
            str(wide),
            "--store",
            str(store_path),
            "--samples",
            "301",
            "--json",
        ]
    )
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    rows = {r["workers"]: r for r in out["rows"]}
    assert sorted(rows) == [1, 2, 4, 8]
    for row in rows.values():
        assert row["time_to_target_s"] == pytest.approx(row["steps_to_target"] * row["step_time_s"])
    assert out["best_by_mode"]["sync"]["fastest_workers"] in (4, 8)
    # a cluster too small for some settings says so on their rows, it does not fail
    assert (
        run_cli(
            [
                "predict-time-to-accuracy",
                "mnist-cnn",
                "--cluster",
                str(cluster_file),
                "--store",
                str(store_path),
                "--samples",
                "101",
            ]
        )
        == 0
    )
    assert "do not fit" in capsys.readouterr().out


# -- mistakes: one line, exit 2 ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("devices_per_node = 2\n", ""), "devices_per_node is missing"),
        (("devices_per_node = 2", "devices_per_node = -2"), "devices_per_node: must be a whole"),
        (('bandwidth = "1 GB/s"', 'bandwidth = "1 gigabyte"'), "intra_node.bandwidth: cannot"),
        (('alpha = "50 us"', 'alpha = "-50 us"'), "intra_node.alpha: a time must not be negative"),
        (("overlap = 0.0", "overlap = 2"), "communication.overlap: must be in [0, 1]"),
    ],
)
def test_bad_cluster_files(tmp_path, store_path, capsys, edit, message):
    path = tmp_path / "bad.toml"
    path.write_text(CLUSTER.replace(*edit))
    code = run_cli(["simulate", "mnist-cnn", "--cluster", str(path), "--store", str(store_path)])
    assert code == 2
    assert message in one_error_line(capsys)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "argument --workers: takes whole numbers >= 1"),
        (["--workers", "1,two"], "argument --workers: takes whole numbers >= 1"),
        (["--threads-per-worker", "0"], "--threads-per-worker must be at least 1, got 0"),
        (["--workers", "4"], "4 workers do not fit"),
        (["--calibrate-from", run_id(5)], "is of workload tweets-text, not mnist-cnn"),
        (["--calibrate-from", run_id(10)], "is an accuracy emulation"),
        (["--calibrate-from", "nosuchrun"], "no run 'nosuchrun'"),
        (["--global-batch-size", "63", "--workers", "1,2"], "not divisible by 2 workers"),
        (["--samples", "0"], "--samples must be at least 1"),
        (["--samples", str(10**12)], "--samples must be at most 100,000"),
        (["--seed", "-1"], "--seed must be at least 0, got -1"),
        # A cluster file states its device and cores: the local machine's options are refused.
        (["--device", "cpu"], "--device applies to --cluster local (this machine)"),
        (["--threads-per-worker", "4"], "--threads-per-worker applies to --cluster local"),
    ],
)
def test_bad_arguments(store_path, cluster_file, capsys, args, message):
    base = ["simulate", "mnist-cnn", "--cluster", str(cluster_file), "--store", str(store_path)]
    assert run_cli(base + args) == 2
    assert message in one_error_line(capsys)


def test_other_mistakes(store_path, tmp_path, capsys):
    assert run_cli(["simulate", "--store", str(store_path)]) == 2
    assert "give a WORKLOAD" in one_error_line(capsys)
    assert run_cli(["simulate", "no-such-workload", "--cluster", "cpu-25gbe"]) == 2
    assert "unknown workload" in one_error_line(capsys)
    assert run_cli(["simulate", "mnist-cnn", "--cluster", "nope"]) == 2
    assert "unknown cluster preset" in one_error_line(capsys)
    assert run_cli(["simulate", "--validate", "--store", str(tmp_path / "none.db")]) == 2
    assert "no results store" in one_error_line(capsys)
    assert run_cli(["predict-time-to-accuracy", "tweets-text", "--store", str(store_path)]) == 2
    line = one_error_line(capsys)
    assert "no completed emulation of tweets-text" in line
    assert line.endswith("e.g. `trainscale emulate tweets-text --workers 1,2,4,8 --mode sync`")
    validate = ["simulate", "--validate", "--store", str(store_path)]
    assert run_cli([*validate, "--workers", "1,2"]) == 2
    assert "--workers is for predictions" in one_error_line(capsys)
    assert run_cli([*validate, "--precision", "bf16"]) == 2
    assert "--precision is for predictions" in one_error_line(capsys)
    assert run_cli(["simulate", "--list-published", "--cluster", "cpu-25gbe"]) == 2
    assert "--cluster does not apply to a published table" in one_error_line(capsys)
    samples = ["--samples", str(10**12), "--store", str(store_path)]
    assert run_cli(["predict-time-to-accuracy", "mnist-cnn", *samples]) == 2
    assert "--samples must be at most 100,000" in one_error_line(capsys)


def test_calibrate_from_serial_and_parallel_runs(store_path, cluster_file, capsys):
    code = run_cli(
        [
            "simulate",
            "mnist-cnn",
            "--cluster",
            str(cluster_file),
            "--workers",
            "1,2",
            "--batch-size",
            "32",
            "--calibrate-from",
            run_id(1)[:8],
            run_id(3)[:8],
            "--store",
            str(store_path),
            "--samples",
            "501",
            "--json",
        ]
    )
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"]["network"]["source"].startswith("fitted")
    # the 2-worker run it was fitted to (0.055 s at 32 per worker) comes back
    two = out["predictions"][1]
    assert two["per_worker_batch"] == 32
    assert two["step_time_s"] == pytest.approx(0.055, rel=0.03)


def test_a_precision_without_runs_names_the_precision_with_them(store_path, cluster_file, capsys):
    # The fixture's serial runs are fp32, as a run on a CPU without native bf16 makes them;
    # asked for bf16, with no peak in the cluster file to fall back on, the error says what
    # would calibrate (a run's --precision auto and the simulator's default can differ).
    args = ["simulate", "mnist-cnn", "--cluster", str(cluster_file), "--precision", "bf16"]
    assert run_cli([*args, "--store", str(store_path)]) == 2
    line = one_error_line(capsys)
    assert "no stored serial run of mnist-cnn on Test CPU 9000 (bf16)" in line
    # The run it suggests makes what was asked for: its auto precision may not be bf16.
    assert "--precision bf16` or give --calibrate-from" in line
    assert line.endswith(
        "but mnist-cnn has serial runs on Test CPU 9000 in fp32, not in bf16: --precision fp32 "
        "calibrates from them"
    )


def test_a_prediction_from_the_peak_says_which_precision_has_runs(
    store_path, cluster_file, tmp_path, capsys
):
    with_peak = tmp_path / "with-peak.toml"
    peak = 'cores = 1\npeak_flops = { bf16 = "1 TFLOP/s" }\nefficiency = 0.5'
    with_peak.write_text(CLUSTER.replace("cores = 1", peak))
    args = ["simulate", "mnist-cnn", "--cluster", str(with_peak), "--precision", "bf16"]
    assert run_cli([*args, "--workers", "1", "--store", str(store_path), "--json"]) == 0
    calibration = json.loads(capsys.readouterr().out)["calibration"]
    assert calibration["source"] == "peak"
    assert calibration["notes"][-1] == (
        "mnist-cnn has serial runs on Test CPU 9000 in fp32, not in bf16: --precision fp32 "
        "calibrates from them"
    )


@pytest.mark.parametrize("busy_runs", [(1,), (1, 2)])
def test_busy_runs_calibrate_only_where_no_quiet_one_does_and_say_so(
    store_path, cluster_file, capsys, busy_runs
):
    """As `--validate` leaves them out: a run that shared its cores measured that work too."""
    busy = {"contention": {"verdict": "busy", "reason": "other processes used 0.90 cores"}}
    with RunStore(store_path) as store:
        for n in busy_runs:
            assert store.add_to_summary(run_id(n), busy)
    args = ["simulate", "mnist-cnn", "--cluster", str(cluster_file), "--json"]
    assert run_cli([*args, "--store", str(store_path), "--samples", "101"]) == 0
    calibration = json.loads(capsys.readouterr().out)["calibration"]
    if busy_runs == (1,):
        assert calibration["run_ids"] == [run_id(2)]
        assert "1 busy run(s) left out (other work used their cores)" in calibration["notes"]
    else:
        assert set(calibration["run_ids"]) == {run_id(1), run_id(2)}
        assert any(
            note.startswith("every calibration run ran on a busy machine")
            for note in calibration["notes"]
        )


def test_emulations_to_different_targets_are_not_ranked_together(store_path, cluster_file, capsys):
    """Fewer steps to a lower target is no faster training: the line names each target's
    emulations, and --emulation picks one."""
    with RunStore(store_path) as store:
        add_emulation(
            store,
            run_id(20),
            workers=1,
            steps_to_target=10,
            target_accuracy=0.5,
            emulation_id="low00001",
        )
    args = ["predict-time-to-accuracy", "mnist-cnn", "--store", str(store_path)]
    args += ["--cluster", str(cluster_file)]
    assert run_cli([*args, "--samples", "101"]) == 2
    assert one_error_line(capsys).endswith(
        "the emulations of mnist-cnn reach different target accuracies (0.5: low00001; "
        "0.99: emu00001): times to different targets do not compare; choose one target's "
        "emulation with --emulation ID"
    )
    assert run_cli([*args, "--samples", "101", "--emulation", "emu00001", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {row["target_accuracy"] for row in rows} == {0.99}


def test_the_algorithm_asked_for_is_the_one_the_output_names(capsys):
    args = ["simulate", "mnist-cnn", "--cluster", "cpu-25gbe", "--workers", "2"]
    assert run_cli([*args, "--algorithm", "hierarchical", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cluster"]["algorithm"] == "hierarchical"
    assert {p["algorithm"] for p in data["predictions"]} == {"hierarchical"}


def test_a_plot_that_cannot_be_written_whole_leaves_no_file(tmp_path, monkeypatch):
    import os
    from types import SimpleNamespace

    from trainscale.errors import TrainscaleError
    from trainscale.simulator.run import write_plots

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    plot = SimpleNamespace(file_name="throughput.png", png=b"\x89PNG" + b"0" * 100)
    with pytest.raises(TrainscaleError, match="No space left on device"):
        write_plots(tmp_path / "plots", [plot])
    assert list((tmp_path / "plots").iterdir()) == []  # no cut PNG, no temporary file


def test_a_local_worker_of_more_cores_than_the_machine_has_is_refused(store_path, capsys):
    args = ["simulate", "mnist-cnn", "--threads-per-worker", "100000"]
    assert run_cli([*args, "--store", str(store_path)]) == 2
    assert "--threads-per-worker 100000 exceeds the" in one_error_line(capsys)
