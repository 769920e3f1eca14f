"""The command line stays thin: each module parses, calls one library function and prints;
run options and shared arguments are declared once."""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import trainscale.cli
from trainscale.cli import build_parser
from trainscale.config.cli import DECLARED, leaf_flag
from trainscale.config.options import RunOptions
from trainscale.results.store import RunStore

from tests.helpers.stored_runs import add_run

CLI_DIR = Path(trainscale.cli.__file__).parent
MAX_LINES = 150
"""Every module of cli/ (none is excepted): more means domain code has crept in."""

SHARED_FLAGS = ("--store", "--json", "--quiet", "--plot", "--data")
"""Arguments several commands take, declared once in cli/common.py (the simulator's shared
options, --cluster and --samples among them, are declared in simulator/options.py)."""

OWN_MEANING = {
    ("bench", "--workload"): "the workload (a positional argument of `run`)",
    ("runs list", "--workload"): "a filter of the stored runs",
    ("runs export", "--workload"): "a filter of the stored runs",
    ("runs delete", "--workload"): "a filter of the stored runs",
    ("bench", "--data"): "auto | real | synthetic: real data when found (runner/data_choice.py)",
    ("bench", "--steps"): "a rung's steps over all its rounds (BenchOptions)",
    ("recommend", "--data"): "the same choice, for the accuracy check",
    ("recommend", "--warmup-steps"): "warm-up of each trial; its default follows --quick",
    ("emulate", "--workers"): "a list of worker counts, one emulated run each",
    ("simulate", "--device"): "the device of the 'local' cluster: no 'auto'",
    ("simulate", "--precision"): "the predicted training's: no 'auto' (simulator/options.py)",
    ("simulate", "--batch-size"): "the predicted per-worker batch (simulator/options.py)",
    ("simulate", "--global-batch-size"): "the predicted global batch (simulator/options.py)",
    ("simulate", "--bucket-cap-mb"): "the predicted DDP buckets (simulator/options.py)",
    ("predict-time-to-accuracy", "--precision"): "as in simulate",
    ("simulate", "--threads-per-worker"): "cores of a 'local' cluster's worker",
    ("simulate", "--seed"): "the Monte Carlo seed",
    ("simulate", "--tag"): "a filter of the runs to validate",
    ("simulate", "--workers"): "a list of worker counts to predict",
    ("probe", "--device"): "what to probe (not where a run trains)",
    ("probe", "--workers"): "all-reduce processes of the probe",
    ("probe", "--allow-oversubscribe"): "more all-reduce processes than cores",
    ("probe", "--timeout"): "how long an all-reduce of the probe may wait (default 120 s)",
    ("predict-time-to-accuracy", "--device"): "as in simulate",
    ("predict-time-to-accuracy", "--threads-per-worker"): "as in simulate",
    ("predict-time-to-accuracy", "--seed"): "as in simulate",
    ("compare", "--seed"): "the bootstrap seed",
    ("runs list", "--tag"): "a filter of the stored runs",
    ("runs export", "--tag"): "a filter of the stored runs",
    ("runs delete", "--tag"): "a filter of the stored runs",
    ("report", "--tag"): "the runs to report, by the tag they were stored with",
}
"""Flags spelled like a run option that mean something else in one command (and why)."""


def _modules() -> list[Path]:
    return sorted(CLI_DIR.glob("*.py"))


@pytest.mark.parametrize("module", _modules(), ids=lambda path: path.name)
def test_every_cli_module_is_at_most_150_lines(module: Path) -> None:
    lines = len(module.read_text().splitlines())
    assert lines <= MAX_LINES, f"cli/{module.name} has {lines} lines (at most {MAX_LINES})"


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its name: 'run', 'runs list', ..."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
        if prefix:
            found[prefix] = parser

    walk(build_parser(), "")
    return found


def test_run_options_come_from_their_declarations() -> None:
    flags = {leaf_flag(leaf): key for key, leaf in RunOptions.flat_fields().items()}
    by_hand = [
        (name, flag)
        for name, parser in _commands().items()
        for action in parser._actions
        for flag in action.option_strings
        if flag in flags
        and (name, flag) not in OWN_MEANING
        and action.dest not in set(parser.get_default(DECLARED) or ())
    ]
    assert not by_hand, f"run options declared by hand: {by_hand}"
    commands = _commands()
    for name, flag in OWN_MEANING:  # the exceptions still exist (the list is not stale)
        assert any(flag in a.option_strings for a in commands[name]._actions), (name, flag)


