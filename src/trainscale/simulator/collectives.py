"""Alpha-beta costs of the gradient exchange of data-parallel training. Pure functions.

A link moves a message of m bytes in `alpha + m * beta` seconds (Hockney's model): alpha is
the per-message latency, beta the inverse bandwidth. For p ranks and an n-byte gradient
(Thakur, Rabenseifner and Gropp 2005; Patarasuk and Yuan 2009):

    ring all-reduce            2 (p - 1) alpha + 2 (p - 1) / p * n * beta
                               (reduce-scatter then all-gather, each p - 1 steps of n / p)
    tree (recursive doubling)  ceil(log2 p) * (alpha + n * beta)
    halving-doubling           2 ceil(log2 p) alpha + 2 (p - 1) / p * n * beta
                               (Rabenseifner: recursive-halving reduce-scatter, then
                               recursive-doubling all-gather; exact for powers of two)
    hierarchical               reduce-scatter inside each node, ring all-reduce across the
                               nodes, all-gather inside each node
    parameter server           push n bytes to the servers, pull n bytes back; the servers'
                               links carry p * n / servers each way

Across nodes, the network link of a node is shared by every rank on the node that sends
across it in the same step: a round of recursive doubling whose partners are on other nodes
sends g messages through one network link at once (g ranks per node), so its beta is g times
the link's. A flat ring sends only one message out of each node per step, so its beta is
the slowest hop's.

Non-power-of-two rank counts are costed with ceil(log2 p) rounds, a slight underestimate
(real implementations add a fold-in step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

Algorithm = Literal["ring", "tree", "halving-doubling", "hierarchical", "parameter-server", "auto"]
ALGORITHMS: tuple[str, ...] = get_args(Algorithm)
"""Gradient-exchange algorithms the simulator knows; 'auto' takes the fastest all-reduce of
ring, tree, halving-doubling and hierarchical for each bucket (as NCCL's tuner picks per
message size)."""

_AUTO_CANDIDATES = ("ring", "tree", "halving-doubling", "hierarchical")


@dataclass(frozen=True)
class Link:
    """One hop: per-message latency and inverse bandwidth."""

    alpha_s: float
    """Latency of one message, seconds."""
    beta_s_per_byte: float
    """Seconds per byte (1 / bandwidth)."""

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and math.isfinite(self.alpha_s)):
            raise ValueError(f"alpha must be a finite number >= 0, not {self.alpha_s!r}")
        if not (self.beta_s_per_byte >= 0 and math.isfinite(self.beta_s_per_byte)):
            raise ValueError(f"beta must be a finite number >= 0, not {self.beta_s_per_byte!r}")

    @classmethod
    def from_bandwidth(cls, alpha_s: float, bytes_per_s: float) -> Link:
        """A link of `bytes_per_s` bandwidth (per direction) and `alpha_s` latency."""
        if not bytes_per_s > 0:
            raise ValueError(f"bandwidth must be positive, not {bytes_per_s!r}")
        return cls(alpha_s, 1.0 / bytes_per_s)

    def message_s(self, num_bytes: float) -> float:
        """Time of one message of `num_bytes` over this link."""
        return self.alpha_s + num_bytes * self.beta_s_per_byte

    def shared(self, streams: int) -> Link:
        """The link as each of `streams` concurrent messages sees it (bandwidth split)."""
        return Link(self.alpha_s, self.beta_s_per_byte * max(1, streams))

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """1 / beta (infinite for beta = 0)."""
        return math.inf if self.beta_s_per_byte == 0 else 1.0 / self.beta_s_per_byte


def slowest(a: Link, b: Link) -> Link:
    """A hop no faster than either link: the larger alpha and the larger beta."""
    return Link(max(a.alpha_s, b.alpha_s), max(a.beta_s_per_byte, b.beta_s_per_byte))


def _rounds(ranks: int) -> int:
    return math.ceil(math.log2(ranks)) if ranks > 1 else 0


def _check(num_bytes: float, ranks: int) -> None:
    if num_bytes < 0:
        raise ValueError(f"message size must be >= 0 bytes, not {num_bytes!r}")
    if ranks < 1:
        raise ValueError(f"an all-reduce needs at least one rank, not {ranks!r}")


def ring_allreduce_s(num_bytes: float, ranks: int, link: Link) -> float:
    """2 (p - 1) (alpha + n / p beta): reduce-scatter then all-gather around a ring."""
    _check(num_bytes, ranks)
    if ranks == 1 or num_bytes == 0:
        return 0.0
    return 2 * (ranks - 1) * (link.alpha_s + num_bytes / ranks * link.beta_s_per_byte)


def reduce_scatter_s(num_bytes: float, ranks: int, link: Link) -> float:
    """(p - 1) (alpha + n / p beta): half a ring all-reduce."""
    _check(num_bytes, ranks)
    if ranks == 1 or num_bytes == 0:
        return 0.0
    return (ranks - 1) * (link.alpha_s + num_bytes / ranks * link.beta_s_per_byte)


all_gather_s = reduce_scatter_s
"""An all-gather of n bytes (each rank contributing n / p) costs what a reduce-scatter does."""


def tree_allreduce_s(num_bytes: float, ranks: int, link: Link) -> float:
    """ceil(log2 p) (alpha + n beta): recursive doubling, the whole vector every round."""
    _check(num_bytes, ranks)
    if ranks == 1 or num_bytes == 0:
        return 0.0
    return _rounds(ranks) * link.message_s(num_bytes)


def halving_doubling_allreduce_s(num_bytes: float, ranks: int, link: Link) -> float:
    """2 ceil(log2 p) alpha + 2 (p - 1) / p n beta (Rabenseifner's algorithm)."""
    _check(num_bytes, ranks)
    if ranks == 1 or num_bytes == 0:
        return 0.0
    return 2 * _rounds(ranks) * link.alpha_s + 2 * (ranks - 1) / ranks * (
        num_bytes * link.beta_s_per_byte
    )


def hierarchical_allreduce_s(
    num_bytes: float, nodes: int, ranks_per_node: int, intra: Link, inter: Link
) -> float:
    """Reduce-scatter inside each node, ring all-reduce across nodes, all-gather inside.

    After the intra-node reduce-scatter, each of the g ranks of a node all-reduces its n / g
    shard with its peers on the other nodes, g such all-reduces at once through the node's
    one network link: together that is a ring all-reduce of n bytes across the nodes.
    """
    _check(num_bytes, nodes * ranks_per_node)
    if nodes < 1 or ranks_per_node < 1:
        raise ValueError("hierarchical all-reduce needs at least one node and one rank per node")
    inside = reduce_scatter_s(num_bytes, ranks_per_node, intra) + all_gather_s(
        num_bytes, ranks_per_node, intra
    )
    across = ring_allreduce_s(num_bytes, nodes, inter)
    return inside + across


def parameter_server_s(
    num_bytes: float,
    workers: int,
    worker_link: Link,
    server_link: Link,
    servers: int = 1,
    workers_per_link: int = 1,
) -> float:
    """Push n bytes of gradient to the servers, then pull n bytes of parameters back.

    Each direction takes one message latency plus the longer of: a worker's link moving
    its n bytes (shared by `workers_per_link` workers, e.g. the GPUs of a node behind one
    network link) and a server's link moving its shard of every worker's message,
    workers * n / servers bytes. Synchronous: the pull starts when every push has arrived.
    """
    _check(num_bytes, workers)
    if servers < 1:
        raise ValueError(f"a parameter server needs at least one server, not {servers!r}")
    if num_bytes == 0:
        return 0.0
    worker_side = num_bytes * worker_link.beta_s_per_byte * max(1, workers_per_link)
    server_side = workers * num_bytes / servers * server_link.beta_s_per_byte
    one_way = max(worker_link.alpha_s, server_link.alpha_s) + max(worker_side, server_side)
    return 2 * one_way


@dataclass(frozen=True)
class Topology:
    """Where the ranks sit and what connects them."""

    devices_per_node: int
    intra: Link
    """Between devices of one node (NVLink, PCIe, shared memory)."""
    inter: Link | None = None
    """Between nodes (one network link per node); None for a single-node cluster."""
    server: Link | None = None
    """A parameter server's link (default: the network link, else the intra-node link)."""
    servers: int = 1

    def placement(self, workers: int) -> tuple[int, int]:
        """(nodes, ranks per node) for `workers` ranks filling nodes in order."""
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers!r}")
        nodes = math.ceil(workers / self.devices_per_node)
        return nodes, min(workers, self.devices_per_node)


