"""The API's `probe()`: what this machine achieves, measured and stored as `trainscale probe`
measures and stores it (matmul FLOP/s, the per-operator cost of a training step, host-device
copies, the all-reduce's alpha and beta), for the MFU of runs and the simulator's
`cluster="local"`."""

from __future__ import annotations

from typing import Any

from trainscale.api.keywords import check_arguments
from trainscale.api.main_guard import check_main_guard
from trainscale.api.progress import say
from trainscale.api.results import MachineProbe
from trainscale.api.stored import StorePath, store_file
from trainscale.probing.options import ProbeOptions
from trainscale.probing.run import run_probe


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
