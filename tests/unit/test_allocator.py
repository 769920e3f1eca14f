"""Workers' allocator settings: glibc only, never over the user's own choice, and the parent's
environment as it was once the workers have started."""

from __future__ import annotations

import os

import pytest

from trainscale.parallel.allocator import (
    SETTINGS,
    allocator_fact,
    allocator_settings,
    worker_allocator_env,
)


def test_glibc_workers_keep_freed_memory():
    env = worker_allocator_env({"PATH": "/usr/bin"}, libc="glibc")
    assert env == {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


@pytest.mark.parametrize(
    "user",
    [
        {"MALLOC_ARENA_MAX": "2"},
        {"MALLOC_TRIM_THRESHOLD_": "0"},
        {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"},
        {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"},
    ],
)
def test_a_users_own_allocator_choice_is_left_alone(user):
    assert worker_allocator_env(user, libc="glibc") == {}


def test_other_c_libraries_get_nothing():
    assert worker_allocator_env({}, libc="") == {}
    assert worker_allocator_env({}, libc="musl") == {}


def test_the_settings_last_while_workers_start_and_the_environment_is_restored(monkeypatch):
    for name in [*SETTINGS, "GLIBC_TUNABLES", "LD_PRELOAD"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("trainscale.parallel.allocator.platform.libc_ver", lambda: ("glibc", ""))
    before = dict(os.environ)
    with allocator_settings() as added:
        assert added == SETTINGS
        assert all(os.environ[name] == value for name, value in SETTINGS.items())
        assert allocator_fact() == SETTINGS
    assert dict(os.environ) == before


def test_the_fact_names_the_users_allocator():
    assert allocator_fact({"LD_PRELOAD": "libtcmalloc.so", "HOME": "/root"}) == {
        "LD_PRELOAD": "libtcmalloc.so"
    }
    assert allocator_fact({"HOME": "/root", "LD_PRELOAD": ""}) == {}
