"""The contention verdict from recorded samples (fake /proc/stat texts), and a sampler that
never fails: no /proc/stat gives 'unknown' with why, and so does an error inside it."""

from __future__ import annotations

import pytest

from trainscale.hardware import contention
from trainscale.hardware.contention import (
    BUSY,
    OTHER_CORES_LIMIT,
    QUIET,
    UNKNOWN,
    Contention,
    ContentionSampler,
    ProcTime,
    Sample,
    Tally,
    judge,
    parse_proc_stat,
)
from trainscale.metrics.run_flags import ran_busy

HZ = 100.0


def stat_text(cores: dict[int, tuple[int, int, int]]) -> str:
    """A /proc/stat text from per-core (busy, idle, steal) ticks: busy split over user and
    system, idle over idle and iowait, as the kernel writes the lines."""
    lines = []
    total = [sum(values[i] for values in cores.values()) for i in range(3)]
    for name, (busy, idle, steal) in [("cpu ", tuple(total)), *cores.items()]:
        label = name if isinstance(name, str) else f"cpu{name}"
        user, system = busy - busy // 3, busy // 3
        lines.append(f"{label} {user} 0 {system} {idle - 5} 5 0 0 {steal} 0 0")
    lines += ["intr 12345 0 0", "ctxt 999", "btime 1700000000", "processes 4242"]
    return "\n".join(lines) + "\n"


def sample(t_s, cores, procs, load=None) -> Sample:
    return Sample(t_s=t_s, cores=parse_proc_stat(stat_text(cores)), procs=procs, load_1m=load)


def run_tree(own_s: float, children_s: float = 0.0, share: float = 1.0):
    return {(100, 1.0): ProcTime(own_s=own_s, children_s=children_s, run_share=share)}


def verdict(before: Sample, after: Sample, run_cores=(0,)) -> Contention:
    tally = Tally(run_cores=tuple(run_cores), hz=HZ)
    tally.add(before, after)
    return judge(tally, 2)


def test_parse_proc_stat_reads_every_cpu_line_and_old_kernels_without_steal():
    parsed = parse_proc_stat(
        "cpu  10 2 3 100 4 1 1 7 0 0\ncpu0 10 2 3 100 4 1 1 7 0 0\ncpu1 5 0 5 50 0 0 0\n"
        "intr 1 2\ncpufreq junk\n"
    )
    assert parsed[None].busy == 10 + 2 + 3 + 1 + 1 and parsed[None].idle == 104
    assert parsed[None].steal == 7
    assert parsed[1].busy == 10 and parsed[1].steal == 0  # no steal field: 0
    assert set(parsed) == {None, 0, 1}
    with pytest.raises(ValueError):
        parse_proc_stat("cpu0 1 2 3 4\n")


def test_quiet_when_the_machine_did_only_the_runs_work():
    # 10 s; the run used core 0 fully (1000 ticks = 10 s), core 1 idle.
    before = sample(0.0, {0: (0, 0, 0), 1: (0, 0, 0)}, run_tree(0.0), load=0.5)
    after = sample(10.0, {0: (1000, 0, 0), 1: (2, 998, 0)}, run_tree(10.0), load=1.1)
    result = verdict(before, after)
    assert result.verdict == QUIET
    assert result.other_cores_busy_run_cores == pytest.approx(0.0, abs=1e-9)
    assert result.other_cores_busy == pytest.approx(0.002)
    assert result.own_cores_busy == pytest.approx(1.0)
    assert result.load_avg_max == 1.1 and result.run_cores == [0]
    assert result.run_cores_busy == {"0": pytest.approx(1.0)}
    assert not ran_busy(result.summary())


def test_busy_when_a_neighbour_shares_the_runs_core():
    # Core 0 busy all along, the run got 6 s of it: 4 s (0.4 cores) went to a neighbour.
    before = sample(0.0, {0: (0, 0, 0), 1: (0, 0, 0)}, run_tree(0.0))
    after = sample(10.0, {0: (1000, 0, 0), 1: (0, 1000, 0)}, run_tree(6.0))
    result = verdict(before, after)
    assert result.verdict == BUSY
    assert result.other_cores_busy_run_cores == pytest.approx(0.4)
    assert result.other_cores_busy_run_cores > OTHER_CORES_LIMIT
    assert "0.40 cores" in result.reason and "[0]" in result.reason
    assert ran_busy(result.summary())


def test_a_neighbour_on_a_core_the_run_does_not_use_leaves_it_quiet():
    before = sample(0.0, {0: (0, 0, 0), 1: (0, 0, 0)}, run_tree(0.0))
    after = sample(10.0, {0: (1000, 0, 0), 1: (1000, 0, 0)}, run_tree(10.0))
    result = verdict(before, after)
    assert result.verdict == QUIET
    assert result.other_cores_busy == pytest.approx(1.0)  # recorded all the same
    assert result.other_cores_busy_run_cores == pytest.approx(0.0, abs=1e-9)


def test_busy_when_the_hypervisor_steals():
    # The run's core: 900 ticks busy (all the run's), 100 stolen: 10% > 5%.
    before = sample(0.0, {0: (0, 0, 0)}, run_tree(0.0))
    after = sample(10.0, {0: (900, 0, 100)}, run_tree(9.0))
    result = verdict(before, after)
    assert result.verdict == BUSY
    assert result.steal_fraction == pytest.approx(0.1)
    assert "stole 10.0%" in result.reason


