"""Frameworks side by side: the same workload and parallel setting in each framework.

A report whose runs come from several frameworks has one section per workload and framework
(each with its own baseline, its own 1-worker run: the speedup that framework's users get).
This table lines the sections up: for every workload and setting (workers x threads,
single process or not, precision, global batch), each framework's throughput, its speedup
and efficiency over its own baseline, time to target, and its throughput as a ratio to
PyTorch's at the same setting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from trainscale.reporting.labels import LABEL_SKIP, labels_from_differences, setting
from trainscale.reporting.model import Configuration, ReportData

COLUMNS = (
    "workload",
    "setting",
    "framework",
    "samples/s (median)",
    "vs PyTorch",
    "speedup",
    "efficiency / worker",
    "time to target (s)",
)
"""The columns of the frameworks table."""


def setting_text(config: Configuration) -> str:
    """The setting without the framework: 'workers x threads, precision, global batch B'."""
    threads = config.threads_setting
    how = " in one process" if config.settings.single_process else ""
    return (
        f"{config.workers} x {threads}{how}, {config.precision or 'fp32'}, "
        f"global batch {config.global_batch_size}"
    )


def several_frameworks(data: ReportData) -> bool:
    """Whether the report holds runs of more than one framework."""
    return len({c.framework for s in data.workloads for c in s.configurations}) > 1


def framework_rows(data: ReportData) -> list[dict[str, str]]:
    """One row per workload, setting and framework, settings in first-seen order.

    A setting is every stored setting but the framework (affinity, optimizer, steps...
    included): configurations that differ by more than the framework are not compared, and
    where two settings read alike, the setting column adds what differs."""
    configs = [c for section in data.workloads for c in section.configurations]
    names = sorted({name for c in configs for name in c.config} - _NOT_THE_SETTING)
    groups: dict[tuple[str, str], list[Configuration]] = {}
    for config in configs:
        same = {name: setting(config.config, name) for name in names}
        key = json.dumps(same, sort_keys=True, default=str)
        groups.setdefault((config.workload, key), []).append(config)
    texts = _setting_texts(groups)
    rows = []
    for (workload, key), members in groups.items():
        reference = _pytorch_rate(members)
        for config in sorted(members, key=lambda c: c.framework != "pytorch"):
            rows.append(
                {
                    "workload": workload,
                    "setting": texts[workload, key],
                    "framework": config.framework,
                    "samples/s (median)": _number(config.samples_per_s_median, ".1f"),
                    "vs PyTorch": _ratio(config.samples_per_s_median, reference),
                    "speedup": _number(config.speedup, ".2f", "x"),
                    "efficiency / worker": _percent(config.efficiency_per_worker),
                    "time to target (s)": _number(config.time_to_target_s, ".1f"),
                }
            )
    return rows


# What does not make a setting: the framework, and what never names a configuration.
_NOT_THE_SETTING = LABEL_SKIP | {"framework"}


def _setting_texts(
    groups: Mapping[tuple[str, str], Sequence[Configuration]],
) -> dict[tuple[str, str], str]:
    """Each group's `setting_text`, with what differs added where two groups of a workload
    would read alike."""
    texts = {group: setting_text(members[0]) for group, members in groups.items()}
    alike: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for group, text in texts.items():
        alike.setdefault((group[0], text), []).append(group)
    for same_text in alike.values():
        if len(same_text) < 2:
            continue
        settings = {
            group[1]: {k: v for k, v in groups[group][0].config.items() if k != "framework"}
            for group in same_text
        }
        differences = labels_from_differences(settings)
        for group in same_text:
            texts[group] += f" ({differences[group[1]]})"
    return texts


def _pytorch_rate(members: Sequence[Configuration]) -> float | None:
    """PyTorch's throughput in a group (one configuration at most: a group is one setting)."""
    rates = [c.samples_per_s_median for c in members if c.framework == "pytorch"]
    return rates[0] if rates and rates[0] else None


def _ratio(value: float | None, reference: float | None) -> str:
    if value is None or reference is None:
        return "-"
    return f"{value / reference:.2f}x"


def _number(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"
