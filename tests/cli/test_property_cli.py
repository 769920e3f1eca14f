"""Property: whatever a user types, trainscale answers with exit 0 or 2 and never a traceback.

Hypothesis writes random command lines (each subcommand's own flags, found in its `--help`,
with hostile values: huge and negative numbers, NaN, empty strings, odd Unicode) and random
TOML files (sweep and cluster files built from their real keys, and raw text), and feeds them
to the command line. Commands that train or measure are stopped after their checks (a
stand-in handler resolves the run and returns), so one example costs milliseconds; the
commands that only read the store or compute run for real. A user mistake must cost exactly
one line on stderr and exit status 2.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.cli import run_cli
from tests.helpers.fuzz import fuzz_settings

FUZZ = fuzz_settings(60)

# No '/', '\\' or '.': a random path must stay inside the test's working directory.
SAFE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\.\x00"),
    max_size=12,
)
VALUES = st.one_of(
    st.integers(min_value=-(10**13), max_value=10**13).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "",
            "0",
            "-1",
            "1",
            "2",
            "nan",
            "inf",
            "-inf",
            "1e309",
            "0,1;2,3",
            "1,2,4",
            "x=y",
            "=",
            "-",
        ]
    ),
    SAFE_TEXT,
)
WORKLOADS = st.sampled_from(["mnist-cnn", "mnist-dbn", "tweets-text", "nosuch", ""])


def _flags(command: list[str]) -> list[str]:
    """The long options a (sub)command's --help lists."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run_cli([*command, "--help"]) == 0
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", out.getvalue())) - {"--help"})


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, an empty store, no data, no network, and stand-ins
    for the handlers of the commands that would train or measure."""
    from trainscale.cli import bench_cmd, emulate_cmd, probe_cmd, recommend_cmd, run_cmd
    from trainscale.data import cache
    from trainscale.errors import DataError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRAINSCALE_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINSCALE_DATA_DIR", raising=False)

    def offline(url: str, *args: object, **kwargs: object) -> Path:
        raise DataError(f"could not download {url} (offline in this test)")

    monkeypatch.setattr(cache, "download", offline)

    def resolve_only(args) -> int:
        from trainscale.config.cli import options_from_args
        from trainscale.runner.resolve import resolve

        resolve(options_from_args(args))
        return 0

    monkeypatch.setattr(run_cmd, "run", resolve_only)
    for module in (bench_cmd, emulate_cmd, probe_cmd, recommend_cmd):
        monkeypatch.setattr(module, "run", lambda args: 0)
    return tmp_path


def _assert_clean(code: int, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    err = capsys.readouterr().err
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        errors = [line for line in lines if "warning:" not in line]
        assert len(errors) == 1, (argv, err)


@pytest.mark.parametrize("odd", ["\x1e", "\x1b[2J", "a\u2028b", "line\nbreak"])
def test_odd_characters_in_an_error_stay_on_one_line(
    odd: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Record separators, escape sequences and line breaks a user pasted are escaped, not
    # passed to the terminal, both in argparse's errors and in trainscale's own.
    for argv in (["recipes", "--bogus", odd], ["run", odd, "--steps", "5"]):
        assert run_cli(argv) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1, (argv, err)
        assert "\x1b" not in err


COMMANDS = [
    ["run"],
    ["bench"],
    ["runs", "list"],
    ["runs", "show"],
    ["runs", "export"],
    ["runs", "sweeps"],
    ["runs", "probes"],
    ["runs", "import"],
    ["runs", "delete"],
    ["sweep"],
    ["compare"],
    ["recommend"],
    ["report"],
    ["probe"],
    ["emulate"],
    ["simulate"],
    ["predict-time-to-accuracy"],
    ["workloads"],
    ["recipes"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c))
def test_random_command_lines_end_in_one_line_or_success(
    command: list[str], sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = _flags(command)
    capsys.readouterr()

    @FUZZ
    @given(
        positional=st.lists(WORKLOADS, max_size=2),
        pairs=st.lists(st.tuples(st.sampled_from(flags), VALUES), max_size=4),
        bare=st.lists(st.sampled_from(flags), max_size=2),
    )
    def check(positional: list[str], pairs: list[tuple[str, str]], bare: list[str]) -> None:
        argv = [*command, *positional]
        for flag, value in pairs:
            argv += [flag, value] if not value.startswith("-") else [f"{flag}={value}"]
        argv += bare
        _assert_clean(run_cli(argv), capsys, argv)

    check()


# -- TOML files ------------------------------------------------------------------------------

KEYS = st.sampled_from(
    [
        "name", "repeats", "order", "seed", "skip_invalid", "base", "grid", "points",
        "workload", "workers", "threads_per_worker", "data", "steps", "batch_size",
        "evaluate", "affinity", "precision", "label", "nodes", "devices_per_node",
        "device", "kind", "peak_flops", "efficiency", "alpha", "bandwidth", "intra_node",
        "inter_node", "communication", "algorithm", "overlap", "cores", "source",
    ]
)  # fmt: skip
SCALARS = st.one_of(
    st.integers(min_value=-(10**13), max_value=10**13),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(["mnist-cnn", "synthetic", "real", "5 us", "100 Gb/s", "1 TFLOP/s", "cpu"]),
    SAFE_TEXT,
)
TOML_DOCS = st.recursive(
    st.dictionaries(KEYS, SCALARS, max_size=5),
    lambda inner: st.dictionaries(
        KEYS, st.one_of(SCALARS, inner, st.lists(SCALARS, max_size=3)), max_size=5
    ),
    max_leaves=20,
)
RAW_TEXT = st.text(alphabet=string.printable, max_size=200)


def _toml_bodies():
    return st.one_of(TOML_DOCS.map(tomli_w.dumps).map(str.encode), RAW_TEXT.map(str.encode))


@pytest.mark.parametrize("kind", ["sweep", "cluster"])
def test_random_toml_files_end_in_one_line_or_success(
    kind: str, sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = sandbox / f"{kind}.toml"

    @FUZZ
    @given(body=_toml_bodies())
    def check(body: bytes) -> None:
        path.write_bytes(body)
        if kind == "sweep":
            argv = ["sweep", str(path), "--dry-run"]
        else:
            argv = ["simulate", "mnist-cnn", "--cluster", str(path), "--workers", "1,2"]
        _assert_clean(run_cli(argv), capsys, argv)

    check()
