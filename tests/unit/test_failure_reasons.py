"""The one line a failed multi-worker run is stored with: which worker started it, what it
said, and for a worker that left no Python error, how it died and what it was doing."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest

from trainscale.parallel import breadcrumbs
from trainscale.parallel.failure_reasons import detail, first_failure, root_failure
from trainscale.runner.failure_log import save_traceback

TF_TIMEOUT = """DeadlineExceededError: Graph execution error:

Detected at node CollectiveReduceV2 defined at (most recent call last):
  File "trainscale/frameworks/tensorflow/step.py", line 80, in step

Collective ops is aborted by: Collective ops timed out after 15 seconds
The error could be from a previous operation. Restart your program to reset.
Additional GRPC error information from remote target /job:worker/replica:0/task:1:
\t [[{{node CollectiveReduceV2}}]] [Op:__inference_step_1234]"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Phase notes and tracebacks go to a cache of the test's own."""
    monkeypatch.setenv("TRAINSCALE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


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


def died(exitcode: int, message: str, pid: int = 4321) -> SimpleNamespace:
    """A launcher error whose only worker, rank 1, left no error file (torch's own message)."""
    failure = SimpleNamespace(timestamp=5, message=message, pid=pid, exitcode=exitcode)
    return SimpleNamespace(failures={1: failure})


def note(monkeypatch, phase: str, source: str, pid: int = 4321, rank: int = 1) -> None:
    """Note `phase` as worker `rank` of process `pid` would."""
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "trainscale-abc")
    monkeypatch.setattr(os, "getpid", lambda: pid)
    breadcrumbs.note_phase(phase, source)


def test_within_one_second_the_cause_wins_over_the_peer_that_lost_it():
    error = failed(
        rank_0=(50, "JaxRuntimeError: Gloo all-reduce failed: Connection reset by peer"),
        rank_1=(50, "RuntimeError: injected crash on rank 1 at step 2"),
    )
    assert root_failure(error)[0] == 1
    assert first_failure(error).endswith("RuntimeError: injected crash on rank 1 at step 2")


def test_the_cause_wins_even_when_the_peer_that_lost_it_is_stamped_a_second_earlier():
    # Seen in a JAX run: the crashed worker wrote its error file after its peer's
    # collective had already failed on the closed connection.
    error = failed(
        rank_0=(49, "JaxRuntimeError: UNKNOWN: Gloo all-reduce failed: Connection reset by peer"),
        rank_1=(50, "RuntimeError: injected crash on rank 1 at step 2"),
    )
    assert root_failure(error)[0] == 1


def test_among_own_errors_the_earliest_wins():
    error = failed(rank_0=(51, "ValueError: later"), rank_1=(50, "RuntimeError: boom"))
    assert root_failure(error)[0] == 1


def test_when_every_worker_lost_a_peer_the_earliest_is_told():
    error = failed(
        rank_0=(50, "RuntimeError: Connection closed by peer"),
        rank_1=(49, "RuntimeError: Broken pipe"),
    )
    assert root_failure(error)[0] == 1


def test_ties_without_a_cause_go_to_the_lowest_rank():
    error = failed(rank_2=(7, "ValueError: a"), rank_1=(7, "ValueError: b"))
    assert root_failure(error)[0] == 1


def test_a_tensorflow_timeout_is_told_by_its_informative_line_not_the_node_name():
    assert detail({"message": {"message": TF_TIMEOUT}}) == (
        "DeadlineExceededError: Collective ops is aborted by: "
        "Collective ops timed out after 15 seconds"
    )


def test_a_one_line_error_and_a_comm_hook_error_keep_their_line():
    assert detail("ValueError: bad shape") == "ValueError: bad shape"
    assert detail("RuntimeError: hook failed\nAt:\n  step.py(3): f") == "RuntimeError: hook failed"


def test_a_worker_killed_by_a_signal_says_what_it_was_doing(monkeypatch):
    flags = "XLA_FLAGS='--xla_cpu_collective_timeout_seconds=15'"
    note(monkeypatch, "joining jax.distributed (2 processes)", "XLA")
    note(monkeypatch, f"training (JAX's step and collectives, {flags})", "XLA")

    reason = first_failure(died(-signal.SIGABRT, "Signal 6 (SIGABRT) received by PID 4321"))

    assert reason == (
        "worker rank 1 (pid 4321) failed: killed by SIGABRT while training (JAX's step and "
        f"collectives, {flags}); XLA's own message is in the output above"
    )


def test_an_exit_status_without_a_python_error_says_what_the_worker_was_doing(monkeypatch):
    note(monkeypatch, "starting JAX's XLA backend (XLA_FLAGS='--xla_no_such_flag')", "XLA")

    reason = first_failure(died(1, "To enable traceback see: https://pytorch.org/docs/x"))

    assert reason == (
        "worker rank 1 (pid 4321) failed: exit code 1 while starting JAX's XLA backend "
        "(XLA_FLAGS='--xla_no_such_flag'); XLA's own message is in the output above"
    )


