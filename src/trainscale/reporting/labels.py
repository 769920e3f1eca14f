"""Keys and names of configurations: which runs belong together, and what to call them."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import MISSING
from typing import Any

from trainscale.config.options import RunConfig
from trainscale.results.records import RunRecord

# Keys of a resolved config that never name a configuration: labels, derived values (the
# words saying why a precision was chosen follow from the precision), paths.
LABEL_SKIP = frozenset(
    {"tag", "core_sets", "oversubscribed", "data_dir", "download", "precision_reason"}
)

# The settings people think in, first; the rest follow alphabetically.
_LABEL_FIRST = (
    "workload",
    "framework",
    "single_process",
    "data",
    "emulation",
    "workers",
    "threads_per_worker",
    "affinity",
    "precision",
    "global_batch_size",
    "batch_size",
    "lr_scaling",
)


def configuration_key(record: RunRecord) -> str:
    """The configuration a run belongs to: its config hash, else a hash-like key of its config.

    A run stored before config hashes existed is keyed by its config without the tag; a run
    that failed before its config was known stands alone.
    """
    if record.config_hash:
        return record.config_hash
    if record.config:
        settings = {k: v for k, v in record.config.items() if k != "tag"}
        return "config:" + json.dumps(settings, sort_keys=True, default=str)
    return "run:" + record.run_id


def labels_from_differences(
    configs: Mapping[str, Mapping[str, Any]], taken: Iterable[str] = ()
) -> dict[str, str]:
    """Names for configurations from the config keys whose values differ between them.

    Derived values (per-worker batch, the scaled lr, core sets) are left out when what they
    follow from is shown. Two configurations that would get the same name (or a name already
    `taken`) get their key's first 8 characters added.
    """
    differing = differing_keys(configs.values(), LABEL_SKIP)
    shown = set(differing)
    if "batch_size" in shown and shown & {"workers", "global_batch_size"}:
        differing.remove("batch_size")
    if "lr" in shown and shown & {"base_lr", "lr_scaling", "global_batch_size", "workers"}:
        differing.remove("lr")
    labels: dict[str, str] = {}
    for key, config in configs.items():
        labels[key] = settings_text(config, differing or ["workers", "threads_per_worker"])
    used = list(labels.values()) + list(taken)
    for key, text in labels.items():
        if used.count(text) > 1:
            labels[key] = f"{text} [{key.split(':')[-1][:8]}]"
    return labels


def differing_keys(configs: Iterable[Mapping[str, Any]], skip: frozenset[str]) -> list[str]:
    configs = list(configs)
    if len(configs) < 2:
        return []
    names = {name for config in configs for name in config} - skip
    differing = [
        name
        for name in names
        if len({json.dumps(setting(c, name), sort_keys=True, default=str) for c in configs}) > 1
    ]
    first = [name for name in _LABEL_FIRST if name in differing]
    return first + sorted(name for name in differing if name not in first)


def setting(config: Mapping[str, Any], name: str) -> Any:
    """One setting of a stored config. A run stored before the setting existed trained with
    its declared default, as the settings hash takes it (`config.options.settings_hash`):
    such a run and a newer one at that default do not differ by it. A setting without a
    declared default that the config lacks is '?'."""
    if name in config:
        return config[name]
    field = RunConfig.flat_fields().get(name)
    default = field.default() if field is not None else MISSING
    return "?" if default is MISSING else default


def settings_text(config: Mapping[str, Any], names: Iterable[str]) -> str:
    """'workers=2, precision=bf16': the named settings of a stored config; an emulation's
    by its own words ('sync x4', the name docs/emulation.md gives it)."""
    parts = []
    for name in names:
        value = setting(config, name)
        own_words = name == "emulation" and isinstance(value, dict)
        text = value_text(name, value)
        parts.append(text if own_words else f"{name}={text}")
    return ", ".join(parts)


def value_text(name: str, value: Any) -> str:
    if value is None and name == "threads_per_worker":
        return "torch-default"
    if name == "emulation":  # None: a run that is no emulation
        return emulation_text(value)
    if value is None:  # a setting left to its workload's or the script's default
        return "default"
    if name == "script_args" and isinstance(value, list):  # as typed after `--`
        return shlex.join(str(arg) for arg in value) or "(none)"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "{}"
    return str(value)


def unique_labels(names: Mapping[str, str]) -> dict[str, str]:
    """Labels with a key suffix where two configurations share one (a label names one)."""
    values = list(names.values())
    return {
        key: f"{text} [{key.split(':')[-1][:8]}]" if values.count(text) > 1 else text
        for key, text in names.items()
    }


def emulation_text(settings: Any) -> str:
    """An emulation's settings (config["emulation"]) in a few words: 'sync x4', 'local-sgd
    x4 H=8', 'async x4 spread=0.2'; 'none' for a run that is no emulation."""
    if not isinstance(settings, dict):
        return "none"
    text = f"{settings.get('mode')} x{settings.get('workers')}"
    if settings.get("local_steps") is not None:
        text += f" H={settings['local_steps']}"
    if settings.get("staleness_spread") is not None:
        text += f" spread={settings['staleness_spread']}"
    if settings.get("staleness_aware_lr"):
        text += " staleness-aware-lr"
    return text
