"""What each worker of a script run does: pin itself and fix its threads as any worker,
run the user's script under the meter (rank 0 printing its progress meanwhile:
runner/script_progress.py), hand its measurements and facts (its peak memory, the GPU's too
where the script used CUDA) to rank 0, which stores the run. A stop signal ends the worker
with 128 + N, as a built-in run's worker, whatever the script raised.

The script may form its own process group (`init_process_group` from torchrun's
variables), so the measurements go to rank 0 through the launcher's store instead
(MASTER_ADDR:MASTER_PORT, a TCPStore every worker of the job reaches), under keys of their
own: a group of trainscale's would be a second default group the script cannot have.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from trainscale.config.script import ScriptRun
from trainscale.errors import WorkloadError
from trainscale.frameworks import FRAMEWORKS, version
from trainscale.hardware.resources import peak_rss_bytes
from trainscale.parallel.device import HostThreads
from trainscale.parallel.distenv import DistEnv, exit_with_parent
from trainscale.parallel.interrupts import (
    WorkerStopped,
    exit_quietly_on_signals,
    received_signal,
)
from trainscale.parallel.loopback import pin_gloo_to_loopback
from trainscale.parallel.strategy import worker_facts
from trainscale.results.store import RunStore
from trainscale.runner.exit_deadline import bounded_exit
from trainscale.runner.failure_log import save_traceback
from trainscale.runner.record import store_script_outcome
from trainscale.runner.script_exec import run_script, use_local_gpu
from trainscale.runner.script_progress import shown
from trainscale.train.meter import ScriptMeasurements
from trainscale.train.script_summary import summarize_script

KEY = "trainscale/script-measurements/"


@record  # writes the exception to the launcher's error file, so the parent can report it
@bounded_exit(lambda: f"trainscale: worker rank {os.environ.get('RANK', '0')}")
def script_worker_main(run: ScriptRun, run_id: str, store_path: str) -> None:
    """Entry point of one worker of a script run; rank 0 stores the completed run."""
    exit_with_parent()
    exit_quietly_on_signals()
    env = DistEnv.from_environ()
    if env.world_size == env.local_world_size:
        pin_gloo_to_loopback()  # the script's gloo group, if it forms one, stays on loopback
    host = HostThreads.for_worker(run.parallel, env.local_rank)
    host.apply()
    if host.threads is not None:  # torchrun's variable, for the script's own libraries
        os.environ["OMP_NUM_THREADS"] = str(host.threads)
    # The device the script sees is the run's (nothing has asked torch about GPUs yet).
    use_local_gpu(run.parallel.device, env.local_rank)
    # The launcher starts workers with spawn, and a spawned process keeps spawn as its default
    # start method; torchrun starts each worker as a fresh interpreter, with the platform's
    # default (fork on Linux). The script gets that default back, so its DataLoader workers
    # start as under torchrun (spawn would re-run a script that has no __main__ guard).
    multiprocessing.set_start_method(None, force=True)
    try:
        # Rank 0's lines go to the worker's stderr as it is now: run_script puts a tee in
        # sys.stderr that keeps the script's last line for its error message, not ours.
        with shown(run.progress and env.is_main, sys.stderr):
            measurements = run_script(
                run.script, run.args, run.max_steps, device=run.parallel.device
            )
    except Exception as error:
        stopped = received_signal()
        if stopped is not None:
            # Ctrl-C or SIGTERM reached the script wherever it was (a step, its `finally`),
            # and what it raised on the way out (run_script's "exited with status 130") is
            # no failure of the script's: leave with 128 + N, as a built-in run's worker
            # does; the parent stores the run interrupted.
            raise WorkerStopped(stopped) from None
        save_traceback(error, run_id, env.rank)  # the whole traceback kept; the line goes up
        raise
    worker = worker_facts()
    worker["rank"] = env.rank
    worker["peak_rss_bytes"] = peak_rss_bytes()
    peak_gpu = peak_gpu_bytes()
    if peak_gpu is not None:  # as a built-in GPU run's worker reports it
        worker["peak_gpu_bytes"] = peak_gpu
    worker["frameworks"] = frameworks_seen(sys.modules)
    gathered = _to_rank0(env, (measurements, worker), run.parallel.timeout_s)
    if gathered is None:
        return
    summary = summarize_script(
        [m for m, _ in gathered],
        [w for _, w in gathered],
        run.measurement.warmup_steps_untimed,
        run.measurement.target_accuracy,
    )
    # The launching process made the store and the run's row: never a new empty store here
    # (one deleted meanwhile is an error naming it, not a result with no row to go to).
    with RunStore(store_path, create=False) as store:
        store_script_outcome(store, run_id, run, summary, [w for _, w in gathered])


def peak_gpu_bytes() -> int | None:
    """The most GPU memory the script's tensors held at once in this worker, in bytes (torch's
    allocator's peak, as a built-in GPU run reports it), summed over the GPUs it allocated
    on: one for a data-parallel worker, whichever it picked. None where the script never
    initialised CUDA (a CPU script), which asking would do for it."""
    if not torch.cuda.is_initialized():
        return None
    return sum(torch.cuda.max_memory_allocated(gpu) for gpu in range(torch.cuda.device_count()))


def frameworks_seen(modules: Mapping[str, object]) -> dict[str, str | None]:
    """The frameworks a script used, as found in `modules` (`sys.modules` once it ran),
    with their installed versions. PyTorch is always there (this worker runs on it);
    TensorFlow and JAX only where the script, or a library it called, imported them: a
    figure measured through one framework is not another's."""
    return {
        name: version(name)
        for name, framework in FRAMEWORKS.items()
        if framework.modules[0] in modules
    }


def _to_rank0(
    env: DistEnv, mine: tuple[ScriptMeasurements, dict[str, Any]], timeout_s: float
) -> list[tuple[ScriptMeasurements, dict[str, Any]]] | None:
    """Every rank's (measurements, facts) on rank 0, rank order; None on the other ranks."""
    if env.world_size == 1:
        return [mine]
    timeout = timedelta(seconds=timeout_s)
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    store = dist.TCPStore(addr, port, is_master=False, timeout=timeout)
    store.set(f"{KEY}{env.rank}", pickle.dumps(mine).hex())  # torch types values as str
    if not env.is_main:
        return None
    keys = [f"{KEY}{rank}" for rank in range(env.world_size)]
    try:
        store.wait(keys, timeout)  # the slower ranks may still be training
    except dist.DistStoreError:
        late = [str(rank) for rank, key in enumerate(keys) if not store.check([key])]
        steps = len(mine[0].step_times_s)
        raise WorkloadError(
            f"rank(s) {', '.join(late)} did not finish within --timeout {timeout_s:g} s of "
            f"rank 0's script ending (after {steps} step(s)): a rank that leaves the training "
            "loop early (sys.exit, break, fewer batches) leaves the others waiting in a "
            "collective; give every rank the same steps"
        ) from None
    return [pickle.loads(bytes.fromhex(store.get(key).decode())) for key in keys]  # noqa: S301 - our own workers'
