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

    [[points]]                    # optional explicit configurations, each crossed with the grid
    label = "pinned"
    threads_per_worker = 1
    affinity = "compact"

    [[points]]                    # a point sets options the grid does not
    label = "naive"
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
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import Field, StringConstraints, model_validator

from trainscale.config.files import Expect, TomlFile, load_toml, validate
from trainscale.config.tables import RunOptionsTable, run_options_table

Order = Literal["interleaved", "random"]
ORDERS: tuple[str, ...] = get_args(Order)
MAX_RUNS = 10_000
"""Most runs (configurations x repeats) a sweep may plan. Ten thousand runs of even a
minute each is a week of machine time: a grid larger than that is a typo (an axis of
thousands of values, one axis too many), not an experiment. The size is computed from the
axes' lengths before any configuration is built, so an absurd grid costs nothing."""


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
    workload_options: dict[str, str] = field(default_factory=dict)
    """Workload options given on the command line (`-o KEY=VALUE`): each one is added to
    the configurations whose workload declares it (a recipe may mix workloads)."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "base": self.base,
            "grid": self.grid,
            "points": self.points,
            "repeats": self.repeats,
            "order": self.order,
            "seed": self.seed,
            "skip_invalid": self.skip_invalid,
        }
        # Only when given, so that a sweep without them hashes (and resumes) as before.
        if self.workload_options:
            out["workload_options"] = self.workload_options
        return out

    def workloads(self) -> list[str]:
        """The workloads of the sweep's configurations, in order."""
        names = (
            str({**self.base, **overrides}.get("workload"))
            for _, overrides in self.configurations()
        )
        return list(dict.fromkeys(names))

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


if TYPE_CHECKING:  # made at import time, one field per run option: checkers see their base
    _Base = RunOptionsTable
    _GridTable = RunOptionsTable
    _PointTable = RunOptionsTable
else:
    _Base = run_options_table("BaseTable")
    _GridTable = run_options_table("GridTable", axes=True)
    _PointTable = run_options_table("PointTable")


class _Grid(_GridTable):
    expect = "a table of option = [values]"


class _Point(_PointTable):
    expect = "a table"

    label: Annotated[str, Expect("a string")] | None = None


class SweepFile(TomlFile):
    """A sweep file as written (see the module's docstring); `to_spec()` is the sweep."""

    file_kind = "sweep file"

    name: (
        Annotated[
            str,
            StringConstraints(strip_whitespace=True, min_length=1),
            Expect("a non-empty string"),
        ]
        | None
    ) = None
    repeats: Annotated[int, Field(ge=1), Expect("a whole number >= 1")] = 1
    order: Annotated[Order, Expect(f"one of {', '.join(ORDERS)}")] = "interleaved"
    seed: Annotated[int, Field(ge=0), Expect("a whole number >= 0")] = 0
    skip_invalid: Annotated[bool, Expect("true or false")] = False
    base: _Base = Field(default_factory=_Base)
    grid: _Grid = Field(default_factory=_Grid)
    points: Annotated[list[_Point], Expect("an array of tables ([[points]])")] = []

    @model_validator(mode="before")
    @classmethod
    def _size_first(cls, raw: Any) -> Any:
        # The size first, from the lengths alone: an absurd grid is refused before any of its
        # values is checked or any configuration built.
        # With or without a grid: repeats or points alone may make the sweep too large.
        if isinstance(raw, dict):
            grid = raw.get("grid")
            axes = grid.items() if isinstance(grid, dict) else ()
            lengths = {k: len(v) for k, v in axes if isinstance(v, list)}
            points = raw.get("points")
            repeats = raw.get("repeats", 1)
            _check_size(
                lengths,
                len(points) if isinstance(points, list) else 0,
                repeats if _is_int(repeats) and repeats > 0 else 1,
            )
        return raw

    @model_validator(mode="after")
    def _across_keys(self) -> SweepFile:
        axes = self.grid.given()
        tables = {"base": self.base.given(), "grid": axes}
        tables.update({f"points[{i}]": point.given() for i, point in enumerate(self.points)})
        for where, table in tables.items():
            if "profile" in table:  # each run would write the same files over the last's
                raise ValueError(
                    f"{where}.profile: --profile records one run; profile a configuration "
                    "with `trainscale run ... --profile DIR`"
                )
        for index, point in enumerate(self.points):
            overlap = [key for key in point.given() if key in axes]
            if overlap:
                raise ValueError(
                    f"points[{index}].{overlap[0]}: is also a grid axis; set it in one place"
                )
        if not (
            "workload" in self.base.given()
            or "workload" in axes
            or (self.points and all("workload" in p.given() for p in self.points))
        ):
            raise ValueError(
                "base.workload: missing: give the workload in [base], [grid] or every point"
            )
        return self

    def to_spec(self, default_name: str) -> SweepSpec:
        """The sweep, with option names normalised; `default_name` when the file has none."""
        return SweepSpec(
            name=self.name or default_name,
            base=self.base.given(),
            grid=self.grid.given(),
            points=[{**({"label": p.label} if p.label else {}), **p.given()} for p in self.points],
            repeats=self.repeats,
            order=self.order,
            seed=self.seed,
            skip_invalid=self.skip_invalid,
        )


def load_spec_file(path: Path) -> SweepSpec:
    """Read and validate a sweep file; ConfigError (one line, naming the key) otherwise."""
    return load_toml(path, SweepFile).to_spec(default_name=path.stem)


def parse_spec(raw: dict[str, Any], default_name: str, where: str = "sweep") -> SweepSpec:
    """Validate a sweep given as a dict (a parsed file, or a recipe); ConfigError (one line
    starting with `where`, naming the key) otherwise."""
    return validate(raw, SweepFile, where).to_spec(default_name)


def _check_size(axis_lengths: dict[str, int], num_points: int, repeats: int) -> None:
    """Refuse a sweep of more than MAX_RUNS runs, naming the factors of its size."""
    num_runs = math.prod(axis_lengths.values()) * max(1, num_points) * repeats
    if num_runs > MAX_RUNS:
        factors = [f"{length:,} {key}" for key, length in axis_lengths.items()]
        if num_points:
            factors.append(f"{num_points:,} points")
        factors.append(f"{repeats:,} repeats")
        where = "grid" if axis_lengths else "points" if num_points else "repeats"
        raise ValueError(
            f"{where}: {' x '.join(factors)} = {num_runs:,} runs, more than the {MAX_RUNS:,} a "
            "sweep may plan; shorten an axis or split the sweep"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)
