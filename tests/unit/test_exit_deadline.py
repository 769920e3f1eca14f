"""The exit deadline: a process whose work is done exits within the bound, with its status,
whatever non-daemon thread or exit hook is left; a clean exit does not wait for it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from trainscale.runner.exit_deadline import DEADLINE_ENV, DEFAULT_DEADLINE_S, deadline_s

LEFTOVERS = {
    "thread": (
        "threading.Thread(target=time.sleep, args=(3600,), name='leftover').start()",
        "thread 'leftover' was",
    ),
    "exit hook": ("atexit.register(time.sleep, 3600)", "an exit hook was"),
}


def _exit_with(leftover: str, status: int, deadline: str) -> tuple[int, str, float]:
    code = (
        "import atexit, sys, threading, time\n"
        "from trainscale.runner.exit_deadline import bounded_exit\n"
        f"{leftover}\n"
        "@bounded_exit(lambda: 'trainscale: test')\n"
        f"def main(): sys.exit({status})\n"
        "main()\n"
    )
    env = {**os.environ, DEADLINE_ENV: deadline}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stderr, time.monotonic() - start


@pytest.mark.parametrize("kind", ["thread", "exit hook"])
def test_a_leftover_ends_the_process_after_the_deadline_in_one_line(kind):
    leftover, named = LEFTOVERS[kind]
    status, err, took = _exit_with(leftover, 3, "0.5")
    assert status == 3, err
    assert err == (
        f"trainscale: test: {named} still running 0.5 s after the work ended; "
        "exiting with status 3\n"
    )
    assert 0.5 <= took < 30  # the bound, with room for a loaded machine's start-up


def test_a_clean_exit_does_not_wait_for_the_deadline():
    status, err, took = _exit_with("", 4, "120")
    assert (status, err) == (4, "")
    assert took < 60  # far under the deadline: nothing waited for it


@pytest.mark.parametrize(
    ("value", "expected"), [("2.5", 2.5), ("0", 0.0), ("-1", None), ("soon", None), ("", None)]
)
def test_the_deadline_comes_from_the_environment_when_it_is_a_number(monkeypatch, value, expected):
    monkeypatch.setenv(DEADLINE_ENV, value)
    assert deadline_s() == (DEFAULT_DEADLINE_S if expected is None else expected)
