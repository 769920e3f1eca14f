"""Run summaries as the trainer writes them, for the fixtures of the report and simulator tests.

A fixture summary starts from the summary a real run stored: one tiny training run of
mnist-cnn on synthetic data through `trainscale run` (a few seconds, once per test process).
The fixture then sets its own figures in it. A figure whose key that run did not write is
refused (in nested tables and in each worker's facts too), so a fixture cannot hold a key
the trainer does not write; and whatever the trainer writes that a fixture does not set is
there as the trainer wrote it, for the code under test to meet.

The figures that depend on the machine (devices, peak, MFU, energy) are worked out by the
product's own functions for the fixture's made-up machine, so they agree with the fixture.
"""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainscale.hardware.energy import combine_nodes, node_energy
from trainscale.hardware.facts import CpuFacts
from trainscale.hardware.figures import RunDevices, hardware_figures

TEMPLATE_RUN = [
    "run",
    "mnist-cnn",
    "--data",
    "synthetic",
    "--steps",
    "3",
    "--warmup-steps",
    "1",
    "--breakdown-every",
    "1",
    "--batch-size",
    "8",
    "--threads-per-worker",
    "1",
    "--quiet",
]
"""The real run every fixture summary starts from (breakdown on, so its keys are there)."""


@functools.cache
def _stored_summary() -> dict[str, Any]:
    from trainscale.results.store import RunStore

    with tempfile.TemporaryDirectory(prefix="trainscale-template-") as folder:
        store = Path(folder) / "runs.db"
        done = subprocess.run(
            [sys.executable, "-m", "trainscale", *TEMPLATE_RUN, "--store", str(store)],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the template run failed:\n{done.stdout}\n{done.stderr}")
        with RunStore(store) as opened:
            (record,) = opened.list_runs()
            # Through JSON, as every reader of the store sees it.
            summary = json.loads(json.dumps(record.summary))
    # The template ran on whatever else this machine was doing: a fixture run is quiet
    # (the keys as the sampler wrote them) unless the fixture says otherwise.
    summary["contention"] = {**summary["contention"], "verdict": "quiet", "reason": "fixture"}
    return summary


def trainer_keys() -> frozenset[str]:
    """The keys of the summary a real run stores."""
    return frozenset(_stored_summary())


def _merge(into: dict[str, Any], values: Mapping[str, Any], where: str) -> None:
    for key, value in values.items():
        if key not in into:
            raise KeyError(f"{where}: the trainer writes no key {key!r}; it writes {sorted(into)}")
        current = into[key]
        if isinstance(value, Mapping) and isinstance(current, dict):
            merged = dict(current)
            _merge(merged, value, f"{where}[{key!r}]")
            into[key] = merged
        elif (
            isinstance(value, list)
            and isinstance(current, list)
            and current
            and isinstance(current[0], dict)
        ):
            items = []
            for index, item in enumerate(value):
                merged = dict(current[0])  # every item has the keys of the real run's first
                _merge(merged, item, f"{where}[{key!r}][{index}]")
                items.append(merged)
            into[key] = items
        else:
            into[key] = value


def trainer_summary(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The real run's summary with `figures` set in it; KeyError for a key it does not have.

    Tables (dicts) are merged key by key, and each item of a list of tables (the workers'
    facts) starts from the real run's first item, so nested keys are checked alike.
    """
    summary = copy.deepcopy(_stored_summary())
    _merge(summary, figures, "summary")
    return summary


def machine_figures(
    *,
    cpu_model: str,
    workers: Sequence[Mapping[str, Any]],
    samples_per_s: float,
    flops_per_sample: float | None,
    interval_s: float,
    precision: str = "fp32",
) -> dict[str, Any]:
    """Devices, peak, MFU and energy of a CPU run on a made-up machine, by the product's code.

    The machine's CPU is one the peak table cannot rate (no flags), and it has no energy
    counters: its peak, MFU and energy are absent, as on such a machine.
    """
    devices = RunDevices("cpu", len(workers), precision)
    cpu = CpuFacts(model_name=cpu_model, vendor=None, family=None, model=None)
    summary = {"flops_per_sample": flops_per_sample, "samples_per_s": samples_per_s}
    figures = hardware_figures(devices, summary, list(workers), cpu_facts=cpu).summary()
    reading = node_energy(
        None,
        None,
        [],
        {"cpu_package": "no RAPL on this machine", "gpu": "not a GPU run"},
        interval_s,
    )
    figures["energy_j"] = combine_nodes([reading])
    return figures
