"""Stored runs written as TensorBoard event files and read back with TensorBoard's own
reader (EventAccumulator): tags, steps and values as stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainscale.errors import ConfigError
from trainscale.reporting.tensorboard_export import write_tensorboard
from trainscale.reporting.tracking import load_runs
from trainscale.results.store import RunStore

from tests.helpers.tracking_store import (
    EPOCHS,
    FAILED_ID,
    FAILURE,
    REAL_ID,
    STEP_TIMES,
    SYNTHETIC_ID,
    build_tracking_store,
)

pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)


def _read(directory: Path) -> EventAccumulator:
    events = EventAccumulator(str(directory), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def _points(events: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in events.Scalars(tag)]


def _as_float32(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    # Event files hold float32 scalars: compare with the stored values rounded alike.
    return [(step, float(np.float32(value))) for step, value in points]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return build_tracking_store(tmp_path / "runs.db")


def test_each_run_gets_a_recognisable_directory_with_its_scalars_as_stored(
    store: Path, tmp_path: Path
) -> None:
    logdir = tmp_path / "logs"
    done = write_tensorboard(load_runs(store), logdir)
    names = {d.run_id: Path(d.target).name for d in done}
    assert names == {
        REAL_ID: "mnist-cnn_2x1_b64_fp32_a1a1a1a1",
        SYNTHETIC_ID: "tweets-text_1x1_b64_fp32_synthetic_b2b2b2b2",
        FAILED_ID: "mnist-cnn_4x1_b64_fp32_c3c3c3c3",
    }
    assert sorted(p.name for p in logdir.iterdir()) == sorted(names.values())

    events = _read(logdir / names[REAL_ID])
    assert _points(events, "step_time_s") == _as_float32(list(enumerate(STEP_TIMES)))
    for field in ("train_loss", "test_loss", "test_accuracy", "train_clock_s"):
        expected = [(row["epoch"], row[field]) for row in EPOCHS]
        assert _points(events, f"epoch/{field}") == _as_float32(expected)
    with RunStore(store) as runs:
        stored = runs.get_run(REAL_ID).summary
    for key in ("samples_per_s", "test_accuracy", "time_to_target_s", "num_steps"):
        assert _points(events, f"summary/{key}") == _as_float32([(0, stored[key])])
    texts = events.Tags()["tensors"]
    assert {"config/text_summary", "run/text_summary"} <= set(texts)
    config = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| workers | 2 |" in config and "| workload | mnist-cnn |" in config
    # A session of its own, ended with its status; no experiment summary of its own, which
    # TensorBoard would take for every run of the log directory.
    assert set(events.PluginTagToContent("hparams")) == {
        "_hparams_/session_start_info",
        "_hparams_/session_end_info",
    }
    assert _end_status(events) == "STATUS_SUCCESS"


def _end_status(events: EventAccumulator) -> str:
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    content = events.PluginTagToContent("hparams")["_hparams_/session_end_info"]
    data = plugin_data_pb2.HParamsPluginData.FromString(content)
    return api_pb2.Status.Name(data.session_end_info.status)


def test_a_failed_run_says_why_and_a_synthetic_run_claims_no_accuracy(
    store: Path, tmp_path: Path
) -> None:
    done = write_tensorboard(load_runs(store, run_ids=[FAILED_ID, SYNTHETIC_ID]), tmp_path / "l")
    failed, synthetic = (_read(Path(d.target)) for d in done)
    text = failed.Tensors("run/text_summary")[0].tensor_proto.string_val[0].decode()
    assert f"failure reason: {FAILURE}" in text and "status: failed" in text
    assert _end_status(failed) == "STATUS_FAILURE"
    assert "step_time_s" not in failed.Tags()["scalars"]
    scalars = set(synthetic.Tags()["scalars"])
    assert _points(synthetic, "step_time_s") == _as_float32(list(enumerate(STEP_TIMES[:5])))
    assert "summary/samples_per_s" in scalars and "epoch/epoch_time_s" in scalars
    assert not {"summary/test_accuracy", "epoch/test_accuracy", "epoch/train_loss"} & scalars


def test_writing_a_run_again_replaces_its_directory(store: Path, tmp_path: Path) -> None:
    runs = load_runs(store, run_ids=[REAL_ID])
    [first] = write_tensorboard(runs, tmp_path / "l")
    [second] = write_tensorboard(runs, tmp_path / "l")
    assert (first.action, second.action) == ("created", "replaced")
    directory = Path(second.target)
    assert len(list(directory.iterdir())) == 1  # one event file: no repeated scalars
    assert len(_read(directory).Scalars("step_time_s")) == len(STEP_TIMES)
    assert [p.name for p in (tmp_path / "l").iterdir()] == [directory.name]  # no leftovers


def test_a_run_written_under_a_new_name_leaves_no_directory_under_its_old_one(
    store: Path, tmp_path: Path
) -> None:
    # A script run is named by its batch, which is 0 until it completes.
    old = tmp_path / "l" / "script_mnist_script.py_1x2_b0_script_a1a1a1a1"
    old.mkdir(parents=True)
    [done] = write_tensorboard(load_runs(store, run_ids=[REAL_ID]), tmp_path / "l")
    assert done.action == "replaced" and not old.exists()
    assert [p.name for p in (tmp_path / "l").iterdir()] == [Path(done.target).name]


def test_a_logdir_that_cannot_be_written_is_one_config_error(store: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot create"):
        write_tensorboard(load_runs(store), blocker / "logs")
    with pytest.raises(ConfigError, match="not a directory"):
        write_tensorboard(load_runs(store), blocker)
    assert {p.name for p in tmp_path.iterdir() if not p.name.startswith("runs.db")} == {"file"}


def test_python_callers_mistakes_are_one_config_error(store: Path) -> None:
    with pytest.raises(ConfigError, match="log directory is empty"):
        write_tensorboard(load_runs(store), "")  # not the working directory
    with pytest.raises(ConfigError, match="status must be one of running, completed, failed"):
        load_runs(store, status="bogus")
    with pytest.raises(ConfigError, match="limit must be a whole number >= 1"):
        load_runs(store, limit=0)
