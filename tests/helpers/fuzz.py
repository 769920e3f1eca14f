"""The hypothesis settings of the property tests: the same examples on every machine."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def fuzz_settings(default_examples: int) -> settings:
    """`default_examples` examples per property, or `$TRAINSCALE_FUZZ_EXAMPLES` (more:
    `TRAINSCALE_FUZZ_EXAMPLES=1000 python -m pytest ...`); derandomized, so that a failure
    reproduces in CI, and without a per-example deadline (some examples start processes)."""
    return settings(
        max_examples=int(os.environ.get("TRAINSCALE_FUZZ_EXAMPLES", str(default_examples))),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        derandomize=True,
    )
