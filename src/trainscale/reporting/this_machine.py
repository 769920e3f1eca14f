"""This machine as `trainscale env` and `trainscale.env()` describe it: its facts, peaks and
energy counters, and beside them the newest full matmul probe of each of its devices in the
results store, read by one rule for both."""

from __future__ import annotations

from pathlib import Path

from trainscale.errors import TrainscaleError
from trainscale.frameworks import FRAMEWORKS, PYTORCH, version
from trainscale.hardware.machine import MachineReport, machine_report
from trainscale.results.store import RunStore, default_store_path


def describe_machine(store: Path | None = None) -> MachineReport:
    """This machine, with the probes of `store` (None: the default store) and the other
    frameworks' releases (`MachineReport.frameworks`)."""
    report = _with_probes(store)
    report.frameworks = {name: version(name) for name in FRAMEWORKS if name != PYTORCH}
    return report


def _with_probes(store: Path | None) -> MachineReport:
    """This machine, with the probes of `store`.

    The machine's facts do not depend on a store: a missing one, or a default one that
    cannot be read, is a note where the probes would be. A store that was asked for by name
    and cannot be read is the user's mistake: its error is raised. No store is ever created.
    """
    path = store or default_store_path()
    if not path.is_file():
        return machine_report(no_store=f"no results store at {path}")
    if store is not None:
        with RunStore(path, create=False) as opened:
            return machine_report(opened)
    try:
        with RunStore(path, create=False) as opened:
            return machine_report(opened)
    except TrainscaleError as error:
        return machine_report(no_store=f"cannot read {path}: {error}")
