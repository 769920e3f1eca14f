"""The busy rule in one place (`metrics.run_flags`): which figures may carry a verdict."""

from __future__ import annotations

from trainscale.metrics.run_flags import NOT_TRUSTED, busy_count, judged, trusted

BUSY = {"contention": {"verdict": "busy"}}
QUIET = {"contention": {"verdict": "quiet"}}
UNKNOWN = {"contention": {"verdict": "unknown"}}
OLD = {"samples_per_s": 10.0}  # stored before runs were sampled


def test_a_verdict_stands_only_where_no_run_on_any_side_ran_busy():
    assert judged("faster", [QUIET, UNKNOWN], [OLD]) == "faster"
    assert trusted([QUIET], [QUIET])
    assert judged("faster", [QUIET], [QUIET, BUSY]) == NOT_TRUSTED
    assert judged("significant", [BUSY], []) == NOT_TRUSTED
    assert not trusted([BUSY])
    assert NOT_TRUSTED == "not trusted: busy machine"


def test_busy_count_counts_only_busy_verdicts():
    assert busy_count([BUSY, QUIET, UNKNOWN, OLD, BUSY]) == 2
    assert busy_count([]) == 0
