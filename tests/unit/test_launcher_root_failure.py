"""Which worker's failure a run is stored with: the one that started it."""

from __future__ import annotations

from types import SimpleNamespace

from trainscale.parallel.launcher import _first_failure, _root_failure


def failed(**by_rank: tuple[int, str]) -> SimpleNamespace:
    """A launcher error whose workers (rank_N=(timestamp, last line)) failed."""
    failures = {
        int(name.split("_")[1]): SimpleNamespace(
            timestamp=when,
            message={"message": {"message": f"Traceback...\n{line}"}},
            pid=100,
            exitcode=1,
        )
        for name, (when, line) in by_rank.items()
    }
    return SimpleNamespace(failures=failures)


def test_within_one_second_the_cause_wins_over_the_peer_that_lost_it():
    error = failed(
        rank_0=(50, "JaxRuntimeError: Gloo all-reduce failed: Connection reset by peer"),
        rank_1=(50, "RuntimeError: injected crash on rank 1 at step 2"),
    )
    assert _root_failure(error)[0] == 1
    assert _first_failure(error).endswith("RuntimeError: injected crash on rank 1 at step 2")


def test_an_earlier_failure_wins_whatever_it_says():
    error = failed(
        rank_0=(49, "RuntimeError: Connection closed by peer"),
        rank_1=(50, "RuntimeError: boom"),
    )
    assert _root_failure(error)[0] == 0


def test_ties_without_a_cause_go_to_the_lowest_rank():
    error = failed(rank_2=(7, "ValueError: a"), rank_1=(7, "ValueError: b"))
    assert _root_failure(error)[0] == 1
