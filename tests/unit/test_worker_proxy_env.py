"""The TensorFlow and JAX workers' environment keeps loopback traffic away from proxies:
gRPC reads only the lower-case `no_proxy` (or `no_grpc_proxy` where set)."""

from __future__ import annotations

import pytest

from trainscale.frameworks.proxy import no_proxy_environment


def test_only_the_upper_case_spelling_set_gives_both_spellings_its_list() -> None:
    env = no_proxy_environment({"http_proxy": "http://proxy:3128", "NO_PROXY": "corp.example"})

    assert env == {
        "no_proxy": "corp.example,127.0.0.1,localhost",
        "NO_PROXY": "corp.example,127.0.0.1,localhost",
    }


def test_the_users_entries_are_kept_and_loopback_is_not_listed_twice() -> None:
    env = no_proxy_environment({"no_proxy": "localhost, .internal", "NO_PROXY": "127.0.0.1"})

    assert env["no_proxy"] == "localhost,.internal,127.0.0.1"
    assert env["NO_PROXY"] == "127.0.0.1,localhost"


@pytest.mark.parametrize("environ", [{}, {"no_proxy": ""}])
def test_nothing_set_gives_the_loopback_hosts(environ: dict[str, str]) -> None:
    assert no_proxy_environment(environ) == {
        "no_proxy": "127.0.0.1,localhost",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def test_no_grpc_proxy_which_grpc_reads_instead_gets_loopback_too() -> None:
    env = no_proxy_environment({"no_grpc_proxy": "10.0.0.1"})

    assert env["no_grpc_proxy"] == "10.0.0.1,127.0.0.1,localhost"


class _Joined(Exception):
    """Raised by the stand-in jax.distributed.initialize: the test has what it wanted."""


def test_the_jax_workers_set_it_before_joining(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax")
    import os
    from types import SimpleNamespace

    from trainscale.frameworks.jax import distribute

    seen: dict[str, str | None] = {}

    def initialize(**_: object) -> None:
        seen.update(no_proxy=os.environ.get("no_proxy"), NO_PROXY=os.environ.get("NO_PROXY"))
        raise _Joined

    # Set, then removed: monkeypatch then restores the variable the worker code sets.
    monkeypatch.setenv("no_proxy", "placeholder")
    monkeypatch.delenv("no_proxy")
    monkeypatch.setenv("NO_PROXY", "corp.example")
    monkeypatch.setattr(distribute.jax.distributed, "initialize", initialize)
    monkeypatch.setattr(distribute, "_stdout_to_stderr", lambda: None)
    env = SimpleNamespace(world_size=2, local_world_size=2, rank=0, local_rank=0, is_main=True)
    strategy = SimpleNamespace(env=env, gather_objects=lambda value: [value, value])
    config = SimpleNamespace(parallel=SimpleNamespace(device="cpu", timeout_s=10))

    with pytest.raises(_Joined):
        distribute.join(config, strategy)  # type: ignore[arg-type]

    expected = "corp.example,127.0.0.1,localhost"
    assert seen == {"no_proxy": expected, "NO_PROXY": expected}