@pytest.mark.parametrize("flag", SHARED_FLAGS)
def test_shared_arguments_are_declared_once_in_common(flag: str) -> None:
    pattern = re.compile(rf"""add_argument\(\s*["']{re.escape(flag)}["']""")
    declaring = [m.name for m in _modules() if pattern.search(m.read_text())]
    assert declaring == ["common.py"], (flag, declaring)


HEAVY_AT_HELP = (
    "torch",
    "matplotlib",
    "pandas",
    "scipy",
    "tensorflow",
    "jax",
    "mlflow",
    "tensorboard",
)
"""Packages `trainscale --help` never loads: the modules it imports keep their imports of
these inside the functions that need them (the allow-list of ruff's PLC0415 in
pyproject.toml)."""


def test_help_loads_no_heavy_package() -> None:
    code = (
        "import contextlib, io, sys\n"
        "from trainscale.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        f"loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY_AT_HELP!r}))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_console_script_imports_no_command_until_it_runs() -> None:
    # Each spawned worker re-runs the console script's imports (trainscale/command.py).
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="trainscale")
    assert script.value == "trainscale.command:main"
    code = (
        "import sys, trainscale.command\n"
        "print(sorted(m for m in sys.modules if m.startswith('trainscale')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    # And the cores the process may use, read before torch can narrow them (stdlib only).
    assert done.stdout.strip() == (
        "['trainscale', 'trainscale.command', 'trainscale.hardware', "
        "'trainscale.hardware.start_affinity']"
    )


def test_ctrl_c_while_the_command_line_loads_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import trainscale.cli
    from trainscale import command

    def interrupted() -> int:
        raise KeyboardInterrupt  # as Ctrl-C in an import or the parser, before a handler

    monkeypatch.setattr(trainscale.cli, "main", interrupted)
    assert command.main() == 130
    assert capsys.readouterr().err == "trainscale: interrupted (SIGINT)\n"


STORE_READERS = (
    ["runs", "list"],
    ["runs", "show", "aaaa"],
    ["runs", "sweeps"],
    ["runs", "probes"],
    ["runs", "export", "--format", "json"],
    ["runs", "delete", "--tag", "none", "--dry-run"],
    ["compare", "aaaa", "bbbb"],
    ["runs", "import", "{source}"],
)
"""Commands that only read and write the store: none loads torch (over a second of a
command's start on a small machine), nor the plotting and data-frame libraries."""


def test_commands_of_the_store_load_no_heavy_package(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        for run_id in ("aaaa00000001", "bbbb00000001"):
            add_run(store, run_id)
            store.complete_run(run_id, {"samples_per_s": 1.0}, [], [0.1] * 30)
    RunStore(tmp_path / "other.db").close()
    commands = [
        [word.format(source=tmp_path / "other.db") for word in argv]
        + ["--store", str(tmp_path / "s.db")]
        for argv in STORE_READERS
    ]
    code = (
        "import contextlib, io, sys\n"
        "from trainscale.cli import main\n"
        f"for argv in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main(argv) == 0, argv\n"
        f"loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY_AT_HELP!r}))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _json_writers(source: str) -> list[str]:
    """The calls of json.dump / json.dumps in a module's source."""
    return [
        ast.unparse(node.func)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("dump", "dumps")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "json"
    ]


def test_every_json_output_is_printed_by_print_json() -> None:
    # One place writes --json, strictly: no command prints NaN, which JSON does not have.
    writing = {m.name: _json_writers(m.read_text()) for m in _modules() if m.name != "lines.py"}
    assert not {name: calls for name, calls in writing.items() if calls}
    assert _json_writers("import json\nprint(json.dumps({}))\n") == ["json.dumps"]  # can fail


def test_print_json_writes_strict_json(capsys: pytest.CaptureFixture[str]) -> None:
    from trainscale.cli.lines import print_json

    print_json({"loss": float("nan"), "rates": (1.5, float("inf"))})
    assert json.loads(capsys.readouterr().out) == {"loss": None, "rates": [1.5, None]}
