"""A command's own options are declared as run options are: a dataclass whose fields are
options (`option()`), whose docstrings are the help; config/cli.py makes the flags and reads
them back."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, dataclass, fields

import pytest

from trainscale.advisor.options import RecommendOptions
from trainscale.advisor.run import search_settings
from trainscale.advisor.search import DEFAULT_RUNG_STEPS
from trainscale.advisor.space import BATCH_MULTIPLIERS
from trainscale.benchmark.options import (
    DEFAULT_ROUNDS,
    DEFAULT_STEPS,
    QUICK_ROUNDS,
    QUICK_STEPS,
    BenchOptions,
)
from trainscale.config.cli import (
    add_declared_options,
    declared_from_args,
    field_docs,
    given_flags,
    refuse_given,
)
from trainscale.config.limits import DEFAULT_MONTE_CARLO_SAMPLES, MAX_MONTE_CARLO_SAMPLES
from trainscale.config.options import RunOptions, option, option_leaves
from trainscale.config.values import comma_names
from trainscale.emulation.options import (
    DEFAULT_LOCAL_STEPS,
    DEFAULT_STALENESS_SPREAD,
    EmulationOptions,
)
from trainscale.errors import ConfigError
from trainscale.probing.options import MAX_REPEATS, ProbeOptions
from trainscale.simulator.options import MonteCarloOptions, ScalingOptions, StepModelOptions


@dataclass(frozen=True)
class Toy:
    size: int = option(MISSING, metavar="N")
    """how many, >= 1"""
    names: tuple[str, ...] | None = option(None, parse=comma_names)
    """names by commas"""
    fast: bool = option(False)
    """go fast"""
    limit_s: float = option(2.0, flag="--limit")
    """seconds at most"""


def _parser(cls: type) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy", exit_on_error=False)
    add_declared_options(parser, cls)
    return parser


def test_declared_fields_parse_into_the_dataclass() -> None:
    args = _parser(Toy).parse_args(["--size", "3", "--names", "a, b", "--fast", "--limit", "5"])
    assert declared_from_args(Toy, args) == Toy(size=3, names=("a", "b"), fast=True, limit_s=5.0)
    assert declared_from_args(Toy, _parser(Toy).parse_args(["--size", "1"])) == Toy(size=1)


def test_a_field_without_a_default_is_a_required_option(capsys) -> None:
    with pytest.raises(SystemExit):
        _parser(Toy).parse_args([])
    assert "the following arguments are required: --size" in capsys.readouterr().err


def test_a_value_that_does_not_parse_is_argparses_one_line() -> None:
    with pytest.raises(argparse.ArgumentError, match="expected a whole number, got 'x'"):
        _parser(Toy).parse_args(["--size", "x"])


def test_the_help_is_the_field_docstring_with_its_default() -> None:
    text = _parser(Toy).format_help()
    assert "how many, >= 1" in text and "seconds at most (default: 2)" in " ".join(text.split())


@dataclass(frozen=True)
class Runs:
    ids: tuple[str, ...] = option((), metavar="ID", many=True)
    """runs, one or more"""
    per_worker: int | None = option(None, exclusive="batch")
    """one worker's batch"""
    overall: int | None = option(None, exclusive="batch")
    """the global batch"""


def test_a_many_valued_field_takes_the_values_after_its_flag() -> None:
    args = _parser(Runs).parse_args(["--ids", "a", "b", "--per-worker", "8"])
    assert declared_from_args(Runs, args) == Runs(ids=("a", "b"), per_worker=8)
    assert declared_from_args(Runs, _parser(Runs).parse_args([])) == Runs()


def test_fields_sharing_an_exclusive_name_are_mutually_exclusive() -> None:
    with pytest.raises(argparse.ArgumentError, match="not allowed with argument --per-worker"):
        _parser(Runs).parse_args(["--per-worker", "8", "--overall", "16"])


def test_the_flags_given_are_those_off_their_default() -> None:
    assert given_flags(StepModelOptions()) == []
    given = StepModelOptions(cluster="cpu-25gbe", precision="bf16", straggler_sigma=0.0)
    assert given_flags(given) == ["--cluster", "--precision", "--straggler-sigma"]
    assert given_flags(given, ["precision", "device"]) == ["--precision"]
    # The run's options, in groups, by flat name; a value equal to its default is not given.
    run = RunOptions.of("mnist-cnn", grad_accum=1, compile=True, workers=2)
    assert given_flags(run, ["grad_accum", "compile"]) == ["--compile"]
    with pytest.raises(ConfigError, match="^--compile is no good here$"):
        refuse_given(run, ["compile"], "is no good here")
    refuse_given(run, ["grad_accum"], "is never said")


COMMAND_OPTIONS = [
    ProbeOptions,
    EmulationOptions,
    RecommendOptions,
    BenchOptions,
    StepModelOptions,
    ScalingOptions,
    MonteCarloOptions,
]


@pytest.mark.parametrize("cls", COMMAND_OPTIONS)
def test_every_field_of_a_commands_options_is_an_option_with_help(cls: type) -> None:
    # Built by name (as bench() in Python takes them): a field order change breaks nothing.
    assert all(item.kw_only for item in fields(cls))
    docs = field_docs(cls)
    assert set(option_leaves(cls)) == {item.name for item in fields(cls)}
    assert all(docs.get(item.name) for item in fields(cls)), "a field without help"


def test_the_defaults_the_help_names_are_the_code_s() -> None:
    # Docstrings cannot interpolate: a default changed in code must change its help too.
    probe = " ".join(_parser(ProbeOptions).format_help().split())
    assert f"1 to {MAX_REPEATS}" in probe
    emulate = " ".join(_parser(EmulationOptions).format_help().split())
    assert f"(default: {DEFAULT_LOCAL_STEPS})" in emulate
    assert f"(default: {DEFAULT_STALENESS_SPREAD})" in emulate
    recommend = " ".join(_parser(RecommendOptions).format_help().split())
    assert f"(default: {','.join(map(str, DEFAULT_RUNG_STEPS))})" in recommend
    assert f"(default: {','.join(map(str, BATCH_MULTIPLIERS))};" in recommend
    assert "--quick 3" in recommend and "(default: 0.25; --quick 0.1)" in recommend
    bench = " ".join(_parser(BenchOptions).format_help().split())
    assert f"(default: {DEFAULT_STEPS}; --quick {QUICK_STEPS})" in bench
    assert f"(default: {DEFAULT_ROUNDS}; --quick {QUICK_ROUNDS})" in bench
    assert f"{QUICK_STEPS} steps a rung in {QUICK_ROUNDS} rounds" in bench
    monte_carlo = " ".join(_parser(MonteCarloOptions).format_help().split())
    assert f"1 to {MAX_MONTE_CARLO_SAMPLES:,} (default: {DEFAULT_MONTE_CARLO_SAMPLES})" in (
        monte_carlo
    )
    quick = search_settings(RecommendOptions(quick=True))
    assert (quick.warmup_steps, quick.accuracy_epochs) == (3, 0.1)
    assert search_settings(RecommendOptions()).accuracy_epochs == 0.25
