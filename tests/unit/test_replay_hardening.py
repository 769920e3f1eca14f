"""The hardening replay's verdict: what makes a replayed case pass or fail (no real runs)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_hardening.py"


@pytest.fixture(scope="module")
def replay():
    spec = importlib.util.spec_from_file_location("replay_hardening", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _case(replay, **given):
    fields = {"name": "c", "bound_s": 10.0, "exits": (1,), "prepare": lambda d: [], **given}
    return replay.Case(**fields)


def _outcome(replay, **given):
    fields = {"exit": 1, "seconds": 1.0, "stdout": "", "stderr": "trainscale: error: x\n"}
    return replay.Outcome(**{**fields, **given})


def test_a_failure_in_one_line_within_the_bound_passes(replay):
    assert replay.verdict(_case(replay), _outcome(replay)) == (True, "")


@pytest.mark.parametrize(
    ("case", "outcome", "why"),
    [
        ({}, {"exit": None, "seconds": 20.0}, "still going after 10s"),
        ({}, {"seconds": 10.5}, "still going after 10s"),
        ({}, {"exit": 0}, "exit 0, expected 1"),
        ({}, {"stderr": "a\nb\n"}, "2 stderr lines"),
        ({}, {"stderr": ""}, "0 stderr lines"),
        ({}, {"stderr": "Traceback (most recent call last):\n"}, "a traceback on stderr"),
        ({"stored": ("failed",)}, {"statuses": ["running"]}, "a run left 'running'"),
        ({"stored": None}, {"statuses": ["running"]}, "a run left 'running'"),
        ({"stored": ("failed",)}, {"statuses": []}, "stored [], expected ['failed']"),
        ({"text": "diverged"}, {}, "no 'diverged' in 'trainscale: error: x'"),
        ({"exits": (0,), "json": True}, {"exit": 0, "stdout": "hi\n{}"}, "not one JSON"),
    ],
)
def test_what_fails_a_case(replay, case, outcome, why):
    passed, said = replay.verdict(_case(replay, **case), _outcome(replay, **outcome))
    assert not passed and why in said


def test_what_a_case_may_expect(replay):
    # A run expected to stay running elsewhere; a success with a JSON document and noise on
    # stderr; a user's script whose own traceback ends in trainscale's line.
    running = _case(replay, exits=(0,), stored=("running",))
    assert replay.verdict(running, _outcome(replay, exit=0, statuses=["running"]))[0]
    ok = _case(replay, exits=(0,), json=True, stored=("completed",))
    done = _outcome(replay, exit=0, stdout='{"a": 1}\n', stderr="hi\n", statuses=["completed"])
    assert replay.verdict(ok, done)[0]
    script = _case(replay, max_lines=10, text="ConfigError: train.py")
    traced = "Traceback (most recent call last):\n  x\nConfigError: train.py line 2: y\n"
    assert replay.verdict(script, _outcome(replay, stderr=traced))[0]


def test_every_case_is_listed_once_with_a_bound(replay, capsys):
    names = [case.name for case in replay.CASES]
    assert len(names) == len(set(names)) and all(c.bound_s > 0 for c in replay.CASES)
    assert replay.main(["--list"]) == 0
    assert capsys.readouterr().out.count("\n") == len(names)
    with pytest.raises(SystemExit):
        replay.main(["--only", "no-such-case"])
