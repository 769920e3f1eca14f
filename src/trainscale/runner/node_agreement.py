"""Every node of a run started with the same settings, checked once the workers have met.

Each node resolves its own command: nothing else makes two nodes agree on the batch, the
precision or the steps. Rank 0 stores the run from its own node's settings, so a node
started otherwise would train something else under that record (a batch of 16 beside 64
stored as 64 a worker), or stop in a collective mismatch or a hang. The settings that
may differ from node to node are the ones each node plans for itself: where its data is,
its cores and threads, its profile directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.errors import ConfigError

NODE_LOCAL = frozenset(
    {
        "data_dir",
        "download",
        "threads_per_worker",
        "affinity",
        "core_sets",
        "oversubscribed",
        "profile",
        "timeout_s",
    }
)
"""Settings each node plans for itself, which may differ between nodes."""


def shared_settings(config: RunConfig) -> dict[str, Any]:
    """The settings every node of a run must agree on."""
    leaves = RunConfig.flat_fields()
    return {
        key: value
        for key, value in config.flat().items()
        if leaves[key].is_setting and key not in NODE_LOCAL
    }


def check_nodes_agree(per_rank: Sequence[Mapping[str, Any]]) -> None:
    """ConfigError (one line, the same on every rank) naming the first setting in which a
    rank's node differs from rank 0's; nothing where they all agree."""
    first = per_rank[0]
    for rank, settings in enumerate(per_rank[1:], start=1):
        differing = [key for key in first if settings.get(key) != first[key]]
        differing += [key for key in settings if key not in first]
        if differing:
            key = differing[0]
            raise ConfigError(
                f"the nodes were started with different settings: {key} is "
                f"{settings.get(key)!r} where rank {rank} runs, {first.get(key)!r} where "
                "rank 0 runs; start every node with the same command (docs/multinode.md)"
            )
