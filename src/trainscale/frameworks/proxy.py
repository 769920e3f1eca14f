"""Keep the workers' loopback traffic away from HTTP proxies.

TensorFlow's and JAX's workers talk to each other over gRPC, and gRPC sends every channel
through `grpc_proxy`/`https_proxy`/`http_proxy` unless the host is in `no_grpc_proxy` or
else `no_proxy`, the lower-case spelling only. A user whose shell sets `http_proxy` and only
`NO_PROXY=127.0.0.1` (which curl and requests honour) would see a single-node run's workers
try to reach each other through the proxy and wait there without a word. The workers'
environment therefore lists the loopback names in both spellings (and in `no_grpc_proxy`
where the user set it, since gRPC then reads that one alone), after the user's own entries.
"""

from __future__ import annotations

from collections.abc import Mapping

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
"""The hosts a single-node run's workers reach each other at, never through a proxy."""


def no_proxy_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The proxy-exclusion variables to set in a worker whose environment is `environ`:
    `no_proxy` and `NO_PROXY` (and `no_grpc_proxy` if set), each the user's list (either
    spelling's where only one is set) with the loopback hosts appended if missing."""
    variables = ["no_proxy", "NO_PROXY"]
    if "no_grpc_proxy" in environ:
        variables.append("no_grpc_proxy")
    changes = {}
    for name in variables:
        current = environ.get(name)
        if current is None and name != "no_grpc_proxy":
            # The other spelling's list: the user meant it for every client.
            current = environ.get("NO_PROXY" if name == "no_proxy" else "no_proxy", "")
        entries = [entry.strip() for entry in (current or "").split(",") if entry.strip()]
        entries += [host for host in LOOPBACK_HOSTS if host not in entries]
        changes[name] = ",".join(entries)
    return changes
