"""A worker leaves when its launcher is gone, and only then: a launcher that is pid 1 (a
container's init, `unshare --pid --fork`) is a live parent, not a dead one."""

from __future__ import annotations

import multiprocessing
import os

from trainscale.parallel import distenv
from trainscale.parallel.distenv import parent_is_gone, starting_parent


def test_a_parent_that_is_pid_1_from_the_start_is_not_gone():
    assert not parent_is_gone(1, 1)


def test_a_parent_replaced_by_pid_1_or_a_subreaper_is_gone():
    assert parent_is_gone(4242, 1)
    assert parent_is_gone(4242, 77)


def test_an_unknown_starting_parent_is_never_taken_for_gone():
    assert not parent_is_gone(None, 1)


def test_the_parent_seen_at_import_counts_only_in_the_importing_process(monkeypatch):
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: None)
    monkeypatch.setattr(distenv, "_IMPORTED_BY", (os.getpid(), 1234))
    assert starting_parent() == 1234
    # A forked child inherits the module's state: its grandparent is not its parent.
    monkeypatch.setattr(distenv, "_IMPORTED_BY", (os.getpid() + 1, 1234))
    assert starting_parent() is None


def _report_parent(queue: multiprocessing.Queue) -> None:
    queue.put(starting_parent())


def test_a_spawned_child_knows_its_parent_from_multiprocessing():
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_report_parent, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=60) == os.getpid()
    finally:
        child.join(timeout=60)
