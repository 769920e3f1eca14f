"""Replay the hardening cases: the ways a user, a workload or the machine has broken
trainscale, each run again end to end and checked.

Every case runs in a fresh subprocess of the installed `trainscale` command (or a Python
script calling the API) in a temporary directory with a store of its own, and must end
within its bound, with the right exit status, exactly one line on stderr when it fails (a
clean `--json` document on stdout when it succeeds), and no result lost or left `running`
in the store. The table printed shows each case's bound, seconds, exit status, stderr lines
and verdict.

    python benchmarks/replay_hardening.py                    # every case (a few minutes)
    python benchmarks/replay_hardening.py --list
    python benchmarks/replay_hardening.py --only nan-loss,out-empty --json replay.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TS = [sys.executable, "-m", "trainscale"]
SHORT = ["--data", "synthetic", "--steps", "6", "--no-eval", "--quiet"]
RUN_BOUND_S = 60.0  # a 6-step run takes seconds, tens on a loaded machine
LOAD_BOUND_S = 30.0  # refused while loading the workload: nothing trains
READ_BOUND_S = 20.0  # read commands and refused options
TINY = "from tests.helpers.custom_workloads import tiny_workload as t; from pathlib import Path"


@dataclass(frozen=True)
class Case:
    """One reproduction: `prepare(dir)` writes its files and returns the command line."""

    name: str
    bound_s: float
    exits: tuple[int, ...]
    prepare: Callable[[Path], list[str]]
    stored: tuple[str, ...] | None = ()  # the statuses the store must hold; None: any
    max_lines: int = 1  # stderr lines allowed when it fails
    text: str = ""  # what the last stderr line (or the JSON document) must contain
    json: bool = False  # a success prints one JSON document on stdout
    during: Callable[[Path, subprocess.Popen[str]], None] | None = None
    needs: Callable[[], str | None] = lambda: None  # why it is skipped here, else None
    env: tuple[tuple[str, str], ...] = ()  # environment settings of the reproduction


@dataclass
class Outcome:
    """What a case did."""

    exit: int | None  # None: killed at its bound
    seconds: float
    stdout: str
    stderr: str
    statuses: list[str] = field(default_factory=list)


def verdict(case: Case, outcome: Outcome) -> tuple[bool, str]:
    """(passed, why not): the checks every case answers to."""
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    if outcome.exit is None or outcome.seconds > case.bound_s:
        return False, f"still going after {case.bound_s:.0f}s"
    if outcome.exit not in case.exits:
        return False, f"exit {outcome.exit}, expected {'/'.join(map(str, case.exits))}"
    if "running" in outcome.statuses and (case.stored is None or "running" not in case.stored):
        return False, "a run left 'running'"
    if case.stored is not None and sorted(outcome.statuses) != sorted(case.stored):
        return False, f"stored {outcome.statuses}, expected {list(case.stored)}"
    if outcome.exit == 0:
        if case.json:
            try:
                json.loads(outcome.stdout)
            except ValueError:
                return False, "stdout is not one JSON document"
        if case.text and case.text not in outcome.stdout + outcome.stderr:
            return False, f"no {case.text!r} in the output"
        return True, ""
    if "Traceback" in outcome.stderr and case.max_lines == 1:
        return False, "a traceback on stderr"
    if not 1 <= len(lines) <= case.max_lines:
        return False, f"{len(lines)} stderr lines"
    if case.text and case.text not in lines[-1]:
        return False, f"no {case.text!r} in {lines[-1]!r}"
    return True, ""


# -- reproductions -----------------------------------------------------------------------


def _helper(directory: Path, code: str) -> None:
    """Run setup `code` (which may use the test helpers) with `directory` as `d`."""
    script = f"from pathlib import Path\nd = Path({str(directory)!r})\n{code}"
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=120)


def _workload(directory: Path, forward: str = "return self.fc(x)", head: str = "") -> str:
    """A tiny custom workload file (the tests' own), `head` before it; its reference."""
    _helper(
        directory,
        f"{TINY}\np = t(d, 'replay', forward={forward!r})\np.write_text({head!r} + p.read_text())",
    )
    return f"{directory / 'replay_workload.py'}:make_workload"


def _run(directory: Path, reference: str, *extra: str) -> list[str]:
    store = str(directory / "store.db")
    return [*TS, "run", reference, "--steps", "6", "--no-eval", "--quiet", *extra, "--store", store]


def _report_store(directory: Path) -> None:
    _helper(
        directory,
        "from tests.helpers.report_store import build_store, cpu_parallel_configs\n"
        "build_store(d / 'store.db', cpu_parallel_configs())",
    )


def _root_with(*tools: str) -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    missing = [tool for tool in tools if shutil.which(tool) is None]
    return f"needs {', '.join(missing)}" if missing else None


def _read_only(directory: Path, command: list[str]) -> list[str]:
    """`command` with the store's folder mounted read-only (root), else made read-only."""
    folder = directory / "ro"
    folder.mkdir()
    _report_store(folder)
    command = [str(folder / "store.db") if part == "STORE" else part for part in command]
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        folder.chmod(0o555)
        return command
    mount = f'mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} && exec "$@"'
    return ["unshare", "--mount", "sh", "-c", mount, "sh", *command]


def _other_namespace(directory: Path) -> list[str]:
    _helper(
        directory,
        "import dataclasses, subprocess, sys\n"
        "from trainscale.results.owner import current_owner\n"
        "from trainscale.results.store import RunStore\n"
        "from tests.helpers.owned_runs import create_owned_run\n"
        "me = current_owner(); gone = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
        "gone.wait()\n"
        "other = dataclasses.replace(me, pid=gone.pid, pid_ns=(me.pid_ns or 0) + 1)\n"
        "with RunStore(d / 'store.db') as s: create_owned_run(s, 'container0000', other)",
    )
    return [*TS, "runs", "list", "--store", str(directory / "store.db")]


def _delete_store(directory: Path, process: subprocess.Popen[str]) -> None:
    """Once the run is stored as running, remove its store."""
    store = directory / "store.db"
    deadline = time.monotonic() + RUN_BOUND_S
    while time.monotonic() < deadline and process.poll() is None:
        if store.exists() and _statuses(store) == ["running"]:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{store}{suffix}").unlink(missing_ok=True)
            return
        time.sleep(0.05)


_HELD: list[socket.socket] = []


def _unreachable_mlflow(directory: Path) -> list[str]:
    _report_store(directory)
    closed = socket.socket()  # bound, never listening: connections are refused
    closed.bind(("127.0.0.1", 0))
    _HELD.append(closed)
    uri = f"http://127.0.0.1:{closed.getsockname()[1]}"
    store = str(directory / "store.db")
    return [*TS, "runs", "export", "--format", "mlflow", "--store", store, "--tracking-uri", uri]


def _emulate_chatty(directory: Path) -> list[str]:
    """`emulate --json` trains in the command's own process: what the workload prints there
    must not reach stdout."""
    reference = _workload(directory, "print('from forward'); return self.fc(x)", "print('hi')\n")
    options = ["--workers", "1", "--mode", "sync", "--steps", "3", "--json"]
    return [*TS, "emulate", reference, *options, "--store", str(directory / "store.db")]


def _postgres_export(directory: Path) -> list[str]:
    """An export to a PostgreSQL URI (with a password) whose driver is not installed."""
    _report_store(directory)
    uri = "postgresql://user:s3cret@127.0.0.1:1/db"
    store = str(directory / "store.db")
    return [*TS, "runs", "export", "--format", "mlflow", "--store", store, "--tracking-uri", uri]


def _needs(module: str, extra: str) -> Callable[[], str | None]:
    """Why a case is skipped here: `module` (of the `extra`) is not installed."""
    return lambda: None if importlib.util.find_spec(module) else f"needs the {extra} extra"


def _no_postgres_driver() -> str | None:
    if any(importlib.util.find_spec(name) for name in ("psycopg", "psycopg2")):
        return "a PostgreSQL driver is installed"
    return _has_mlflow()


def _has_mlflow() -> str | None:
    try:
        import mlflow  # noqa: F401
    except ImportError:
        return "needs the mlflow extra"
    return None


EXIT_IMPORT = "import sys\nsys.exit(0)\n"
THREAD = "import threading, time\nthreading.Thread(target=time.sleep, args=(600,)).start()\n"
ATEXIT = "import atexit, time\natexit.register(time.sleep, 600)\n"
API_SCRIPT = (
    'import trainscale\ntrainscale.run("mnist-cnn", data="synthetic", steps=6, evaluate=False)\n'
)


def _factory_exit(directory: Path) -> list[str]:
    reference = _workload(directory)
    path = directory / "replay_workload.py"
    text = path.read_text().replace("def make_workload():\n", "def make_workload():\n    exit(3)\n")
    path.write_text(text)
    return _run(directory, reference)


def _api_script(directory: Path) -> list[str]:
    (directory / "train.py").write_text(API_SCRIPT)
    return [sys.executable, "train.py"]


def _notes(directory: Path) -> list[str]:
    (directory / "notes.txt").write_bytes(b"x")
    return [*TS, "runs", "list", "--store", str(directory / "notes.txt")]


RUN_MNIST = [*TS, "run", "mnist-cnn", *SHORT, "--json"]

CASES = [
    Case("pid-1-namespace", RUN_BOUND_S, (0,), lambda d: ["unshare", "--pid", "--fork",
         "--mount-proc", *RUN_MNIST, "--store", str(d / "store.db")], ("completed",),
         json=True, needs=lambda: _root_with("unshare")),
    Case("other-pid-namespace", READ_BOUND_S, (0,), _other_namespace, ("running",),
         text="running on"),
    Case("sys-exit-forward", RUN_BOUND_S, (1,), lambda d: _run(d, _workload(
         d, "import sys; sys.exit(0)")), ("failed",), text="sys.exit(0)"),
    Case("sys-exit-import", LOAD_BOUND_S, (2,), lambda d: _run(d, _workload(d, head=EXIT_IMPORT)),
         text="sys.exit(0)"),
    Case("sys-exit-factory", LOAD_BOUND_S, (2,), _factory_exit, text="sys.exit(3)"),
    Case("builtins-exit", LOAD_BOUND_S, (2,), lambda d: _run(d, "builtins:exit"),
         text="builtins:exit raised SystemExit"),
    Case("os-exit-forward", RUN_BOUND_S, (1,), lambda d: _run(d, _workload(
         d, "import os; os._exit(0)")), ("failed",)),
    Case("thread-at-import", 30.0, (0,), lambda d: _run(d, _workload(d, head=THREAD), "--json"),
         ("completed",), json=True),
    Case("atexit-sleep", 30.0, (0,), lambda d: _run(d, _workload(d, head=ATEXIT), "--json"),
         ("completed",), json=True),
    Case("read-only-list", READ_BOUND_S, (0,), lambda d: _read_only(d, [*TS, "runs", "list",
         "--store", "STORE"]), None, text="completed"),
    Case("read-only-report", READ_BOUND_S, (0,), lambda d: _read_only(d, [*TS, "report",
         "--sweep", "5eed", "--out", str(d / "out"), "--store", "STORE"]), None),
    Case("nan-loss", RUN_BOUND_S, (1,), lambda d: _run(d, _workload(
         d, "return self.fc(x) * float('nan')")), ("failed",), text="diverged"),
    Case("store-deleted", RUN_BOUND_S * 2, (1,), lambda d: [*TS, "run", "mnist-cnn",
         "--data", "synthetic", "--steps", "600", "--no-eval", "--quiet", "--json", "--store",
         str(d / "store.db")], None, text="was deleted", during=_delete_store),
    Case("print-run-json", RUN_BOUND_S, (0,), lambda d: _run(d, _workload(
         d, "print('from forward'); return self.fc(x)", "print('hi')\n"), "--json"),
         ("completed",), json=True),
    Case("print-emulate-json", RUN_BOUND_S, (0,), _emulate_chatty, ("completed",), json=True),
    Case("user-code-error", RUN_BOUND_S, (1,), lambda d: _run(d, _workload(
         d, "return self.fc(x[:, :3])")), ("failed",), text="mat1 and mat2"),
    Case("out-empty", READ_BOUND_S, (2,), lambda d: [*TS, "report", "--runs", "abc", "--out",
         "", "--store", str(d / "store.db")], text="--out"),
    Case("experiment-empty", READ_BOUND_S, (2,), lambda d: [*TS, "runs", "export", "--format",
         "mlflow", "--experiment", "", "--store", str(d / "store.db")], text="--experiment"),
    Case("tracking-uri-memory", READ_BOUND_S, (2,), lambda d: [*TS, "runs", "export",
         "--format", "mlflow", "--tracking-uri", "sqlite://", "--store", str(d / "store.db")],
         text="in-memory database"),
    Case("notes-as-store", READ_BOUND_S, (2,), _notes, text="is not a trainscale results store"),
    Case("simulate-plot-proc", READ_BOUND_S, (2,), lambda d: [*TS, "simulate",
         "--validate-published", "--plot", "/proc/nope"], text="cannot create /proc/nope"),
    Case("api-script-no-guard", RUN_BOUND_S, (1,), _api_script, max_lines=10,
         text="ConfigError: train.py line 2: "),
    # Two lines: the notice that the command waits for the server (and how long at most),
    # then the one-line error.
    Case("postgres-no-driver", READ_BOUND_S, (2,), _postgres_export, None, text="user:***@",
         needs=_no_postgres_driver),
    # XLA prints its own message before the run's line, which points at it.
    Case("xla-flags-unknown", RUN_BOUND_S, (1,), lambda d: [*TS, "run", "mnist-cnn",
         "--framework", "jax", *SHORT, "--store", str(d / "store.db")], ("failed",),
         max_lines=4, text="while starting JAX's XLA backend", needs=_needs("jax", "jax"),
         env=(("XLA_FLAGS", "--xla_no_such_flag"),)),
    Case("tf-proxy-upper-no-proxy", RUN_BOUND_S * 2, (0,), lambda d: [*TS, "run", "mnist-cnn",
         "--framework", "tensorflow", "--workers", "2", *SHORT, "--json", "--store",
         str(d / "store.db")], ("completed",), json=True,
         needs=_needs("tensorflow", "tensorflow"),
         env=(("http_proxy", "http://127.0.0.1:9"), ("NO_PROXY", "127.0.0.1,localhost"))),
    Case("mlflow-unreachable", 35.0, (2,), _unreachable_mlflow, None, max_lines=2,
         text="cannot use the MLflow tracking store", needs=_has_mlflow),
]  # fmt: skip


# -- running -----------------------------------------------------------------------------


def _statuses(store: Path) -> list[str]:
    """The status of every run in `store`; [] when there is none or it is no store."""
    if not store.is_file() or store.stat().st_size == 0:
        return []
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return [row[0] for row in db.execute("SELECT status FROM runs")]
    except sqlite3.DatabaseError:
        return []


def replay(case: Case) -> Outcome:
    """Run `case` in a temporary directory of its own, killed at twice its bound."""
    with tempfile.TemporaryDirectory(prefix=f"replay-{case.name}-") as name:
        directory = Path(name)
        argv = case.prepare(directory)
        env = {
            **os.environ,
            "HOME": str(directory / "home"),
            "TRAINSCALE_CACHE_DIR": str(directory / "cache"),
            "TRAINSCALE_STORE": str(directory / "trainscale.db"),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        for setting in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
            env.pop(setting, None)  # MLflow's own would retry for minutes
        for setting in ("http_proxy", "https_proxy", "no_proxy", "NO_PROXY", "XLA_FLAGS"):
            env.pop(setting, None)  # only the reproduction's own
        env.update(case.env)
        started = time.monotonic()
        process = subprocess.Popen(
            argv, cwd=directory, env=env, text=True, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        if case.during is not None:
            case.during(directory, process)
        try:
            out, err = process.communicate(timeout=case.bound_s * 2)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            code = None
        seconds = time.monotonic() - started
        statuses = _statuses(directory / "store.db") + _statuses(directory / "trainscale.db")
        while _HELD:
            _HELD.pop().close()
        for folder in directory.rglob("*"):  # a read-only copy must still be removed
            if folder.is_dir():
                folder.chmod(0o755)
        return Outcome(code, seconds, out, err, statuses)


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    """Replay the chosen cases, print the table and the counts; exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--list", action="store_true", help="list the cases and their bounds")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the rows as JSON")
    args = parser.parse_args(argv)
    by_name = {case.name: case for case in CASES}
    if args.list:
        for case in CASES:
            print(f"{case.name:22} {case.bound_s:5.0f}s  exit {'/'.join(map(str, case.exits))}")
        return 0
    names = args.only.split(",") if args.only else list(by_name)
    unknown = [name for name in names if name not in by_name]
    if unknown:
        parser.error(f"no case {', '.join(unknown)}; --list shows them")
    rows = []
    print(f"{'case':22} {'bound':>6} {'seconds':>8} {'exit':>5} {'lines':>5}  verdict")
    for name in names:
        case = by_name[name]
        skipped = case.needs()
        if skipped:
            row = {"case": name, "bound_s": case.bound_s, "seconds": None, "exit": None,
                   "lines": None, "verdict": "skipped", "why": skipped}  # fmt: skip
        else:
            outcome = replay(case)
            passed, why = verdict(case, outcome)
            lines = len([line for line in outcome.stderr.splitlines() if line.strip()])
            row = {"case": name, "bound_s": case.bound_s, "seconds": round(outcome.seconds, 1),
                   "exit": outcome.exit, "lines": lines, "verdict": "pass" if passed else "FAIL",
                   "why": why, "outcome": asdict(outcome)}  # fmt: skip
        rows.append(row)
        print(f"{name:22} {case.bound_s:5.0f}s {_cell(row['seconds']):>8} "
              f"{_cell(row['exit']):>5} {_cell(row['lines']):>5}  {row['verdict']} {row['why']}",
              flush=True)  # fmt: skip
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("pass", "FAIL", "skipped")}
    print(f"{counts['pass']} passed, {counts['FAIL']} failed, {counts['skipped']} skipped")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "counts": counts}, indent=2))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
