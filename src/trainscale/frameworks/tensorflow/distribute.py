"""How a TensorFlow worker computes and talks to its peers: its threads, and the
tf.distribute strategy that sums its gradients with the other replicas'.

Three shapes, as TensorFlow users run them:
- serial: one process, one replica, TensorFlow's default strategy (no wrapper);
- one process per worker (the elastic launcher's): `MultiWorkerMirroredStrategy` over the
  processes, its cluster (TF_CONFIG) built from the worker's rank and world size, gradients
  summed by TensorFlow's own collectives (ring all-reduce on the CPU); on one node, each
  worker's gRPC server listens on the loopback interface only (`loopback`);
- `--single-process` with N workers: one process, `MirroredStrategy` over N logical CPU
  devices, the global batch split among the N replicas.

Everything here must run before TensorFlow initialises its runtime: thread counts and
logical devices cannot change afterwards, and MultiWorkerMirroredStrategy must be created
before any other TensorFlow op.
"""

from __future__ import annotations

import json
import os
import socket
import warnings
from dataclasses import dataclass
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.frameworks.proxy import no_proxy_environment
from trainscale.frameworks.tensorflow.loopback import loopback_bind
from trainscale.parallel.breadcrumbs import note_phase
from trainscale.parallel.device import HostThreads
from trainscale.parallel.distenv import node_address
from trainscale.parallel.strategy import Strategy


@dataclass(frozen=True)
class TfDistribution:
    """A worker's TensorFlow side: its strategy and how many replicas it holds."""

    strategy: Any
    """The tf.distribute strategy (TensorFlow's default strategy when serial)."""
    label: str
    """How the worker facts name it: 'MultiWorkerMirroredStrategy(ring, 2 workers)'."""
    replicas: int
    """Replicas in sync over all workers (each takes `batch_size` samples a step)."""
    local_replicas: int
    """Replicas in this process (N with --single-process, else 1)."""
    intra_op_threads: int | None
    """Intra-op threads as TensorFlow reports them (None: its own default)."""
    inter_op_threads: int | None

    @property
    def facts(self) -> dict[str, Any]:
        """The worker facts stored with the run."""
        return {
            "tf_intra_op_threads": self.intra_op_threads,
            "tf_inter_op_threads": self.inter_op_threads,
            "tf_strategy": self.label,
        }


def thread_counts(config: RunConfig, local_rank: int) -> tuple[int | None, int | None]:
    """(intra-op, inter-op) threads for this worker; None leaves TensorFlow's default.

    Intra-op: the threads trainscale planned for the worker (`--threads-per-worker`, times
    the workers with --single-process: the same count the process's torch threads got).
    None is the 'torch-default' pitfall setting: TensorFlow then takes every core it sees.

    Inter-op: 1 per replica in the process. A training step is one chain of ops, each of
    which uses the intra-op pool; a second inter-op thread would only compete with the
    intra-op threads for the pinned cores. Collectives do not need one: they are
    asynchronous kernels run by TensorFlow's collective executor. With --single-process
    each of the N replicas gets one, so the replicas' chains run side by side as
    MirroredStrategy means them to.
    """
    threads = HostThreads.for_worker(config.parallel, local_rank).threads
    if threads is None:
        return None, None
    replicas = config.parallel.workers if config.parallel.single_process else 1
    return threads, replicas


def set_threads(intra: int | None, inter: int | None) -> tuple[int | None, int | None]:
    """Fix TensorFlow's thread pools (before its runtime starts); returns them as TensorFlow
    reports them (None: its default)."""
    import tensorflow as tf

    threading = tf.config.threading
    try:
        if intra is not None:
            threading.set_intra_op_parallelism_threads(intra)
        if inter is not None:
            threading.set_inter_op_parallelism_threads(inter)
    except RuntimeError:
        # TensorFlow already ran in this process (a caller training in-process after other
        # TensorFlow work; a worker process is always fresh) and its pools are fixed: train
        # with them, and the worker's facts record the counts it really had.
        warnings.warn(
            "TensorFlow was already running in this process: its thread pools are kept as "
            "they are (recorded in the run's worker facts)",
            RuntimeWarning,
            stacklevel=2,
        )
    # 0 is TensorFlow's 'choose for me'.
    return (
        threading.get_intra_op_parallelism_threads() or None,
        threading.get_inter_op_parallelism_threads() or None,
    )


