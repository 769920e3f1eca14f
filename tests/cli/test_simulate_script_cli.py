"""`trainscale simulate script:NAME.py`: a user's script predicted beyond this machine from its
stored runs, its gradient buckets from the parameter sizes `trainscale.meter(model=model)`
recorded; a script run without them is one line saying what to pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli
from tests.helpers.simulate import add_measured_run, run_id

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist_script.py"
TINY = ["--max-steps", "8", "--train-samples", "512", "--test-samples", "64"]
NET_PARAMETERS = 32 * 9 + 32 + 64 * 32 * 9 + 64 + 9216 * 128 + 128 + 128 * 10 + 10
"""The example's Net: conv1, conv2, fc1, fc2 (weights and biases), all fp32."""

CLUSTER = """
name = "pairs"
source = "a test: nodes of two one-core workers like this machine's"
devices_per_node = 2

[device]
kind = "cpu"
name = "this machine's cores"
match = ["{host}"]
cores = 1

[intra_node]
alpha = "50 us"
bandwidth = "1 GB/s"

[inter_node]
alpha = "25 us"
bandwidth = "25 GbE"

[communication]
overlap = 0.0
"""


def _measure(store: Path, workers: int) -> None:
    args = ["run", str(EXAMPLE), "--data", "synthetic", "--store", str(store)]
    args += ["--workers", str(workers), "--threads-per-worker", "1", "--warmup-steps", "2"]
    assert run_cli([*args, "--", *TINY]) == 0


def test_a_script_measured_serially_and_on_two_workers_is_predicted_to_eight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    _measure(store, 1)
    _measure(store, 2)
    with RunStore(store) as opened:
        two, serial = opened.list_runs(workload="script:mnist_script.py")
    sizes = serial.summary["model_parameters"]
    assert [p["dtype"] for p in sizes] == ["float32"] * 8  # 4 layers' weights and biases
    assert sum(p["numel"] for p in sizes) == NET_PARAMETERS
    cluster = tmp_path / "pairs.toml"
    cluster.write_text(CLUSTER.format(host=serial.env["hostname"]))
    capsys.readouterr()

    common = ["--cluster", str(cluster), "--store", str(store), "--samples", "301", "--json"]
    given = ["--calibrate-from", serial.run_id, two.run_id]
    code = run_cli(["simulate", "script:mnist_script.py", "--workers", "1,4,8", *given, *common])

    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["workload"] == "script:mnist_script.py"
    assert set(out["calibration"]["run_ids"]) == {serial.run_id, two.run_id}
    assert out["gradients"]["total_bytes"] == 4 * NET_PARAMETERS
    assert out["gradients"]["weights_from"] == "parameters"
    one, four, eight = out["predictions"]
    # The serial prediction is the serial run's measured step, less nothing and plus nothing.
    assert one["step_time_s"] == pytest.approx(serial.summary["step_time_s_median"], rel=0.1)
    for prediction, workers in ((four, 4), (eight, 8)):
        assert prediction["workers"] == workers and prediction["global_batch"] == 64 * workers
        assert prediction["step_time_s"] > 0 and prediction["comm_s"] > 0
        assert 0 < prediction["speedup"] <= workers

    # Without --calibrate-from, and by the script's path: its serial run on these cores.
    assert run_cli(["simulate", str(EXAMPLE), "--workers", "4", *common]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["calibration"]["run_ids"] == [serial.run_id]
    assert out["predictions"][0]["samples_per_s"] > 0


def test_a_script_run_without_its_model_sizes_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    with RunStore(store) as opened:
        add_measured_run(opened, run_id(1), workload="script:train.py", script="/a/train.py")
    args = ["--store", str(store), "--cluster", "cpu-25gbe", "--workers", "1"]
    assert run_cli(["simulate", "script:train.py", *args]) == 2
    line = one_error_line(capsys)
    assert "recorded no model sizes" in line
    assert "meter = trainscale.meter(model=model)" in line
    # A script never measured is one line too, saying how to measure it.
    assert run_cli(["simulate", "script:other.py", *args]) == 2
    assert "no completed run of script:other.py" in one_error_line(capsys)
