"""The API's functions about this machine rather than a run: `env()`, its facts as `trainscale
env` shows them; `probe()`, what it achieves, measured and stored as `trainscale probe`
measures and stores it (matmul FLOP/s, the per-operator cost of a training step, host-device
copies, the all-reduce's alpha and beta) for the MFU of runs and the simulator's
`cluster="local"`; and `probes()`, the probes stored before (`trainscale runs probes`)."""

from __future__ import annotations

from typing import Any

from trainscale.api.keywords import check_arguments
from trainscale.api.machine_results import MachineFacts, MachineProbe, StoredProbe, StoredProbes
from trainscale.api.main_guard import check_main_guard
from trainscale.api.progress import say
from trainscale.api.stored import StorePath, store_file
from trainscale.errors import ConfigError
from trainscale.probing.options import KINDS, ProbeOptions
from trainscale.probing.run import run_probe
from trainscale.reporting.probe_list import list_probes
from trainscale.reporting.this_machine import describe_machine


def probe(*, store: StorePath = None, progress: bool = False, **options: Any) -> MachineProbe:
    """Measure this machine and store each measurement, as `trainscale probe` does.

    Options (as the CLI's flags): `device` ('cpu', 'cuda' or 'auto'), `only` (a list of
    'matmul', 'dispatch', 'transfer', 'allreduce'), `threads`, `workers`,
    `allow_oversubscribe`, `precisions`, `matmul_sizes`, `message_sizes` (in bytes),
    `repeats`, `quick` (small sizes: checks the machinery, not a figure)
    and `timeout_s`. A mistake is a ConfigError before anything is measured; a measurement
    that fails (an all-reduce worker dies) raises `trainscale.ProbeFailed`, and nothing of
    that probe is stored. `progress=True` prints a line as each measurement starts.
    """
    check_main_guard("probe")  # the all-reduce's workers import the script again
    given = {"store": store, "progress": progress, **options}
    checked = check_arguments("probe", given, (probe, ()), (ProbeOptions, ()))
    chosen = {key: value for key, value in checked.items() if key not in ("store", "progress")}
    result = run_probe(
        ProbeOptions(**chosen),
        store_file(store),
        progress=(lambda message: say(f"probing {message}")) if progress else None,
    )
    return MachineProbe.from_result(result)


def env(*, store: StorePath = None, **unknown: Any) -> MachineFacts:
    """This machine's facts, as `trainscale env` shows them: CPU, cores, memory, bf16
    support, GPUs, library versions, the theoretical peaks and, from the results store, the
    newest full matmul probe of each device. Measures nothing and never creates a store; a
    `store` given by name that cannot be read is a ConfigError."""
    check_arguments("env", {"store": store, **unknown}, (env, ()))
    return MachineFacts.from_report(describe_machine(store_file(store)))


def probes(
    *,
    kind: str | None = None,
    limit: int | None = None,
    store: StorePath = None,
    **unknown: Any,
) -> StoredProbes:
    """The stored probes (of `kind`: 'matmul', 'dispatch', 'transfer' or 'allreduce'),
    newest first, at most `limit`, as `trainscale runs probes` lists them. The store must
    exist."""
    given = {"kind": kind, "limit": limit, "store": store}
    check_arguments("probes", {**given, **unknown}, (probes, ()))
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a whole number >= 1, got {limit!r}")
    found = list_probes(store_file(store), kind=kind, limit=limit)
    return StoredProbes(tuple(StoredProbe.from_record(record) for record in found.probes))
