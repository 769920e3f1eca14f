"""Fixtures of the GPU tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def one_host_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's facts with one usable core: the CPU settings a bench or a recommend
    search compares the GPU with shrink to the serial ones. On a 16-core GPU machine the
    16-worker settings take minutes of process starts a round, and the GPU settings are
    what the tests are about."""
    from trainscale.hardware import facts

    real = facts.collect_environment

    def one_core(*args: Any, **kwargs: Any) -> dict[str, Any]:
        env = real(*args, **kwargs)
        return {**env, "usable_cores": env["usable_cores"][:1]}

    monkeypatch.setattr(facts, "collect_environment", one_core)
