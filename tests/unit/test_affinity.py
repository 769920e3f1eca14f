"""CPU worker plans: modes, refusal of oversubscription, explicit sets, and real pinning."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from trainscale.errors import ConfigError
from trainscale.parallel.affinity import CpuPlan, parse_affinity, pin_current_process, plan_cpu

CORES = list(range(8))
TWO_NODES = [[0, 1, 2, 3], [4, 5, 6, 7]]

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="the OS has no CPU affinity call"
)


# --- parse_affinity ------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["none", "compact", "spread", " Compact ", "SPREAD"])
def test_parse_affinity_modes(text: str) -> None:
    assert parse_affinity(text) == text.strip().lower()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0,1;2,3", [[0, 1], [2, 3]]),
        ("0-3;4-7", [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("0", [[0]]),
        (" 0-1 ; 6,7 ", [[0, 1], [6, 7]]),
    ],
)
def test_parse_affinity_explicit(text: str, expected: list[list[int]]) -> None:
    assert parse_affinity(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty --affinity"),
        ("scatter", "unknown --affinity 'scatter'"),
        ("0,1;;2,3", "core set 2 is empty"),
        ("0,1;", "core set 2 is empty"),
        ("0,x;1", "'x' is not a core number"),
        ("0,1,1;2", "core 1 is listed twice"),
        ("0-2,1;3", "core 1 is listed twice"),
        ("1.5;2", "'1.5' is not a core number"),
        ("3-1;4", "reversed"),
    ],
)
def test_parse_affinity_errors_name_the_offending_text(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_affinity(text)
    assert fragment in str(caught.value)


# --- plan_cpu: named modes -------------------------------------------------------------------


def test_none_is_not_pinned_and_divides_cores() -> None:
    plan = plan_cpu(2, None, "none", CORES)
    assert plan == CpuPlan(
        workers=2,
        threads_per_worker=4,
        core_sets=None,
        affinity="none",
        available_cores=tuple(CORES),
        oversubscribed=False,
    )
    assert plan.describe() == "2 workers x 4 threads, not pinned (8 cores available)"
    assert plan.core_sets is None


def test_compact_gives_consecutive_cores() -> None:
    plan = plan_cpu(2, None, "compact", CORES)
    assert plan.threads_per_worker == 4
    assert plan.core_sets == ((0, 1, 2, 3), (4, 5, 6, 7))
    plan = plan_cpu(3, 2, "compact", CORES)
    assert plan.core_sets == ((0, 1), (2, 3), (4, 5))
    assert not plan.oversubscribed


def test_compact_describe_matches_the_documented_form() -> None:
    plan = plan_cpu(2, 1, "compact", [0, 1])
    assert plan.describe() == "2 workers x 1 thread, pinned compact: [0] [1]"


def test_spread_without_numa_strides_cores() -> None:
    plan = plan_cpu(2, 2, "spread", CORES)
    assert plan.core_sets == ((0, 2), (1, 3))
    plan = plan_cpu(2, None, "spread", CORES)
    assert plan.core_sets == ((0, 2, 4, 6), (1, 3, 5, 7))
    # A single NUMA node is the same as no map.
    assert plan_cpu(2, 2, "spread", CORES, numa_nodes=[CORES]).core_sets == ((0, 2), (1, 3))


def test_spread_with_numa_round_robins_nodes() -> None:
    plan = plan_cpu(2, 2, "spread", CORES, numa_nodes=TWO_NODES)
    assert plan.core_sets == ((0, 1), (4, 5))
    plan = plan_cpu(4, 2, "spread", CORES, numa_nodes=TWO_NODES)
    assert plan.core_sets == ((0, 1), (4, 5), (2, 3), (6, 7))
    assert plan.describe() == "4 workers x 2 threads, pinned spread: [0-1] [4-5] [2-3] [6-7]"
    assert not plan.oversubscribed


def test_spread_numa_ignores_cores_outside_the_run() -> None:
    # Only cores 2-5 are given to the run: node 0 keeps 2-3 and node 1 keeps 4-5.
    plan = plan_cpu(2, 2, "spread", [2, 3, 4, 5], numa_nodes=TWO_NODES)
    assert plan.core_sets == ((2, 3), (4, 5))


def test_spread_numa_refuses_an_overfull_node() -> None:
    # 3 workers over 2 nodes: node 0 gets two workers x 2 threads but has only 2 cores.
    with pytest.raises(ConfigError, match="NUMA node with cores 0-1, which has only 2 cores"):
        plan_cpu(3, 2, "spread", range(6), numa_nodes=[[0, 1], [2, 3, 4, 5]])
    plan = plan_cpu(
        3, 2, "spread", range(6), numa_nodes=[[0, 1], [2, 3, 4, 5]], allow_oversubscribe=True
    )
    assert plan.oversubscribed
    assert plan.core_sets == ((0, 1), (2, 3), (0, 1))


def test_default_available_cores_is_this_process_mask() -> None:
    plan = plan_cpu(1, None, "none")
    expected = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    if expected is not None:
        assert list(plan.available_cores) == expected
        assert plan.threads_per_worker == len(expected)


def test_available_cores_are_sorted_and_deduplicated() -> None:
    plan = plan_cpu(2, 1, "compact", [3, 1, 1, 2])
    assert plan.available_cores == (1, 2, 3)
    assert plan.core_sets == ((1,), (2,))


# --- refusal and allow_oversubscribe -------------------------------------------------------


def test_refusal_message_explains_and_suggests() -> None:
    with pytest.raises(ConfigError) as caught:
        plan_cpu(2, 2, "compact", [0, 1])
    assert str(caught.value) == (
        "2 workers x 2 threads = 4 threads on 2 cores oversubscribes this machine (threads "
        "would fight for cores and parallel training runs slower than serial); use "
        "--threads-per-worker 1 or pass --allow-oversubscribe"
    )


@pytest.mark.parametrize("mode", ["none", "compact", "spread"])
def test_refusal_applies_to_every_mode(mode: str) -> None:
    with pytest.raises(ConfigError, match="oversubscribes this machine"):
        plan_cpu(2, 3, mode, [0, 1, 2, 3])


def test_more_workers_than_cores_suggests_fewer_workers() -> None:
    with pytest.raises(ConfigError, match="use --workers 2 or pass --allow-oversubscribe"):
        plan_cpu(3, None, "none", [0, 1])


def test_allow_oversubscribe_wraps_compact_and_spread() -> None:
    compact = plan_cpu(3, 2, "compact", [0, 1, 2, 3], allow_oversubscribe=True)
    assert compact.oversubscribed
    assert compact.core_sets == ((0, 1), (2, 3), (0, 1))
    assert compact.describe().endswith("(oversubscribed)")
    spread = plan_cpu(2, 3, "spread", [0, 1, 2, 3], allow_oversubscribe=True)
    assert spread.oversubscribed
    assert spread.core_sets == ((0, 2), (1, 3))  # wrapped core 0/1 again; a mask is a set
    none = plan_cpu(4, 1, "none", [0, 1], allow_oversubscribe=True)
    assert none.oversubscribed and none.core_sets is None


def test_exactly_filling_the_machine_is_not_oversubscribed() -> None:
    assert not plan_cpu(2, 4, "compact", CORES, allow_oversubscribe=True).oversubscribed


@pytest.mark.parametrize(
    ("workers", "threads"), [(0, 1), (-1, None), (2, 0), (2, -3), (True, 1), (2, 1.5)]
)
def test_counts_must_be_positive_integers(workers: object, threads: object) -> None:
    with pytest.raises(ConfigError, match="must be a whole number >= 1"):
        plan_cpu(workers, threads, "none", CORES)  # type: ignore[arg-type]


def test_empty_available_cores_is_refused() -> None:
    with pytest.raises(ConfigError, match="no CPU cores"):
        plan_cpu(1, None, "none", [])


# --- explicit sets -------------------------------------------------------------------------


def test_explicit_sets_from_text_and_lists() -> None:
    plan = plan_cpu(2, None, "0,1;2,3", CORES)
    assert plan.affinity == "explicit"
    assert plan.core_sets == ((0, 1), (2, 3))
    assert plan.threads_per_worker == 2
    assert plan.core_sets[1] == (2, 3)
    assert plan_cpu(2, None, [[0, 1], [2, 3]], CORES) == plan
    assert plan.describe() == "2 workers x 2 threads, pinned explicit: [0-1] [2-3]"


def test_explicit_ranges_and_uneven_sets_use_the_smallest_set() -> None:
    plan = plan_cpu(2, None, "0-3;4-5", CORES)
    assert plan.core_sets == ((0, 1, 2, 3), (4, 5))
    assert plan.threads_per_worker == 2


def test_explicit_wrong_number_of_sets() -> None:
    with pytest.raises(ConfigError, match="gives 3 core sets but there are 2 workers"):
        plan_cpu(2, None, "0;1;2", CORES)
    with pytest.raises(ConfigError, match="gives 1 core set but there are 2 workers"):
        plan_cpu(2, None, [[0, 1]], CORES)


def test_explicit_invalid_core_names_it_and_lists_available() -> None:
    with pytest.raises(ConfigError) as caught:
        plan_cpu(2, None, "0,1;2,9", [0, 1, 2, 3])
    message = str(caught.value)
    assert "core 9" in message
    assert "available cores: 0-3" in message


def test_explicit_overlap_is_refused_unless_allowed() -> None:
    with pytest.raises(ConfigError, match="sets 1 and 2 both contain core 1"):
        plan_cpu(2, None, "0,1;1,2", CORES)
    plan = plan_cpu(2, None, "0,1;1,2", CORES, allow_oversubscribe=True)
    assert plan.oversubscribed


def test_explicit_more_threads_than_set_cores_is_refused() -> None:
    with pytest.raises(ConfigError, match="4 threads per worker on --affinity set 1"):
        plan_cpu(2, 4, "0,1;2,3", CORES)
    assert plan_cpu(2, 4, "0,1;2,3", CORES, allow_oversubscribe=True).oversubscribed


@pytest.mark.parametrize(
    ("sets", "fragment"),
    [
        ([[0], []], "core set 2 is empty"),
        ([[0, 0], [1]], "core 0 is listed twice"),
        ([["0"], [1]], "'0' is not a core number"),
        ([[0.5], [1]], "0.5 is not a core number"),
        ([[-1], [1]], "-1 is not a core number"),
        (["01", [1]], "must be a list of core numbers"),
    ],
)
def test_explicit_list_errors(sets: list, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_cpu(2, None, sets, CORES)
    assert fragment in str(caught.value)


# --- pinning a real process ----------------------------------------------------------------


def _pin_and_report(cores: list[int], queue: multiprocessing.Queue) -> None:
    """Child process body: start a thread (as a library's pool starts on import), pin, then
    send back the masks the OS now reports for this thread and that one."""
    try:
        started, release = threading.Event(), threading.Event()
        ids: list[int] = []

        def pool_thread() -> None:
            ids.append(threading.get_native_id())
            started.set()
            release.wait(60)

        helper = threading.Thread(target=pool_thread, daemon=True)
        helper.start()
        started.wait(60)
        pin_current_process(cores)
        queue.put([sorted(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(ids[0]))])
        release.set()
    except Exception as error:  # report, do not hang the parent on an empty queue
        queue.put(repr(error))


@needs_affinity
def test_pin_current_process_changes_affinity_in_a_child() -> None:
    before = sorted(os.sched_getaffinity(0))
    target = [before[-1]]
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_pin_and_report, args=(target, queue))
    child.start()
    try:
        result = queue.get(timeout=60)
    finally:
        child.join(timeout=60)
    # The thread that was already running is pinned too, not only the calling one.
    assert result == [target, target]
    assert child.exitcode == 0
    # The parent's own mask is untouched.
    assert sorted(os.sched_getaffinity(0)) == before


@needs_affinity
def test_pin_current_process_refusal_is_a_config_error() -> None:
    before = os.sched_getaffinity(0)
    try:
        # No machine has core 100000 online, so the kernel rejects the mask (EINVAL) and
        # leaves the process's affinity as it was.
        with pytest.raises(ConfigError, match="refused to pin this process to cores 100000"):
            pin_current_process([100000])
    finally:
        os.sched_setaffinity(0, before)
    assert os.sched_getaffinity(0) == before


def test_pin_current_process_empty_set() -> None:
    with pytest.raises(ConfigError, match="empty core set"):
        pin_current_process([])
