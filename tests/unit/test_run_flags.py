"""The marks a stored run earns: stalls (mean step far above the median) and a busy machine."""

from trainscale.metrics.run_flags import STALL_RATIO, has_stalls, ran_busy, run_flags


def test_a_run_whose_mean_step_is_far_above_its_median_has_stalls():
    summary = {"step_time_s_median": 0.030, "step_time_s_mean": 0.030 * (STALL_RATIO + 0.01)}
    assert has_stalls(summary)
    assert run_flags(summary) == ["stalls"]


def test_a_mean_just_under_the_threshold_is_not_a_stall():
    summary = {"step_time_s_median": 0.030, "step_time_s_mean": 0.030 * (STALL_RATIO - 0.01)}
    assert not has_stalls(summary)
    assert run_flags(summary) == []


def test_runs_stored_without_a_mean_are_never_flagged_as_stalled():
    assert not has_stalls({"step_time_s_median": 0.030})
    assert not has_stalls({"step_time_s_median": 0.0, "step_time_s_mean": 1.0})


def test_busy_comes_from_the_contention_verdict():
    assert ran_busy({"contention": {"verdict": "busy"}})
    assert not ran_busy({"contention": {"verdict": "quiet"}})
    assert not ran_busy({"contention": "busy"})
    assert run_flags(
        {"step_time_s_median": 1.0, "step_time_s_mean": 2.0, "contention": {"verdict": "busy"}}
    ) == ["stalls", "busy"]


def test_a_stalled_run_is_told_with_its_mean_and_median_step():
    from trainscale.metrics.run_flags import stall_text, stalls_note

    stalled = {"step_time_s_median": 0.033, "step_time_s_mean": 0.1206}
    clean = {"step_time_s_median": 0.033, "step_time_s_mean": 0.034}
    assert stall_text(stalled) == "stalls: mean step 120.6 ms vs median 33.0 ms"
    assert stall_text(clean) is None
    assert stalls_note([clean, stalled, clean]) == (
        "stalls: mean step 120.6 ms vs median 33.0 ms in 1 of 3 runs"
    )
    worse = {"step_time_s_median": 0.010, "step_time_s_mean": 0.050}
    assert stalls_note([stalled, worse]) == (
        "stalls: worst mean step 50.0 ms vs median 10.0 ms in 2 of 2 runs"
    )
    assert stalls_note([clean]) is None
    # Sub-millisecond steps keep the digits that tell mean and median apart.
    tiny = {"step_time_s_median": 0.000205, "step_time_s_mean": 0.000231}
    assert stall_text(tiny) == "stalls: mean step 0.231 ms vs median 0.205 ms"


def test_a_run_no_longer_than_its_warm_up_says_every_step_is_timed():
    from trainscale.metrics.run_flags import all_steps_timed_text

    short = {"config": {"warmup_steps_untimed": 5}, "num_steps": 3, "warmup_steps_excluded": 0}
    assert all_steps_timed_text(short) == (
        "every step timed: the run's 3 step(s) are no more than its 5 warm-up steps "
        "(--warmup-steps), so the first step's one-off costs are in its step time"
    )
    assert all_steps_timed_text({**short, "num_steps": 8, "warmup_steps_excluded": 5}) is None
    no_warmup = {**short, "config": {"warmup_steps_untimed": 0}}
    assert all_steps_timed_text(no_warmup) is None  # asked for: nothing left out to say
