"""How a JAX run is spread: XLA's CPU threads, the processes joined by jax.distributed, and
the device mesh the data-parallel step runs over.

Everything here that configures the backend must run before XLA's backend starts (the first
`jax.devices()` or jax operation): the thread pool and the number of host devices are fixed
then. Importing jax is fine; running anything is not.

Threads: XLA's CPU client sizes its intra-op pool (the threads named `tf_XLAEigen`, which
run Eigen's matrix kernels and the runtime's parallel loops) from the NPROC environment
variable, else from the cores the process may run on (JAX has no documented knob; the old
`intra_op_parallelism_threads` in XLA_FLAGS is not an XLA flag). With NPROC=T the process
computes on T threads at a time (measured: one runnable thread at T=1, two at T=2). The
process is already pinned to its cores by the worker's torch strategy, so the default (no
NPROC) is one thread per core the process may use, whatever the other workers use: the
oversubscription pitfall when workers x threads exceeds the cores.

GPUs (--device cuda): one GPU per worker process, its local rank's, as PyTorch's workers
have; the processes join jax.distributed and XLA's collectives go over NCCL. JAX allocates
GPU memory as it needs it (no preallocation: the process shares its GPU with torch's side).
"""

from __future__ import annotations

import atexit
import math
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from trainscale.config.options import RunConfig
from trainscale.errors import ConfigError
from trainscale.frameworks.proxy import no_proxy_environment
from trainscale.parallel.breadcrumbs import note_phase
from trainscale.parallel.distenv import node_address
from trainscale.parallel.strategy import Strategy

AXIS = "data"
"""The mesh axis the batch is split over (one replica per device along it)."""
POOL_THREAD_NAME = "tf_XLAEigen"
"""The name XLA's CPU client gives its intra-op pool threads."""
SHUTDOWN_TIMEOUT_S = 30
"""How long leaving jax.distributed waits for the other processes. Ranks that finish
training arrive together (the run's last step is a gather); a rank that failed waits this
long at its exit before the coordination service ends every process (the launcher then
reports the failure it recorded)."""


@dataclass(frozen=True)
class Distribution:
    """The replicas a run trains with, as JAX sees them."""

    mesh: Mesh
    """One axis, `AXIS`, over every replica's device (all processes' together)."""
    processes: int
    """Processes in the job (jax.distributed's), 1 when serial or single-process."""
    description: str
    """How the replicas communicate, for the worker's facts."""
    joined: bool
    """Whether this process called jax.distributed.initialize (and must shut it down)."""

    @property
    def replicas(self) -> int:
        """Data-parallel replicas: devices on the mesh."""
        return int(self.mesh.devices.size)

    def replicated(self) -> NamedSharding:
        """The sharding of parameters and optimizer state: a full copy on every device."""
        return NamedSharding(self.mesh, PartitionSpec())

    def split(self) -> NamedSharding:
        """The sharding of a batch: its leading axis split over the replicas."""
        return NamedSharding(self.mesh, PartitionSpec(AXIS))

    def put_replicated(self, tree: Any) -> Any:
        """`tree` (host arrays, the same on every process) as replicated global arrays."""
        sharding = self.replicated()

        def put(value: Any) -> jax.Array:
            host = np.asarray(value)
            return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

        return jax.tree_util.tree_map(put, tree)

    def put_batch(self, local: np.ndarray) -> jax.Array:
        """This process's rows of a batch as the global batch array (the processes' rows
        stacked in rank order; one process holds the whole batch)."""
        return jax.make_array_from_process_local_data(self.split(), local)

    def shutdown(self) -> None:
        """Leave jax.distributed (after the last collective): a barrier with the others."""
        if self.joined:
            jax.distributed.shutdown()

    def abandon(self) -> None:
        """Make a failed process leave without jax.distributed's exit barrier.

        jax's exit handler shuts jax.distributed down, which waits for every process; the
        others are waiting in a collective for this one, so a failed process would sit there
        until they time out, and then be aborted by jax's coordination service (a SIGABRT
        that hides its own error). Instead, once its error has propagated (the launcher has
        it), the process leaves at the start of the interpreter's exit, before jax's exit
        handlers, with status 1 (128 + N after a stop signal); the launcher stops the others.
        """
        if not self.joined:
            return
        from trainscale.parallel.interrupts import received_signal

        stopped = received_signal()
        # Exit handlers run last registered first: this one before jax's.
        atexit.register(_leave_now, 1 if stopped is None else 128 + int(stopped))