@pytest.mark.parametrize(
    ("exitcode", "told"),
    [(-9, "killed by SIGKILL"), (-99, "killed by signal 99"), (3, "exit code 3")],
)
def test_without_a_note_a_death_is_told_by_its_signal_name_or_status(monkeypatch, exitcode, told):
    note(monkeypatch, "training", "XLA", pid=1)  # another process's note: not this one's

    assert first_failure(died(exitcode, "")) == f"worker rank 1 (pid 4321) failed: {told}"


def test_a_finished_worker_leaves_no_note_and_a_process_not_launched_writes_none(
    monkeypatch, cache
):
    note(monkeypatch, "training", "TensorFlow")
    assert breadcrumbs.noted_phase(1, 4321) == ("training", "TensorFlow")
    breadcrumbs.clear_phase()
    assert breadcrumbs.noted_phase(1, 4321) is None

    monkeypatch.delenv("RANK")
    breadcrumbs.note_phase("training")
    assert not list((cache / breadcrumbs.FOLDER).glob("*.phase"))


def test_saving_a_traceback_prunes_old_and_surplus_files(cache):
    folder = cache / breadcrumbs.FOLDER
    folder.mkdir(parents=True)
    now = time.time()
    for index in range(breadcrumbs.KEEP_NEWEST + 5):  # the newest have the lowest index
        path = folder / f"run-r{index}-rank-0.txt"
        path.write_text("Traceback")
        os.utime(path, (now - index * 60, now - index * 60))
    old_note = folder / "launch-x-rank-0-pid-1.phase"
    old_note.write_text("training\n\n")
    os.utime(old_note, (now - 31 * 86400, now - 31 * 86400))
    (folder / "run-r3-rank-0.txt").touch()
    os.utime(folder / "run-r3-rank-0.txt", (now - 40 * 86400, now - 40 * 86400))
    keep = folder / "notes.md"  # not ours: never touched
    keep.write_text("mine")

    saved = save_traceback(ValueError("boom"), "new", 0)

    left = {path.name for path in folder.glob("run-*-rank-*.txt")}
    assert saved is not None and saved.name in left
    assert len(left) == breadcrumbs.KEEP_NEWEST
    assert "run-r3-rank-0.txt" not in left  # older than 30 days
    assert "run-r0-rank-0.txt" in left and "run-r100-rank-0.txt" not in left
    assert not old_note.exists() and keep.exists()


def test_pruning_a_folder_that_is_not_there_does_nothing(tmp_path):
    breadcrumbs.prune(tmp_path / "missing", "*.txt")


def _error_file(folder, local_rank: int, line: str, when: int) -> str:
    """An error file as torch's `record` writes it, in `<attempt>/<local rank>/error.json`."""
    import json

    path = folder / str(local_rank) / "error.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = {"py_callstack": f"Traceback...\n{line}\n", "timestamp": str(when)}
    path.write_text(json.dumps({"message": {"message": line, "extraInfo": extra}}))
    return str(path)


def test_a_cause_torch_did_not_report_is_found_by_its_error_file(tmp_path):
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    # Rank 1 raised and was still shutting down when rank 0, which lost it, exited: the
    # agent reported rank 0 only. Rank 1's error file is beside rank 0's.
    attempt = tmp_path / "attempt_0"
    lost = _error_file(attempt, 0, "JaxRuntimeError: Gloo all-reduce failed: reset by peer", 9)
    _error_file(attempt, 1, "RuntimeError: injected crash on rank 1 at step 2", 9)
    reported = ProcessFailure(local_rank=0, pid=321, exitcode=1, error_file=lost)
    error = SimpleNamespace(failures={0: reported})
    rank, _ = root_failure(error)
    assert rank == 1
    assert first_failure(error) == (
        "worker rank 1 failed: RuntimeError: injected crash on rank 1 at step 2"
    )
    # A half-written file there is passed over, not raised from the failure's own path.
    (attempt / "1" / "error.json").write_text('{"message": ')
    assert root_failure(error)[0] == 0
    # Without that file, the reported peer is all there is to tell.
    (attempt / "1" / "error.json").unlink()
    assert root_failure(error)[0] == 0
    assert first_failure(error).startswith("worker rank 0 (pid 321) failed: JaxRuntimeError")
    # Another node's ranks: local rank 0 is global rank 4, so its sibling 1 is rank 5.
    _error_file(attempt, 1, "ValueError: bad batch", 9)
    assert root_failure(SimpleNamespace(failures={4: reported}))[0] == 5


def test_a_collective_that_lost_a_peer_keeps_its_traceback_off_the_terminal():
    from trainscale.runner.failure_log import lost_a_peer

    gloo = "[gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:43210"
    assert lost_a_peer(RuntimeError(gloo))
    assert lost_a_peer(RuntimeError("Connection reset by peer"))
    assert not lost_a_peer(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not lost_a_peer(ValueError(gloo))  # only the collectives' own error type
