"""A script run's progress lines (runner/script_progress.py): their text from made-up
measurements, the line of a step that hangs, and the thread that writes them, which ends
with the script."""

from __future__ import annotations

import io
import threading
import time
from dataclasses import dataclass, field

from trainscale.runner.script_progress import ProgressThread, Watch, shown


@dataclass
class Fake:
    """The lists a `ScriptMeasurements` has, filled by hand."""

    step_times_s: list[float] = field(default_factory=list)
    data_wait_s: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)

    def add(self, steps: int, step_s: float, wait_s: float, samples: int) -> None:
        self.step_times_s += [step_s] * steps
        self.data_wait_s += [wait_s] * steps
        self.samples += [samples] * steps


def test_the_line_gives_steps_rate_over_the_interval_data_wait_and_the_last_step() -> None:
    measured, watch = Fake(), Watch(started_s=100.0)
    assert watch.line(measured, 110.0) == "trainscale: no step yet: the script has run 10 s"
    measured.add(20, step_s=0.5, wait_s=0.1, samples=32)
    watch.observe(measured, 119.0)  # the poll that saw the steps end
    assert watch.line(measured, 120.0) == (
        "trainscale: 20 steps, 64.0 samples/s over the last 10 s, data wait 20% so far, "
        "last step ended 1.0 s ago"
    )
    measured.add(5, step_s=1.0, wait_s=0.0, samples=32)  # 160 samples in the next 10 s
    assert watch.line(measured, 130.0) == (
        "trainscale: 25 steps, 16.0 samples/s over the last 10 s, data wait 13% so far, "
        "last step ended 0.0 s ago"
    )
    assert watch.line(measured, 140.0) == (
        "trainscale: 25 steps, no step ended in the last 10 s, data wait 13% so far, "
        "last step ended 10.0 s ago"
    )


def test_before_a_gpu_scripts_first_evaluation_the_line_has_no_data_wait() -> None:
    measured, watch = Fake(samples=[8, 8]), Watch(started_s=0.0)  # step times not read yet
    assert watch.line(measured, 10.0) == (
        "trainscale: 2 steps, 1.6 samples/s over the last 10 s, last step ended 0.0 s ago"
    )


def test_a_step_that_runs_ten_times_the_median_and_over_30_s_is_said_to_hang() -> None:
    measured, watch = Fake(), Watch(started_s=0.0)
    measured.add(41, step_s=0.2, wait_s=0.0, samples=8)
    measured.step_times_s[-1] = 0.3
    watch.observe(measured, 5.0)  # step 41 ended at 5 s; step 42 runs from then
    assert "has run" not in watch.line(measured, 34.0)  # 29 s: under the 30 s floor
    hang = watch.line(measured, 100.0)
    assert hang == "trainscale: step 42 has run 95 s (the last step took 0.3 s)"


def test_a_slow_script_is_no_hang_until_ten_times_its_median_step() -> None:
    measured, watch = Fake(), Watch(started_s=0.0)
    measured.add(3, step_s=20.0, wait_s=0.0, samples=8)
    watch.observe(measured, 60.0)
    assert "has run" not in watch.line(measured, 250.0)  # 190 s < 10 x 20 s
    assert watch.line(measured, 270.0).startswith("trainscale: step 4 has run 210 s")


def test_a_gpu_script_hangs_against_the_step_ends_the_host_saw() -> None:
    measured, watch = Fake(samples=[8] * 10), Watch(started_s=0.0)
    watch.observe(measured, 1.0)
    measured.samples += [8] * 10
    watch.observe(measured, 2.0)  # 10 steps in 1 s: 0.1 s a step, as the host saw them
    assert watch.line(measured, 40.0) == (
        "trainscale: step 21 has run 38 s (a step took 0.1 s on average)"
    )


def test_the_thread_writes_its_lines_and_ends_with_the_script() -> None:
    measured = Fake()
    measured.add(3, step_s=0.01, wait_s=0.0, samples=4)
    stream = io.StringIO()
    thread = ProgressThread(stream, lambda: measured, interval_s=0.05, poll_s=0.01).start()
    deadline = time.monotonic() + 10
    while stream.getvalue().count("\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    thread.stop()
    assert not thread.alive()
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.startswith("trainscale: 3 steps, ") for line in lines)
    assert stream.getvalue() == "\n".join(lines) + "\n"  # no more once stopped


def test_shown_stops_its_thread_when_the_script_raises_and_is_off_when_quiet() -> None:
    def progress_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "trainscale-progress"]

    stream = io.StringIO()
    try:
        with shown(True, stream):
            assert len(progress_threads()) == 1
            raise KeyError("the script failed")
    except KeyError:
        pass
    assert progress_threads() == []
    with shown(False, stream):
        assert progress_threads() == []
    assert stream.getvalue() == ""  # no meter active, and less than 10 s: no line
