"""From a sweep spec to a plan: every configuration resolved and checked, repeats ordered.

Everything a user can get wrong (option values, cores, data files) fails here, before the
first run starts: a sweep should not die an hour in on its twentieth configuration.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainscale.config.options import RunConfig, RunOptions
from trainscale.data.tensors import Located
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.runner.resolve import prepare
from trainscale.sweeps.spec import SweepSpec
from trainscale.workloads import get_workload


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: a configuration and which repeat of it."""

    item: int
    """Position in the plan (execution order)."""
    label: str
    """The configuration, as the varied options say it (e.g. 'workers=2, precision=bf16')."""
    options: RunOptions
    config: RunConfig
    """Resolved, data located: what runs and what is stored."""
    repeat: int

    @property
    def config_hash(self) -> str:
        return self.config.settings_hash()

    def to_dict(self) -> dict[str, Any]:
        """The plan entry as stored with the sweep."""
        return {
            "item": self.item,
            "label": self.label,
            "config_hash": self.config_hash,
            "repeat": self.repeat,
            "workload": self.config.workload,
        }


@dataclass(frozen=True)
class Plan:
    runs: list[PlannedRun]
    skipped: list[tuple[str, str]]
    """(label, reason) of configurations left out with `skip_invalid`."""
    merged: list[tuple[str, str]] = field(default_factory=list)
    """(label, the label of the configuration it is the same run as): configurations that
    resolve to the same settings on this machine (`precision = "auto"` beside the precision
    it picks here, a value given that is the default), planned once, under the first label."""

    def notes(self) -> list[str]:
        """What the plan left out, a line per fact: one per reason configurations were
        skipped for (four configurations without their data are one fact), one per
        configuration planned as another."""
        by_reason: dict[str, list[str]] = {}
        for label, reason in self.skipped:
            by_reason.setdefault(reason, []).append(label)
        lines = [
            f"skipped {len(labels)} configuration(s) of the sweep ({', '.join(labels)}): {reason}"
            for reason, labels in by_reason.items()
        ]
        lines += [
            f"configuration '{label}' resolves to the same settings as '{same_as}' on this "
            f"machine: planned once, as '{same_as}'"
            for label, same_as in self.merged
        ]
        return lines


def make_plan(spec: SweepSpec) -> Plan:
    """Resolve every configuration (raising TrainscaleError naming it) and order the runs."""
    resolved: list[tuple[str, RunOptions, RunConfig]] = []
    skipped: list[tuple[str, str]] = []
    located: dict[tuple[Any, ...], Located] = {}
    for label, overrides in spec.configurations():
        fields = with_command_line_options({**spec.base, **overrides}, spec.workload_options)
        try:
            options = RunOptions.from_flat(fields)
            if options.nodes.nnodes > 1:  # caught here, before the sweep is stored
                raise ConfigError("a sweep runs on one node; nnodes > 1 is for `trainscale run`")
            config = prepare(options, located)
        except TrainscaleError as error:
            if spec.skip_invalid:
                skipped.append((label, str(error)))
                continue
            raise TrainscaleError(
                f"sweep {spec.name!r}, configuration '{label}': {error}"
            ) from None
        resolved.append((label, options, config))
    resolved, merged = _once_each(resolved)
    if not resolved:
        # One reason once, however many configurations it stopped (missing data stops all).
        by_reason: dict[str, list[str]] = {}
        for label, reason in skipped:
            by_reason.setdefault(reason, []).append(label)
        reasons = "; ".join(
            f"{labels[0]}{f' and {len(labels) - 1} more' if len(labels) > 1 else ''}: {reason}"
            for reason, labels in list(by_reason.items())[:3]
        )
        raise TrainscaleError(f"sweep {spec.name!r} has no runnable configuration ({reasons})")

    slots = [(index, repeat) for repeat in range(spec.repeats) for index in range(len(resolved))]
    if spec.order == "random":
        random.Random(spec.seed).shuffle(slots)
    runs = [
        PlannedRun(item, resolved[index][0], resolved[index][1], resolved[index][2], repeat)
        for item, (index, repeat) in enumerate(slots)
    ]
    return Plan(runs=runs, skipped=skipped, merged=merged)


def _once_each(
    resolved: list[tuple[str, RunOptions, RunConfig]],
) -> tuple[list[tuple[str, RunOptions, RunConfig]], list[tuple[str, str]]]:
    """Configurations with distinct settings (the first of those that share them), and
    (label, first label) of each left out. A sweep's runs are matched to its plan by
    settings and repeat, so two configurations of the same settings would share their runs:
    each would count the other's as its own, in the table and on resuming."""
    first: dict[str, str] = {}
    kept, merged = [], []
    for label, options, config in resolved:
        key = config.settings_hash()
        if key in first:
            merged.append((label, first[key]))
        else:
            first[key] = label
            kept.append((label, options, config))
    return kept, merged


def with_command_line_options(fields: dict[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    """A configuration's fields with the `-o` options given on the command line that its
    workload declares (`load_sweep` has checked that each one is declared by some workload
    of the sweep); an unknown workload is left for `prepare` to name."""
    if not given:
        return fields

    try:
        declared = get_workload(str(fields.get("workload"))).options
    except TrainscaleError:
        return fields
    own = dict(fields.get("workload_options") or {})
    own.update({key: value for key, value in given.items() if key in declared})
    return {**fields, "workload_options": own}
