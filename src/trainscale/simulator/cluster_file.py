"""Cluster files as written: pydantic models of the TOML, with the units parsed.

A cluster is a TOML file (or a shipped preset, `simulator/presets/*.toml`). Every quantity
carries its unit ("100 Gb/s", "5 us", "15.7 TFLOP/s", parsed by `units.py`) and every
section may say where its figures come from (`source`); the presets always do.

```toml
name = "my-cluster"
source = "where the figures come from"
nodes = 4                  # optional: at most this many nodes (default: as many as asked)
devices_per_node = 4

[device]
kind = "cuda"              # 'cpu' or 'cuda'
name = "V100 SXM2"
match = ["V100-SXM2"]      # optional: which stored runs measured this device (by name)
peak_flops = { fp32 = "15.7 TFLOP/s", fp16 = "125 TFLOP/s" }   # or one string
efficiency = 0.35          # share of the peak training reaches (when no run measured it)
memory_bandwidth = "900 GB/s"   # optional: the optimizer's memory-bound time
op_overhead = "10 us"      # optional: fixed cost per dispatched operator (without a run)
straggler_sigma = 0.02     # optional: lognormal spread of per-worker compute time
cores = 20                 # optional, CPU devices: cores of one worker
source = "..."

[intra_node]               # between the devices of one node
alpha = "5 us"
bandwidth = "50 GB/s"
source = "..."

[inter_node]               # one network link per node; needed unless nodes = 1
alpha = "5 us"
bandwidth = "100 Gb/s"
source = "..."

[communication]            # optional
algorithm = "ring"         # ring, tree, halving-doubling, hierarchical, parameter-server, auto
overlap = 1.0              # share of communication that can run beside backward compute
servers = 1                # parameter servers
server_bandwidth = "100 Gb/s"
```

Mistakes (a missing or unknown key, a negative count, a unit that does not parse) raise
`ClusterError`: one line that names the file and the key (config/files.py says how).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, Field, PlainValidator, field_validator, model_validator

from trainscale.config.files import Expect, TomlFile, TomlTable
from trainscale.errors import ConfigError
from trainscale.simulator.collectives import ALGORITHMS, Algorithm
from trainscale.simulator.units import parse_bandwidth, parse_flops, parse_time

DeviceKind = Literal["cpu", "cuda"]
DEVICE_KINDS: tuple[str, ...] = get_args(DeviceKind)
PrecisionKey = Literal["fp32", "tf32", "bf16", "fp16"]
PRECISION_KEYS: tuple[str, ...] = get_args(PrecisionKey)


class ClusterError(ConfigError):
    """A cluster file or preset that cannot be used, said in one line."""


# Quantities with units: the parsers' ValueError is the message ("cannot read '50 GB' as a
# bandwidth; write it like ...").
Bandwidth = Annotated[float, PlainValidator(parse_bandwidth)]
Time = Annotated[float, PlainValidator(parse_time)]
Flops = Annotated[float, PlainValidator(parse_flops)]

Text = Annotated[str, Expect("a string")]
Whole = Annotated[int, Field(ge=1), Expect("a whole number >= 1")]
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False), Expect("in [0, 1]")]
"""A fraction of something; zero allowed."""
PositiveShare = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False), Expect("in (0, 1]")]
Precision = Annotated[PrecisionKey, Expect(f"one of {', '.join(PRECISION_KEYS)}")]


def _one_or_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class DeviceSection(TomlTable):
    """[device]: one GPU, or one CPU worker process with its cores."""

    kind: Annotated[DeviceKind, Expect(f"one of {', '.join(DEVICE_KINDS)}")]
    name: Text | None = None
    match: Annotated[
        list[Annotated[str, Field(min_length=1), Expect("a non-empty string")]],
        BeforeValidator(_one_or_list),
        Expect("a list of non-empty strings"),
    ] = []
    peak_flops: dict[Precision, Flops] = {}
    """Dense peak FLOP/s per precision; one string for every precision is kept under '*'."""
    efficiency: PositiveShare | None = None
    memory_bandwidth: Bandwidth | None = None
    op_overhead: Time | None = None
    cores: Whole | None = None
    straggler_sigma: (
        # As --straggler-sigma: a lognormal sigma of 5 already makes a worker e^5 times slow.
        Annotated[float, Field(ge=0, lt=5, allow_inf_nan=False), Expect("a number in [0, 5)")]
        | None
    ) = None
    source: Text = ""

    @field_validator("peak_flops", mode="wrap")
    @classmethod
    def _one_rate_or_a_table(cls, value: Any, handler: Any) -> dict[str, float]:
        if isinstance(value, dict):
            return handler(value)
        return {"*": parse_flops(value)}


class LinkSection(TomlTable):
    """[intra_node] or [inter_node]: a link's latency and bandwidth."""

    alpha: Time
    bandwidth: Bandwidth
    name: Text = ""
    source: Text = ""


class CommunicationSection(TomlTable):
    """[communication]: how gradients are reduced."""

    algorithm: Annotated[Algorithm, Expect(f"one of {', '.join(ALGORITHMS)}")] = "ring"
    overlap: Share = 1.0
    servers: Whole = 1
    server_bandwidth: Bandwidth | None = None
    source: Text = ""


class ClusterFile(TomlFile):
    """A cluster file (see the module's docstring)."""

    file_kind = "cluster file"
    error = ClusterError

    name: Text = ""
    description: Text = ""
    source: Text = ""
    nodes: Whole | None = None
    devices_per_node: Whole
    device: DeviceSection
    intra_node: LinkSection
    inter_node: LinkSection | None = None
    communication: CommunicationSection = Field(default_factory=CommunicationSection)

    @model_validator(mode="after")
    def _network_unless_one_node(self) -> ClusterFile:
        if self.inter_node is None and self.nodes != 1:
            raise ValueError("[inter_node] section is missing (needed unless nodes = 1)")
        return self