def configure_backend(config: RunConfig, local_rank: int = 0) -> None:
    """Set XLA's platform, its devices (the host devices and CPU threads, or this worker's
    GPU) and the CPU collectives, before the backend starts. A backend already started (an
    earlier run in the same process) keeps its own: `pool_threads()` records what it has."""
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return
    # XLA reads these when its backend starts (the CUDA plugin its memory options, the CPU
    # client NPROC and XLA_FLAGS), which is later than here: nothing has run yet.
    os.environ.update(backend_environment(config, os.environ))
    for name, value in backend_options(config, local_rank).items():
        jax.config.update(name, value)


def backend_environment(config: RunConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables to set before XLA's backend starts, given the process's
    `environ` (a user's own XLA_FLAGS are kept, ours appended).

    On a GPU: XLA_PYTHON_CLIENT_PREALLOCATE=false, unless the user set it. JAX's CUDA client
    otherwise takes 75% of the GPU's memory when it starts, and this process also holds
    torch's CUDA context (the worker's device, NCCL for the bookkeeping collectives):
    JAX allocates as it needs instead. The CPU's collective timeouts and threads are
    CPU-client settings, left out on a GPU.
    On the CPU: a peer that stops answering fails the run after --timeout, as DDP's
    collectives do (without these a gloo all-reduce waits for a hung peer for ever); NPROC
    sizes XLA's CPU pool where the run gives the worker its threads.
    """
    par = config.parallel
    if par.device == "cuda":
        if "XLA_PYTHON_CLIENT_PREALLOCATE" in environ:
            return {}
        return {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    timeout = max(1, math.ceil(par.timeout_s))
    flags = " ".join(
        [
            environ.get("XLA_FLAGS", ""),
            f"--xla_cpu_collective_timeout_seconds={timeout}",
            f"--xla_cpu_collective_call_terminate_timeout_seconds={timeout}",
        ]
    ).strip()
    env = {"XLA_FLAGS": flags}
    # One process holding every replica gets all their threads, as its torch side
    # (HostThreads.for_worker) does.
    threads = par.threads_per_worker
    if threads is not None and par.single_process:
        threads *= par.workers
    if threads is not None:
        env["NPROC"] = str(threads)
    return env


def backend_options(config: RunConfig, local_rank: int) -> dict[str, Any]:
    """The jax.config settings of a run, set before the backend starts.

    The platform is named (JAX_PLATFORMS' setting): a GPU run whose CUDA backend cannot
    start fails, rather than training on the CPU under a GPU label. A GPU worker sees one
    GPU, its local rank's, the one torch's side of the worker selected (CudaDevice): the
    worker's torch has already started CUDA with all the node's GPUs, so CUDA_VISIBLE_DEVICES
    set now would change nothing, whereas jax_cuda_visible_devices restricts JAX's client
    (jax.distributed sets the same from its local_device_ids). Without it a serial run
    would put every GPU of the node on its mesh.
    """
    par = config.parallel
    options: dict[str, Any] = {
        "jax_platforms": "cuda" if par.device == "cuda" else "cpu",
        # Its SIGTERM handler would keep a worker the launcher stops running until killed.
        "jax_enable_preemption_service": False,
    }
    if par.device == "cuda":
        options["jax_cuda_visible_devices"] = str(local_rank)
        return options
    if par.single_process:
        options["jax_num_cpu_devices"] = par.workers
    options["jax_cpu_collectives_implementation"] = "gloo"
    return options


def join(config: RunConfig, strategy: Strategy) -> Distribution:
    """Join the job's other processes (jax.distributed, CPU collectives over gloo) when
    there are any, and lay the replicas' devices out on a one-axis mesh."""
    env = strategy.env
    joined = False
    if env.world_size > 1:
        address, bind = _coordinator(strategy)
        _stdout_to_stderr()
        # jax.distributed's client reaches the coordinator over gRPC, which would send it
        # through a proxy the user's environment names (trainscale.frameworks.proxy).
        os.environ.update(no_proxy_environment(os.environ))
        # Noted for the launcher: XLA ends the process from C++ if this times out.
        note_phase(f"joining jax.distributed ({env.world_size} processes)", "XLA")
        jax.distributed.initialize(
            coordinator_address=address,
            coordinator_bind_address=bind,
            num_processes=env.world_size,
            process_id=env.rank,
            local_device_ids=[env.local_rank] if config.parallel.device == "cuda" else None,
            initialization_timeout=max(1, math.ceil(config.parallel.timeout_s)),
            heartbeat_timeout_seconds=max(1, math.ceil(config.parallel.timeout_s)),
            shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_S,
        )
        joined = True
    # XLA's backend starts here; it exits from C++ on a flag it does not know.
    flags = os.environ.get("XLA_FLAGS", "")
    note_phase(f"starting JAX's XLA backend (XLA_FLAGS='{flags}')", "XLA")
    devices = jax.devices()
    if config.parallel.single_process and len(devices) != config.parallel.workers:
        raise ConfigError(
            f"--single-process needs {config.parallel.workers} JAX devices in one process, "
            f"found {len(devices)} (the backend started before the run could set them)"
        )
    mesh = Mesh(np.array(devices), (AXIS,))
    kind = "host devices" if devices[0].platform == "cpu" else f"{devices[0].platform} devices"
    if joined:
        description = (
            f"jax.distributed, {env.world_size} processes, "
            f"{_collectives(config)}; shard_map + pmean over {len(devices)} {kind}"
        )
    elif len(devices) > 1:
        description = f"one process, {len(devices)} {kind}; shard_map + pmean"
    else:
        description = "serial, 1 device"
    return Distribution(mesh, env.world_size, description, joined)


def pool_threads() -> int:
    """Threads in XLA's CPU intra-op pool of this process, counted from /proc (0 where
    threads cannot be listed)."""
    tasks = f"/proc/{os.getpid()}/task"
    if not os.path.isdir(tasks):
        return 0
    count = 0
    for tid in os.listdir(tasks):
        try:
            with open(f"{tasks}/{tid}/comm") as comm:
                count += comm.read().strip() == POOL_THREAD_NAME
        except OSError:  # the thread ended while we looked
            continue
    return count


def _leave_now(status: int) -> None:
    """End the process with `status` at once (an exit handler run before jax's)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _stdout_to_stderr() -> None:
    """Send this process's standard output to its standard error, for good.

    gloo's C++ code prints a line on stdout as each process connects to its peers, lazily,
    at the first collective; a worker's stdout is the launching command's, whose `--json`
    output it would corrupt. Workers write everything of their own to stderr anyway.
    """
    sys.stdout.flush()
    os.dup2(2, 1)


def _collectives(config: RunConfig) -> str:
    if config.parallel.device == "cuda":
        return "nccl"
    # A flag jax defines when it starts, absent from its type information.
    return str(jax.config.jax_cpu_collectives_implementation)  # type: ignore[attr-defined]


def _coordinator(strategy: Strategy) -> tuple[str, str | None]:
    """(address, bind address) of jax.distributed's coordinator: rank 0 picks a free port
    on the address the others reach it at and tells them over the torch bookkeeping channel.
    When every process is on this machine the coordinator listens on the loopback address
    only (the bind address); otherwise on every interface (None: jax's default)."""
    env = strategy.env
    one_node = env.world_size == env.local_world_size
    address = None
    if env.is_main:
        host = "127.0.0.1" if one_node else (node_address() or socket.gethostname())
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1" if one_node else "", 0))
            port = probe.getsockname()[1]
        address = f"{host}:{port}"
    address = str(strategy.gather_objects(address)[0])
    return address, address if one_node else None