def test_unpinned_own_time_counts_on_the_run_cores_by_its_share():
    # The run's processes may use both cores (share 0.5 of their time on core 0); the
    # machine-wide busy time is all theirs, so nobody else ran anywhere.
    before = sample(0.0, {0: (0, 0, 0), 1: (0, 0, 0)}, run_tree(0.0, share=0.5))
    after = sample(10.0, {0: (500, 500, 0), 1: (500, 500, 0)}, run_tree(10.0, share=0.5))
    result = verdict(before, after)
    assert result.verdict == QUIET
    assert result.other_cores_busy_run_cores == pytest.approx(0.0, abs=1e-9)


def test_a_worker_that_exited_is_still_the_runs_time():
    # A worker used 4 s, exited and was reaped: its time moved to the parent's children
    # fields. The machine saw 5 s busy on core 0: all of it the run's own.
    parent, worker = (100, 1.0), (200, 2.0)
    first = sample(
        0.0,
        {0: (0, 0, 0)},
        {parent: ProcTime(0.0, 0.0, 1.0), worker: ProcTime(0.0, 0.0, 1.0)},
    )
    middle = sample(
        5.0,
        {0: (300, 200, 0)},
        {parent: ProcTime(0.5, 0.0, 1.0), worker: ProcTime(2.5, 0.0, 1.0)},
    )
    last = sample(10.0, {0: (500, 500, 0)}, {parent: ProcTime(1.0, 4.0, 1.0)})
    tally = Tally(run_cores=(0,), hz=HZ)
    tally.add(first, middle)
    tally.add(middle, last)
    result = judge(tally, 3)
    assert tally.own_s == pytest.approx(5.0)
    assert result.verdict == QUIET
    assert result.other_cores_busy_run_cores == pytest.approx(0.0, abs=1e-9)


def test_contention_round_trips_through_a_stored_summary():
    before = sample(0.0, {0: (0, 0, 0)}, run_tree(0.0))
    after = sample(10.0, {0: (1000, 0, 0)}, run_tree(5.0))
    result = verdict(before, after)
    assert Contention.from_summary(result.summary()) == result
    assert Contention.from_summary({}) is None
    assert "other processes 0.50 cores on the run's cores" in result.figures()


def test_no_proc_stat_gives_unknown_with_why(tmp_path):
    sampler = ContentionSampler([0], proc_stat=tmp_path / "no-such-stat").start()
    result = sampler.stop()
    assert result.verdict == UNKNOWN
    assert "not readable on this system" in result.reason
    assert not ran_busy(result.summary())


def test_an_error_inside_the_sampler_gives_unknown_and_never_raises(monkeypatch):
    def broken(self):
        raise RuntimeError("cannot read the process table")

    monkeypatch.setattr(contention.ContentionSampler, "_sample", broken)
    result = ContentionSampler([0], period_s=0.01).start().stop()
    assert result.verdict == UNKNOWN
    assert "sampler failed" in result.reason and "cannot read the process table" in result.reason


def test_an_error_in_a_later_sample_gives_unknown(monkeypatch, tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(stat_text({0: (0, 0, 0)}))
    sampler = ContentionSampler([0], period_s=60, proc_stat=stat).start()
    stat.write_text("garbage\n")  # the last sample finds no cpu line
    result = sampler.stop()
    assert result.verdict == UNKNOWN and "no aggregate 'cpu' line" in result.reason


def test_the_busiest_other_processes_are_ranked_by_cpu_and_this_tree_is_left_out():
    from trainscale.hardware.contention import rank_processes

    before = {
        (10, 1.0): ("stress", 5.0),
        (11, 1.0): ("idle-daemon", 1.0),
        (12, 1.0): ("trainscale", 3.0),  # this process's tree
        (13, 1.0): ("make", 2.0),
        (14, 9.0): ("reused-pid", 0.0),
    }
    after = {
        (10, 1.0): ("stress", 5.98),
        (11, 1.0): ("idle-daemon", 1.01),  # 2%: below the floor, not named
        (12, 1.0): ("trainscale", 4.0),
        (13, 1.0): ("make", 2.5),
        (14, 2.0): ("reused-pid", 1.0),  # a new process under an old pid: no interval
        (15, 1.0): ("new", 9.0),
    }
    found = rank_processes(before, after, 1.0, exclude={12})
    assert [p.text() for p in found] == ["stress (pid 10) 98% CPU", "make (pid 13) 50% CPU"]
    assert rank_processes(before, after, 1.0, exclude={12}, limit=1)[0].name == "stress"
    assert rank_processes(before, after, 0.0) == []


def test_busiest_processes_never_raises(monkeypatch):
    import psutil

    def broken(*args, **kwargs):
        raise psutil.AccessDenied()

    monkeypatch.setattr(psutil, "process_iter", broken)
    assert contention.busiest_processes(interval_s=0.0) == []


def test_the_peak_is_not_read_over_a_last_interval_cut_short():
    # 0.5 s with other work on half of core 0, then a last sample 10 ms later in which the
    # tick counters moved by 3 ticks (30 ms of busy time in a 10 ms interval).
    first = sample(0.0, {0: (0, 0, 0)}, run_tree(0.0))
    second = sample(0.5, {0: (50, 50, 0)}, run_tree(0.25))
    last = sample(0.51, {0: (53, 50, 0)}, run_tree(0.25))
    tally = Tally(run_cores=(0,), hz=HZ)
    tally.add(first, second)
    tally.add(second, last)
    result = judge(tally, 3)
    # The first interval's 0.5 cores, or the run's mean if more (0.28 s over 0.51 s): not
    # the 3 cores the last 10 ms would read on a 1-core run.
    assert result.other_cores_busy_run_cores_peak == pytest.approx(0.28 / 0.51, abs=1e-4)
    # A run with no interval long enough has its mean as its peak, never more cores than
    # it has.
    short = Tally(run_cores=(0,), hz=HZ)
    short.add(second, last)
    assert judge(short, 2).other_cores_busy_run_cores_peak == pytest.approx(1.0)
