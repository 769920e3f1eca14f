"""A stop signal that comes after rank 0 stored the run's result (while the launcher reaps
the workers) leaves the run whole: stored completed, with what the contention sampler saw,
and the terminal says so; a stop before the result leaves it failed as interrupted."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.hardware.contention import ContentionSampler
from trainscale.results.store import RunStore
from trainscale.runner import launch
from trainscale.runner.launch import RunInterrupted, launch_and_record

from tests.helpers.stored_runs import add_run


def _stopped_launch(store: Path, result_first: bool):
    def launch_workers(entrypoint, args, workers):
        if result_first:
            with RunStore(store) as opened:
                opened.complete_run("run00001", {"samples_per_s": 1.0}, [], [0.1])
        raise KeyboardInterrupt

    return launch_workers


@pytest.mark.parametrize("result_first", [True, False])
def test_a_stop_after_the_result_keeps_the_run_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, result_first: bool
) -> None:
    store = tmp_path / "s.db"
    with RunStore(store) as opened:
        add_run(opened, "run00001")
    monkeypatch.setattr(launch.launcher, "launch_workers", _stopped_launch(store, result_first))
    sampler = ContentionSampler(None).start()
    with pytest.raises(RunInterrupted) as caught:
        launch_and_record(print, (), 1, store, "run00001", sampler)
    with RunStore(store) as opened:
        run = opened.get_run("run00001")
    if result_first:
        assert caught.value.completed
        assert caught.value.describe() == (
            "run run00001 completed and was stored; then interrupted (SIGINT)"
        )
        assert run.status == "completed" and "contention" in run.summary
    else:
        assert not caught.value.completed
        assert caught.value.describe() == "run run00001 interrupted (SIGINT)"
        assert (run.status, run.error) == ("failed", "interrupted (SIGINT)")