def free_port(host: str) -> int:
    """A TCP port the OS says is free on `host` now (TensorFlow's server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def cluster_spec(addresses: list[str], rank: int) -> dict[str, Any]:
    """TF_CONFIG for worker `rank` of the workers at `addresses` ('host:port', rank order)."""
    return {"cluster": {"worker": list(addresses)}, "task": {"type": "worker", "index": rank}}


def worker_host(strategy: Strategy) -> str:
    """The address the other workers reach this one at: the loopback when every worker is
    on this machine (nothing is opened to the network), else the node's address."""
    env = strategy.env
    if env.world_size == env.local_world_size:
        return "127.0.0.1"
    return node_address() or socket.gethostname()


def setup_distribution(config: RunConfig, strategy: Strategy) -> TfDistribution:
    """Set TensorFlow's threads, then create the worker's tf.distribute strategy.

    The workers agree on their TensorFlow cluster through trainscale's bookkeeping channel
    (`strategy.gather_objects`, off the clock): each picks a free port, and every worker
    learns every other's.
    """
    env = strategy.env
    note_phase("starting TensorFlow's runtime", "TensorFlow")
    intra, inter = set_threads(*thread_counts(config, env.local_rank))
    import tensorflow as tf

    parallel = config.parallel
    if env.world_size > 1:
        host = worker_host(strategy)
        addresses = strategy.gather_objects(f"{host}:{free_port(host)}")
        os.environ["TF_CONFIG"] = json.dumps(cluster_spec(addresses, env.rank))
        # gRPC reads these when it opens the channels to the peers, later than here.
        os.environ.update(no_proxy_environment(os.environ))
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
        )
        note_phase(f"joining the TensorFlow cluster ({env.world_size} workers)", "TensorFlow")
        tf_strategy = _multi_worker_strategy(tf, options, on_loopback=host == "127.0.0.1")
        label = f"MultiWorkerMirroredStrategy(ring, {env.world_size} workers)"
        return TfDistribution(tf_strategy, label, env.world_size, 1, intra, inter)
    if parallel.single_process:
        replicas = parallel.workers
        (cpu,) = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
        )
        devices = [f"/cpu:{index}" for index in range(replicas)]
        tf_strategy = tf.distribute.MirroredStrategy(devices)
        label = f"MirroredStrategy({replicas} replicas on logical CPU devices, one process)"
        return TfDistribution(tf_strategy, label, replicas, replicas, intra, inter)
    return TfDistribution(tf.distribute.get_strategy(), "default (serial)", 1, 1, intra, inter)


def _multi_worker_strategy(tf: Any, options: Any, on_loopback: bool) -> Any:
    """MultiWorkerMirroredStrategy, whose creation starts this worker's gRPC server.

    TensorFlow's server listens on every interface whatever TF_CONFIG says; when the peers
    are all on this machine (`on_loopback`) it is kept on the loopback interface instead
    (`loopback_bind`), as the run's other sockets are: it is unauthenticated and runs the
    ops it is sent.
    """
    if not on_loopback:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    with loopback_bind() as bound:
        if not bound:
            warnings.warn(
                "TensorFlow's gRPC server could not be kept on the loopback interface here: "
                "it listens on every interface for this run",
                RuntimeWarning,
                stacklevel=3,
            )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def sum_over_workers(distribution: TfDistribution) -> Any:
    """A function that sums a tensor over the workers through tf.distribute (identity with
    one worker process): the all-reduce of a data-parallel phase outside the training step
    (the DBN's CD statistics)."""
    tf_strategy = distribution.strategy
    if distribution.replicas == 1 or distribution.local_replicas > 1:
        # Serial, or all replicas in this one process: the caller already holds the sum.
        return lambda value: value
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def summed(value: Any) -> Any:
        # Each worker's value as its replica's, then reduced over the replicas: an
        # all-reduce among the worker processes (every worker gets the sum).
        local = tf_strategy.run(tf.identity, (value,))
        return tf_strategy.reduce(tf.distribute.ReduceOp.SUM, local, axis=None)

    return summed
