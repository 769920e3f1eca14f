"""Published scaling results as data: tables the simulator's predictions are checked against.

Each table is a TOML file in `simulator/published/` (shipped with the package), one per
source, system, model and precision: the whole-system training throughput a publication
gives at each device count, on a system described by a cluster preset
(`simulator/presets/`). docs/published-scaling.md lists every table and its source.

```toml
name = "tf-benchmarks-dgx1-p100-resnet50"   # = the file's stem
system = "dgx1-p100"                         # a cluster preset
model = "resnet50"                           # one of MODELS
precision = "fp32"                           # fp32, tf32 or fp16 (mixed precision, AMP)
framework = "TensorFlow 1.x tf_cnn_benchmarks, variable_update=parameter_server"
data = "synthetic"                           # synthetic or real (ImageNet)
source = "full citation: URL, section and table, version"
fit = [1]                                    # device counts that calibrate; the rest are predicted
# fit_from = "other-table"                   # with fit = []: that table's fit points calibrate

[[points]]
devices = 1
nodes = 1
batch_per_device = 64
images_per_s = 219.0                         # whole-system images per second
note = "optional"
```

A point gives `images_per_s`, or, where the source publishes only a scaling efficiency at a
device count (and no single-device throughput of its own to turn it into one),
`efficiency` (speedup over one device / devices, in (0, 1]); never both.

**The fit split.** `fit` names the points a user of the simulator would have measured
themselves: the 1-device point, plus the one-full-node point when the table goes beyond one
node (the device count of one node of the `system` preset). The other points (a full node
when the table stays inside one node; every multi-node point) are left to predict. A table
of efficiencies only has ``fit = []`` and names with `fit_from` the table of the same
source, system and model whose fit points calibrate it (its own points are ratios, checked
against the predicted efficiency). `tests/unit/test_published_tables.py` checks every
shipped table against this rule.

Mistakes raise `PublishedTableError`: one line naming the file, the key path and the reason
(config/files.py says how).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import Field, field_validator, model_validator

from trainscale.config.files import Expect, TomlFile, TomlTable, load_toml
from trainscale.errors import ConfigError
from trainscale.simulator.cluster import ClusterError, load_preset, preset_names

Model = Literal["resnet50", "resnet101", "resnet152", "inception-v3", "vgg16"]
MODELS: tuple[str, ...] = get_args(Model)
"""The ImageNet models published tables may name (the workloads of the same names)."""
Precision = Literal["fp32", "tf32", "fp16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
"""fp16 is mixed precision (AMP): fp16 compute, fp32 master weights."""
Data = Literal["synthetic", "real"]
DATA: tuple[str, ...] = get_args(Data)

_FOLDER = "published"


class PublishedTableError(ConfigError):
    """A published-results table that cannot be used, said in one line."""


Text = Annotated[str, Field(min_length=1), Expect("a non-empty string")]
Whole = Annotated[int, Field(ge=1), Expect("a whole number >= 1")]
Rate = Annotated[float, Field(gt=0, allow_inf_nan=False), Expect("a number > 0")]
Efficiency = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False), Expect("in (0, 1]")]


class PointSection(TomlTable):
    """[[points]]: one device count of a table."""

    expect = "a table ([[points]])"

    devices: Whole
    nodes: Whole
    batch_per_device: Whole
    images_per_s: Rate | None = None
    efficiency: Efficiency | None = None
    note: str = ""

    @model_validator(mode="after")
    def _one_measure(self) -> PointSection:
        if self.devices % self.nodes:
            raise ValueError(
                f"nodes ({self.nodes}) must divide devices ({self.devices}): "
                "every node holds the same number of devices"
            )
        if (self.images_per_s is None) == (self.efficiency is None):
            raise ValueError(
                "give exactly one of images_per_s and efficiency "
                f"(devices = {self.devices} gives {'both' if self.images_per_s else 'neither'})"
            )
        return self


class TableFile(TomlFile):
    """A published table file (see the module's docstring)."""

    file_kind = "published table"
    error = PublishedTableError

    name: Text
    system: Text
    model: Annotated[Model, Expect(f"one of {', '.join(MODELS)}")]
    precision: Annotated[Precision, Expect(f"one of {', '.join(PRECISIONS)}")]
    framework: Text
    data: Annotated[Data, Expect(f"one of {', '.join(DATA)}")]
    source: Text
    fit: Annotated[list[Whole], Expect("a list of whole numbers >= 1")]
    fit_from: Text | None = None
    points: Annotated[list[PointSection], Field(min_length=1), Expect("at least one [[points]]")]

    @field_validator("system")
    @classmethod
    def _a_preset(cls, value: str) -> str:
        names = [n for n in preset_names() if n != "local"]
        if value not in names:
            raise ValueError(f"unknown cluster preset {value!r}; presets: {', '.join(names)}")
        return value

    @model_validator(mode="after")
    def _counts(self) -> TableFile:
        seen: set[int] = set()
        for point in self.points:
            if point.devices in seen:
                raise ValueError(f"points: devices = {point.devices} appears twice")
            seen.add(point.devices)
        for count in self.fit:
            if count not in seen:
                raise ValueError(f"fit: no point has devices = {count}")
        if len(set(self.fit)) != len(self.fit):
            raise ValueError("fit: a device count appears twice")
        if self.fit_from is not None and self.fit:
            raise ValueError("fit: must be [] when fit_from names the table that calibrates")
        return self


@dataclass(frozen=True)
class PublishedPoint:
    """One published measurement: whole-system throughput (or only the scaling efficiency)
    of `devices` devices over `nodes` nodes."""

    devices: int
    nodes: int
    batch_per_device: int
    images_per_s: float | None
    efficiency: float | None
    note: str = ""


@dataclass(frozen=True)
class PublishedTable:
    """One published scaling table, with the preset of the system it ran on."""

    name: str
    system: str
    model: str
    precision: str
    framework: str
    data: str
    source: str
    fit: tuple[int, ...]
    """Device counts whose points calibrate; the other points are predicted."""
    fit_from: str | None
    points: tuple[PublishedPoint, ...]
    """In increasing device count."""
    path: str
    """The file it was read from ('published:NAME' for a shipped table)."""

    @property
    def predicted(self) -> tuple[PublishedPoint, ...]:
        """The points left to predict (not in `fit`)."""
        return tuple(p for p in self.points if p.devices not in self.fit)

    def point(self, devices: int) -> PublishedPoint:
        """The point at `devices` devices; KeyError if the table has none."""
        for point in self.points:
            if point.devices == devices:
                return point
        raise KeyError(devices)


def published_table_names() -> list[str]:
    """The shipped tables (`simulator/published/*.toml`), sorted."""
    folder = resources.files("trainscale.simulator") / _FOLDER
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_table(path_or_name: Path | str) -> PublishedTable:
    """A shipped table by name, or a table file by path (anything with a '/' or ending in
    '.toml'). PublishedTableError, one line, for a table that cannot be used."""
    return _load_table(path_or_name, ())


def _load_table(path_or_name: Path | str, loading: tuple[str, ...]) -> PublishedTable:
    """`load_table`, from within the tables named in `loading` (each one's `fit_from`
    names the next): a table met again there is a cycle."""
    text = str(path_or_name)
    if isinstance(path_or_name, Path) or text.endswith(".toml") or "/" in text:
        file = load_toml(Path(path_or_name), TableFile)
        return _table_of(file, Path(path_or_name), loading=loading)
    if text not in published_table_names():
        raise PublishedTableError(
            f"unknown published table {text!r}; tables: {', '.join(published_table_names())}"
        )
    resource = resources.files("trainscale.simulator") / _FOLDER / f"{text}.toml"
    with resources.as_file(resource) as path:
        file = load_toml(path, TableFile)
        return _table_of(file, path, origin=f"published:{text}", loading=loading)


def load_all() -> list[PublishedTable]:
    """Every shipped table, by name."""
    return [load_table(name) for name in published_table_names()]


def _fit_from(file: TableFile, where: str, loading: tuple[str, ...]) -> str | None:
    """The shipped table whose fit points calibrate this one (a table of efficiencies has
    no point of its own to fit): same system, model and precision, and fitted itself.
    `loading`: the tables whose `fit_from` led here, this one last."""
    if file.fit_from is None:
        return None
    if Path(file.fit_from).stem in loading:
        # Loading it would load this one again, for ever (a RecursionError pages long).
        start = loading.index(Path(file.fit_from).stem)
        if start == len(loading) - 1:
            raise PublishedTableError(
                f"{where}: fit_from: names this table itself; name the table whose fit "
                "points calibrate it"
            )
        cycle = " -> ".join([*loading[start:], Path(file.fit_from).stem])
        raise PublishedTableError(f"{where}: fit_from: the tables name each other: {cycle}")
    # An unknown name: one line listing the tables.
    other = _load_table(file.fit_from, loading)
    for key in ("system", "model", "precision"):
        if getattr(other, key) != getattr(file, key):
            raise PublishedTableError(
                f"{where}: fit_from: table {other.name} has {key} {getattr(other, key)!r}, "
                f"not {getattr(file, key)!r}"
            )
    if not other.fit:
        raise PublishedTableError(f"{where}: fit_from: table {other.name} has no fit points")
    return other.name


def _table_of(
    file: TableFile, path: Path, origin: str | None = None, loading: tuple[str, ...] = ()
) -> PublishedTable:
    where = f"{TableFile.file_kind} {path}"
    if file.name != path.stem:
        raise PublishedTableError(
            f"{where}: name: must be the file's stem {path.stem!r}, got {file.name!r}"
        )
    try:
        per_node = load_preset(file.system).devices_per_node
    except ClusterError as exc:  # a preset that exists but does not load: say which
        raise PublishedTableError(f"{where}: system: {exc}") from None
    for i, point in enumerate(file.points):
        if point.devices > point.nodes * per_node:
            raise PublishedTableError(
                f"{where}: points[{i}]: {point.devices} devices on {point.nodes} node(s) "
                f"do not fit preset {file.system!r} ({per_node} devices per node)"
            )
    points = sorted(
        (
            PublishedPoint(
                devices=p.devices,
                nodes=p.nodes,
                batch_per_device=p.batch_per_device,
                images_per_s=p.images_per_s,
                efficiency=p.efficiency,
                note=p.note,
            )
            for p in file.points
        ),
        key=lambda p: p.devices,
    )
    return PublishedTable(
        name=file.name,
        system=file.system,
        model=file.model,
        precision=file.precision,
        framework=file.framework,
        data=file.data,
        source=file.source,
        fit=tuple(sorted(file.fit)),
        fit_from=_fit_from(file, where, (*loading, file.name)),
        points=tuple(points),
        path=origin or str(path),
    )
