"""Sweep specs: a base run, grid axes and explicit points, repeats and order; validated.

A sweep file is TOML:

    name = "threads-vs-workers"   # optional (default: the file name)
    repeats = 3                   # runs per configuration (default 1)
    order = "interleaved"         # or "random" (shuffled with `seed`)
    skip_invalid = false          # true: leave out configurations the planner refuses

    [base]                        # any `trainscale run` option, shared by every run
    workload = "mnist-cnn"
    data = "synthetic"
    steps = 60
    evaluate = false

    [grid]                        # every combination of these values
    workers = [1, 2]
    threads_per_worker = [1, 2]

    [[points]]                    # optional explicit configurations, each crossed with the grid
    label = "naive DDP"
    workers = 2
    threads_per_worker = "torch-default"
    affinity = "none"
    allow_oversubscribe = true

Keys are `RunOptions` fields; the command-line spelling (`threads-per-worker`, `timeout`,
`warmup-steps`) is accepted too. Every value is checked against the field's type (strictly:
`workers = "2"` or `workers = true` is an error) before any run starts, and each error names
the key and the reason in one line.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError

ORDERS = ("interleaved", "random")
TOP_LEVEL_KEYS = ("name", "repeats", "order", "seed", "skip_invalid", "base", "grid", "points")
MAX_RUNS = 10_000
"""Most runs (configurations x repeats) a sweep may plan. Ten thousand runs of even a
minute each is a week of machine time: a grid larger than that is a typo (an axis of
thousands of values, one axis too many), not an experiment. The size is computed from the
axes' lengths before any configuration is built, so an absurd grid costs nothing."""

# Command-line spellings whose field name differs; dashes are turned into underscores first.
_ALIASES = {
    "timeout": "timeout_s",
    "warmup_steps": "warmup_steps_untimed",
    "options": "workload_options",
}


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: what to run, how often, in which order."""

    name: str
    base: dict[str, Any]
    """Run options shared by every configuration (field names normalised)."""
    grid: dict[str, list[Any]] = field(default_factory=dict)
    """Axes: every combination of their values is a configuration."""
    points: list[dict[str, Any]] = field(default_factory=list)
    """Explicit configurations (overrides of `base`), each crossed with the grid; a point may
    carry a `label`."""
    repeats: int = 1
    order: str = "interleaved"
    seed: int = 0
    skip_invalid: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base": self.base,
            "grid": self.grid,
            "points": self.points,
            "repeats": self.repeats,
            "order": self.order,
            "seed": self.seed,
            "skip_invalid": self.skip_invalid,
        }

    def spec_hash(self) -> str:
        """Hash of the normalised spec: `--resume` finds the sweep to continue by it."""
        text = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def configurations(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, overrides of base) for every configuration, in spec order."""
        axes = list(self.grid)
        combos = list(itertools.product(*(self.grid[a] for a in axes))) if axes else [()]
        out = []
        for point in self.points or [{}]:
            point = dict(point)
            point_label = point.pop("label", None)
            for combo in combos:
                overrides = {**point, **dict(zip(axes, combo, strict=True))}
                parts = [point_label] if point_label else []
                parts += [f"{key}={_short(overrides[key])}" for key in axes]
                if not parts:  # a point without a label and no grid: describe the point
                    parts = [f"{key}={_short(value)}" for key, value in point.items()]
                out.append((", ".join(parts) or "base", overrides))
        return out


def load_spec_file(path: Path) -> SweepSpec:
    """Read and validate a sweep file; ConfigError (one line, naming the key) otherwise."""
    from trainscale.config.files import load_toml

    raw = load_toml(path, "sweep file")
    return parse_spec(raw, default_name=path.stem, where=f"sweep file {path}")