def _round_link(topology: Topology, distance: int, per_node: int) -> Link:
    # Recursive doubling/halving pairs rank r with r XOR distance: on the same node while
    # the distance is below the ranks per node, on another node beyond it, where every rank
    # of the node crosses the network link at once.
    if distance < per_node or topology.inter is None:
        return topology.intra
    return topology.inter.shared(per_node)


def allreduce_s(num_bytes: float, workers: int, topology: Topology, algorithm: str) -> float:
    """Time to all-reduce (or push and pull) an n-byte bucket among `workers` ranks."""
    _check(num_bytes, workers)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if workers == 1 or num_bytes == 0:
        return 0.0
    nodes, per_node = topology.placement(workers)
    if nodes > 1 and topology.inter is None:
        raise ValueError(
            f"{workers} workers need {nodes} nodes, but the topology has no inter-node link"
        )
    if algorithm == "auto":
        return min(allreduce_s(num_bytes, workers, topology, a) for a in _AUTO_CANDIDATES)
    if algorithm == "parameter-server":
        network = topology.inter or topology.intra
        return parameter_server_s(
            num_bytes,
            workers,
            worker_link=network,
            server_link=topology.server or network,
            servers=topology.servers,
            workers_per_link=per_node if topology.inter is not None else 1,
        )
    if nodes == 1:
        link = topology.intra
        if algorithm in ("ring", "hierarchical"):
            return ring_allreduce_s(num_bytes, workers, link)
        if algorithm == "tree":
            return tree_allreduce_s(num_bytes, workers, link)
        return halving_doubling_allreduce_s(num_bytes, workers, link)
    assert topology.inter is not None
    if algorithm == "ring":
        return ring_allreduce_s(num_bytes, workers, slowest(topology.intra, topology.inter))
    if algorithm == "hierarchical":
        return hierarchical_allreduce_s(num_bytes, nodes, per_node, topology.intra, topology.inter)
    rounds = _rounds(workers)
    if algorithm == "tree":
        return sum(
            _round_link(topology, 2**k, per_node).message_s(num_bytes) for k in range(rounds)
        )
    # Halving-doubling: round k of the reduce-scatter exchanges n / 2^(k+1) bytes with the
    # rank at distance 2^k; the all-gather mirrors it.
    total = 0.0
    for k in range(rounds):
        link = _round_link(topology, 2**k, per_node)
        total += 2 * link.message_s(num_bytes / 2 ** (k + 1))
    return total


def link_from_allreduce_fit(alpha_s: float, beta_s_per_byte: float, ranks: int) -> Link:
    """The per-hop link behind a measured all-reduce fit t(n) = A + B n at `ranks` ranks.

    A probe fits the whole collective; a ring all-reduce costs 2 (p - 1) alpha +
    2 (p - 1) / p n beta, so alpha = A / (2 (p - 1)) and beta = B p / (2 (p - 1)).
    """
    if ranks < 2:
        raise ValueError(f"an all-reduce fit needs at least 2 ranks, not {ranks!r}")
    hops = 2 * (ranks - 1)
    return Link(alpha_s / hops, beta_s_per_byte * ranks / hops)