def parse_spec(raw: dict[str, Any], default_name: str, where: str = "sweep") -> SweepSpec:
    """Validate a sweep given as a dict (a parsed file, or a recipe)."""

    def fail(key: str, reason: str) -> ConfigError:
        return ConfigError(f"{where}: {key}: {reason}")

    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise fail(unknown[0], f"unknown key; valid top-level keys: {', '.join(TOP_LEVEL_KEYS)}")
    name = raw.get("name", default_name)
    if not isinstance(name, str) or not name.strip():
        raise fail("name", "must be a non-empty string")
    repeats = raw.get("repeats", 1)
    if not _is_int(repeats) or repeats < 1:
        raise fail("repeats", f"must be a whole number >= 1, got {repeats!r}")
    order = raw.get("order", "interleaved")
    if order not in ORDERS:
        raise fail("order", f"must be one of {', '.join(ORDERS)}, got {order!r}")
    seed = raw.get("seed", 0)
    if not _is_int(seed) or seed < 0:
        raise fail("seed", f"must be a whole number >= 0, got {seed!r}")
    skip_invalid = raw.get("skip_invalid", False)
    if not isinstance(skip_invalid, bool):
        raise fail("skip_invalid", f"must be true or false, got {skip_invalid!r}")

    base = _check_table(raw.get("base", {}), "base", fail)
    grid_raw = raw.get("grid", {})
    if not isinstance(grid_raw, dict):
        raise fail("grid", "must be a table of option = [values]")
    for key, values in grid_raw.items():
        _field_name(key, f"grid.{key}", fail)
        if not isinstance(values, list):
            raise fail(f"grid.{key}", f"must be a list of values, got {values!r}")
        if not values:
            raise fail(f"grid.{key}", "is empty: an axis needs at least one value")
    points_raw = raw.get("points", [])
    if not isinstance(points_raw, list):
        raise fail("points", "must be an array of tables ([[points]])")
    # The size first, from the lengths alone: an absurd grid is refused before any of its
    # values is checked or any configuration built.
    lengths = {key: len(values) for key, values in grid_raw.items()}
    _check_size(lengths, len(points_raw), repeats, fail)
    grid: dict[str, list[Any]] = {}
    for key, values in grid_raw.items():
        name_ = _field_name(key, f"grid.{key}", fail)
        grid[name_] = [
            _check_value(name_, value, f"grid.{key}[{i}]", fail) for i, value in enumerate(values)
        ]
    points = []
    for index, point in enumerate(points_raw):
        if not isinstance(point, dict):
            raise fail(f"points[{index}]", "must be a table")
        label = point.get("label")
        if label is not None and not isinstance(label, str):
            raise fail(f"points[{index}].label", "must be a string")
        checked = _check_table(
            {k: v for k, v in point.items() if k != "label"}, f"points[{index}]", fail
        )
        overlap = sorted(set(checked) & set(grid))
        if overlap:
            raise fail(f"points[{index}].{overlap[0]}", "is also a grid axis; set it in one place")
        points.append({**({"label": label} if label else {}), **checked})

    spec = SweepSpec(
        name=name.strip(),
        base=base,
        grid=grid,
        points=points,
        repeats=repeats,
        order=order,
        seed=seed,
        skip_invalid=skip_invalid,
    )
    configurations = spec.configurations()
    workloads = {overrides.get("workload", base.get("workload")) for _, overrides in configurations}
    if None in workloads:
        raise fail("base.workload", "missing: give the workload in [base], [grid] or every point")
    return spec


def _check_size(axis_lengths: dict[str, int], num_points: int, repeats: int, fail) -> None:
    """Refuse a sweep of more than MAX_RUNS runs, naming the factors of its size."""
    num_runs = math.prod(axis_lengths.values()) * max(1, num_points) * repeats
    if num_runs > MAX_RUNS:
        factors = [f"{length:,} {key}" for key, length in axis_lengths.items()]
        if num_points:
            factors.append(f"{num_points:,} points")
        factors.append(f"{repeats:,} repeats")
        raise fail(
            "grid",
            f"{' x '.join(factors)} = {num_runs:,} runs, more than the {MAX_RUNS:,} a sweep "
            "may plan; shorten an axis or split the sweep",
        )


def _check_table(table: Any, where: str, fail) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise fail(where, "must be a table of run options")
    checked = {}
    for key, value in table.items():
        name = _field_name(key, f"{where}.{key}", fail)
        checked[name] = _check_value(name, value, f"{where}.{key}", fail)
    return checked


def _field_name(key: str, where: str, fail) -> str:
    name = key.replace("-", "_")
    name = _ALIASES.get(name, name)
    if name not in RunOptions.flat_fields():
        raise fail(where, "unknown run option (see `trainscale run --help`)")
    return name


def _check_value(name: str, value: Any, where: str, fail) -> Any:
    """Strict type check of one option value against the RunOptions field type."""
    from pydantic import TypeAdapter, ValidationError

    if name == "workload_options" and isinstance(value, dict):
        # TOML numbers are fine here: workload options travel as text, like `-o KEY=VALUE`.
        value = {
            str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()
        }
    try:
        return TypeAdapter(_field_types()[name]).validate_python(value, strict=True)
    except ValidationError as error:
        first = error.errors()[0]
        raise fail(where, f"{first['msg'].lower()}, got {value!r}") from None


def _field_types() -> dict[str, Any]:
    return {key: leaf.annotation for key, leaf in RunOptions.flat_fields().items()}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)
