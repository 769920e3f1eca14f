"""Every option of a run, declared once: type, default, choices, flag and help live here.

A run's options come in groups, each a frozen dataclass whose field docstrings are the
`--help` text (config/cli.py reads them): `DataOptions`, `ParallelOptions`,
`OptimisationOptions`, `MeasurementOptions` and `NodeOptions`. `RunOptions` is what the user
asked for (None = "the workload's or planner's default"); `RunConfig` is the resolved run
that trains and is stored, built from the same data, measurement and node groups and from
resolved parallel and optimisation groups (runner/resolve.py makes it).

Outside the code, options are spelled flat: a sweep file's `workers = [1, 2]`, the stored
config of a run, `RunOptions.with_(workers=2)`. Flat names are unique across groups
(`option_fields()` maps each to its group and field), and the stored, flat form of a config
is the same as before the options were grouped, so stores and sweep files keep working.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from typing import Any, Literal, get_args, get_origin, get_type_hints

from trainscale.config.limits import MAX_BUCKET_CAP_MB, MAX_EPOCHS, MAX_SEED, MAX_STEPS
from trainscale.errors import ConfigError

DataKind = Literal["real", "synthetic"]
DeviceChoice = Literal["cpu", "cuda", "auto"]
Device = Literal["cpu", "cuda"]
Precision = Literal["fp32", "bf16", "fp16"]
PrecisionRequest = Literal["auto", "fp32", "bf16", "fp16"]
LrScaling = Literal["none", "linear", "sqrt"]
Optimizer = Literal["sgd", "adam", "adamw"]
Schedule = Literal["constant", "onecycle", "cosine", "step"]
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
SCHEDULES: tuple[str, ...] = get_args(Schedule)
CompileMode = Literal["default", "reduce-overhead", "max-autotune"]
Framework = Literal["pytorch", "tensorflow", "jax"]

THREADS_TORCH_DEFAULT = "torch-default"
"""The --threads-per-worker value that leaves torch's own thread count (the pitfall)."""

DEFAULT_RDZV_TIMEOUT_S = 300.0
"""How long a node waits for the rendezvous endpoint and the other nodes, by default."""


def option(
    default: Any = None,
    *,
    flag: str | None = None,
    short: str | None = None,
    metavar: str | None = None,
    key: str | None = None,
    parse: Callable[[str], Any] | None = None,
    negate: bool = False,
    exclusive: str | None = None,
    pairs: bool = False,
    many: bool = False,
    path: bool = False,
    setting: bool = True,
) -> Any:
    """A dataclass field that is also a command-line option.

    Args:
        default: the default value (a dict default for `pairs` fields is copied per
            instance); `dataclasses.MISSING` for a required option.
        flag: the long flag; default `--` + the field name with dashes.
        short: a one-letter alias such as '-o'.
        metavar: the value's placeholder in `--help`.
        key: the flat name (sweep files, stored configs) when it differs from the field name.
        parse: turns the command-line text into the value (default: from the field's type).
        negate: a boolean whose flag turns it off (`--no-eval` sets `evaluate` to False).
        exclusive: options sharing this name are mutually exclusive on the command line.
        pairs: a repeatable KEY=VALUE option collected into a dict.
        many: one or more values after the flag (`--calibrate-from A B`), kept as a tuple.
        path: a file or directory, kept as its text (from Python, an os.PathLike is taken).
        setting: False for fields that label or launch a run without changing how it trains
            (left out of `RunConfig.settings_hash`).
    """
    metadata = {
        "flag": flag,
        "short": short,
        "metavar": metavar,
        "key": key,
        "parse": parse,
        "negate": negate,
        "exclusive": exclusive,
        "pairs": pairs,
        "many": many,
        "path": path,
        "setting": setting,
    }
    if pairs:
        return field(default_factory=lambda: dict(default or {}), metadata=metadata)
    if default is MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def _threads(text: str) -> int | str:
    if text == THREADS_TORCH_DEFAULT:
        return text
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"expected a whole number or {THREADS_TORCH_DEFAULT!r}, got {text!r}"
        ) from None


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


# -- checks shared by the groups' __post_init__ ---------------------------------------------


def check_positive(name: str, value: object, *, integer: bool = False) -> None:
    """ConfigError naming `--name` unless `value` is None or a positive (whole) number."""
    if value is None:
        return
    if integer and (not isinstance(value, int) or isinstance(value, bool)):
        raise ConfigError(f"--{name} must be a whole number, got {value!r}")
    if isinstance(value, bool) or not (
        isinstance(value, (int, float)) and math.isfinite(value) and value > 0
    ):
        raise ConfigError(f"--{name} must be a positive number, got {value!r}")


def check_choice(name: str, value: Any, annotation: Any) -> None:
    """ConfigError naming `--name` unless `value` is one of the Literal's choices (or None)."""
    valid = literal_choices(annotation)
    if value is not None and valid and value not in valid:
        raise ConfigError(f"--{name} must be one of {', '.join(valid)}; got {value!r}")


def literal_choices(annotation: Any) -> tuple[str, ...]:
    """The values of a Literal annotation (also inside `X | None`); () for other types."""
    if get_origin(annotation) is Literal:
        return tuple(get_args(annotation))
    for arg in get_args(annotation):
        if get_origin(arg) is Literal:
            return tuple(get_args(arg))
    return ()


def _check_choices(group: Any) -> None:
    hints = get_type_hints(type(group))
    for item in fields(group):
        check_choice(flag_name(item), getattr(group, item.name), hints[item.name])


def flag_name(item: Any) -> str:
    """The option's long flag without the dashes, for messages: 'threads-per-worker'."""
    flag = item.metadata.get("flag") if item.metadata else None
    return (flag or "--" + item.name.replace("_", "-")).lstrip("-")


# -- the groups ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataOptions:
    """data: which dataset files, or synthetic tensors."""

    kind: DataKind = option("real", flag="--data", key="data")
    """real dataset files, or random tensors of the same shapes (throughput only: no accuracy
    is reported)"""
    data_dir: str | None = option(None, metavar="DIR", path=True)
    """directory with the dataset files; when given, the only place looked in (else
    $TRAINSCALE_DATA_DIR, the cache, other tools' folders)"""
    download: bool = option(True, flag="--no-download", negate=True)
    """never download: fail if the files are not found locally (by default a missing dataset
    is downloaded into the cache and its checksum verified)"""
    workload_options: Mapping[str, str] = option(
        {},
        flag="--workload-option",
        short="-o",
        metavar="KEY=VALUE",
        pairs=True,
        parse=_key_value,
    )
    """a workload-specific option, repeatable (see `trainscale workloads`)"""

    def __post_init__(self) -> None:
        _check_choices(self)


@dataclass(frozen=True)
class ParallelOptions:
    """parallelism: devices, worker processes, threads and pinning."""

    framework: Framework = option("pytorch")
    """the framework that trains the model: pytorch (DDP), tensorflow (Keras 3 and
    tf.distribute) or jax (jax.distributed); the last two are extras (pip install
    'trainscale[tensorflow]' / 'trainscale[jax]'); see docs/frameworks.md"""
    single_process: bool = option(False)
    """with --workers N > 1, run the N replicas inside one process, as single-machine
    tutorials do (TensorFlow MirroredStrategy over N logical CPU devices, JAX over N host
    devices); TensorFlow and JAX only"""
    device: DeviceChoice = option("cpu")
    """train on the CPU, or one GPU per worker (cuda); auto = cuda when a GPU is visible"""
    workers: int = option(1, metavar="N")
    """worker processes on each node, >= 1; more than 1 trains data-parallel (DDP: gloo on
    the CPU, NCCL on GPUs); at most the usable cores // threads unless
    --allow-oversubscribe, and never more than the machine can start (docs/methodology.md)"""
    threads_per_worker: int | str | None = option(None, metavar="T", parse=_threads)
    """intra-op threads per worker, >= 1 (default: cores // workers); 'torch-default' leaves
    torch's own choice (the oversubscription pitfall)"""
    affinity: str = option("compact", metavar="MODE")
    """pin workers to cores: none, compact, spread (across NUMA nodes), or per-worker core
    lists such as '0,1;2,3'"""
    allow_oversubscribe: bool = option(False)
    """run even if workers x threads exceeds the available cores (to show the pitfall; the
    machine's own limit on worker processes still holds)"""
    timeout_s: float = option(300.0, flag="--timeout", metavar="S")
    """seconds a worker waits for a silent peer before the run fails, > 0"""
    bucket_cap_mb: float | None = option(None, metavar="MB")
    """DDP gradient bucket size in MiB, > 0 (default: torch's, 25)"""
    grad_accum: int = option(1, metavar="K")
    """split each worker's batch into K micro-batches (K >= 1 dividing the batch); only the
    last one all-reduces (DDP no_sync)"""

    def __post_init__(self) -> None:
        _check_choices(self)
        check_positive("workers", self.workers, integer=True)
        if self.threads_per_worker != THREADS_TORCH_DEFAULT:
            check_positive("threads-per-worker", self.threads_per_worker, integer=True)
        check_positive("timeout", self.timeout_s)
        check_positive("grad-accum", self.grad_accum, integer=True)
        check_positive("bucket-cap-mb", self.bucket_cap_mb)
        if self.bucket_cap_mb is not None and self.bucket_cap_mb > MAX_BUCKET_CAP_MB:
            raise ConfigError(
                f"--bucket-cap-mb must be at most {MAX_BUCKET_CAP_MB:,} (a TiB), "
                f"got {self.bucket_cap_mb:g}"
            )


@dataclass(frozen=True)
class OptimisationOptions:
    """training: batch, optimiser, learning rate, precision and run length."""

    batch_size: int | None = option(None, metavar="B", exclusive="batch")
    """per-worker batch size, from 1 to a worker's share of the training set (default: the
    workload's recipe)"""
    global_batch_size: int | None = option(None, metavar="B", exclusive="batch")
    """global batch size, split evenly over the workers (a multiple of them; each share at
    most a worker's share of the training set)"""
    optimizer: Optimizer | None = option(None)
    """the optimiser (default: the workload's recipe)"""
    lr: float | None = option(None)
    """peak learning rate at the workload's reference batch size, before lr scaling, > 0
    (default: the workload's recipe)"""
    lr_scaling: LrScaling = option("none")
    """scale the lr with global batch / reference batch (Goyal et al. 2017), with warm-up"""
    warmup_fraction: float | None = option(None, metavar="F")
    """share of the steps with linear lr warm-up, in [0, 1) (default: the recipe's; at least
    0.1 when a scaled-up lr needs it)"""
    schedule: Schedule | None = option(None)
    """lr schedule (default: the workload's recipe)"""
    weight_decay: float | None = option(None, metavar="WD")
    """L2 weight decay, >= 0 (default: the workload's recipe)"""
    precision: PrecisionRequest = option("auto")
    """auto = bf16 where the device computes bf16 natively (GPUs from Ampere on; CPUs with
    AVX512-BF16 or AMX), else fp32 (the choice and its reason are printed and stored); bf16
    = autocast to bfloat16; fp16 = autocast to float16 with loss scaling (GPU only)"""
    compile: bool = option(False)
    """torch.compile the model and its loss (compilation is timed apart, off the training
    clock)"""
    compile_mode: CompileMode = option("default")
    """torch.compile's mode, with --compile: reduce-overhead also replays each step's forward
    and backward as CUDA graphs, one launch for dozens of kernels (for steps the GPU's host
    launches slower than the GPU runs them); max-autotune also tunes each kernel (long
    compiles). On a CPU every mode compiles as default does"""
    epochs: float | None = option(None, exclusive="length")
    """epochs, > 0 and at most 1,000,000, fractions allowed (default: the workload's
    recipe)"""
    steps: int | None = option(None, exclusive="length")
    """optimizer steps, from 1 to 1,000,000,000 (instead of epochs)"""
    seed: int = option(0)
    """random seed, from 0 to 4,294,967,295: the model's initialisation, the data order,
    synthetic data"""

    def __post_init__(self) -> None:
        _check_choices(self)
        check_positive("batch-size", self.batch_size, integer=True)
        check_positive("global-batch-size", self.global_batch_size, integer=True)
        check_positive("lr", self.lr)
        check_positive("epochs", self.epochs)
        check_positive("steps", self.steps, integer=True)
        if self.batch_size is not None and self.global_batch_size is not None:
            raise ConfigError("give --batch-size (per worker) or --global-batch-size, not both")
        if self.epochs is not None and self.steps is not None:
            # As the command line refuses the pair: from Python or a sweep file, it would
            # train `steps` and be stored as neither run.
            raise ConfigError(
                f"give --epochs or --steps, not both (got {self.epochs:g} and {self.steps})"
            )
        if self.compile_mode != "default" and not self.compile:
            raise ConfigError(
                f"--compile-mode {self.compile_mode} is a mode of --compile: give both"
            )
        if self.warmup_fraction is not None and not 0 <= self.warmup_fraction < 1:
            raise ConfigError(f"--warmup-fraction must be in [0, 1), got {self.warmup_fraction!r}")
        if self.weight_decay is not None and not (
            math.isfinite(self.weight_decay) and self.weight_decay >= 0
        ):
            raise ConfigError(f"--weight-decay must be >= 0, got {self.weight_decay!r}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"--seed must be from 0 to {MAX_SEED:,}, got {self.seed}")
        if self.steps is not None and self.steps > MAX_STEPS:
            raise ConfigError(f"--steps must be at most {MAX_STEPS:,}, got {self.steps}")
        if self.epochs is not None and self.epochs > MAX_EPOCHS:
            raise ConfigError(f"--epochs must be at most {MAX_EPOCHS:,}, got {self.epochs:g}")


PROFILE_STEPS = 20
"""Steps `--profile` records by default."""


@dataclass(frozen=True)
class MeasurementOptions:
    """measurement: evaluation, target and what the clocks leave out."""

    eval_every: int | None = option(None, metavar="STEPS")
    """evaluate every STEPS steps (>= 1), off the training clock (default: 4 times an
    epoch)"""
    evaluate: bool = option(True, flag="--no-eval", negate=True)
    """skip evaluation: throughput only, no accuracy reported"""
    target_accuracy: float | None = option(None, metavar="ACC")
    """test accuracy for time to target, a fraction in (0, 1] (default: the workload's)"""
    stop_at_target: bool = option(False)
    """end training at the first evaluation that reaches the target accuracy (the final
    accuracy is then that evaluation's); a run that never reaches it trains its whole
    recipe. Needs an accuracy to reach: not with --no-eval or --data synthetic"""
    warmup_steps_untimed: int = option(5, flag="--warmup-steps", metavar="N")
    """first steps left out of step-time statistics, >= 0 (they are trained, and on the
    training clock)"""
    breakdown_every: int = option(25, metavar="N")
    """time data / forward / backward / optimizer / exposed communication on every N-th step
    after warm-up; 0 = never"""
    profile: str | None = option(None, metavar="DIR", path=True)
    """record PyTorch's profiler over the first --profile-steps steps into DIR: a trace per
    worker (open it in ui.perfetto.dev), its operators by time and each step's time. The
    profiler slows the steps it records: a profiled run is stored apart from unprofiled
    ones (docs/methodology.md)"""
    profile_steps: int = option(PROFILE_STEPS, metavar="N")
    """steps --profile records, from the first, >= 1"""

    def __post_init__(self) -> None:
        check_positive("eval-every", self.eval_every, integer=True)
        check_positive("profile-steps", self.profile_steps, integer=True)
        if self.stop_at_target and not self.evaluate:
            raise ConfigError(
                "--stop-at-target needs an accuracy to reach: it cannot go with --no-eval"
            )
        # A setting that cannot apply is refused rather than ignored, as --compile-mode is
        # without --compile. (A target with --no-eval is every resolved run's: not checked.)
        if self.eval_every is not None and not self.evaluate:
            raise ConfigError("--eval-every is how often to evaluate: it cannot go with --no-eval")
        if self.profile is None and self.profile_steps != PROFILE_STEPS:
            raise ConfigError(
                f"--profile-steps {self.profile_steps} is a setting of --profile DIR: give both"
            )
        if self.target_accuracy is not None and not 0 < self.target_accuracy <= 1:
            raise ConfigError(
                f"--target-accuracy is a fraction in (0, 1], got {self.target_accuracy!r}"
            )
        if self.warmup_steps_untimed < 0:
            raise ConfigError("--warmup-steps must be >= 0")
        if self.breakdown_every < 0:
            raise ConfigError(f"--breakdown-every must be >= 0, got {self.breakdown_every}")


@dataclass(frozen=True)
class NodeOptions:
    """several nodes: run the same command on every node; --workers is per node. Global
    rank 0 stores the run. Exit status 3: the nodes never formed the job (nothing stored).
    See docs/multinode.md."""

    nnodes: int = option(1, metavar="N")
    """nodes in the job, >= 1; world size = N x --workers"""
    rdzv_endpoint: str | None = option(None, metavar="HOST:PORT", setting=False)
    """where the nodes meet: an address of one node that every node can reach (required
    when N > 1)"""
    rdzv_id: str | None = option(None, metavar="ID", setting=False)
    """job id, the same on every node (under SLURM: slurm-JOB-STEP; required otherwise when
    N > 1)"""
    rdzv_timeout_s: float | None = option(
        DEFAULT_RDZV_TIMEOUT_S, flag="--rdzv-timeout", metavar="S", setting=False
    )
    """seconds a node waits for the endpoint and the other nodes, > 0"""

    def __post_init__(self) -> None:
        check_positive("nnodes", self.nnodes, integer=True)
        check_positive("rdzv-timeout", self.rdzv_timeout_s)


# -- flat names --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlatField:
    """One leaf of a grouped run: its flat name, where it lives and how it is declared."""

    key: str
    """The flat name: a sweep file's key, a stored config's key."""
    group: str | None
    """The attribute of the run holding its group (None: a top-level field)."""
    name: str
    """The field's name inside its group."""
    annotation: Any
    """The field's type."""
    item: Any
    """The dataclasses.Field (default, metadata)."""

    def default(self) -> Any:
        if self.item.default_factory is not MISSING:
            return self.item.default_factory()
        return self.item.default

    @property
    def is_setting(self) -> bool:
        """Whether it shapes how the run trains (else it labels or launches it)."""
        return bool(self.item.metadata.get("setting", True)) if self.item.metadata else True


def _leaves(cls: type) -> dict[str, FlatField]:
    hints = get_type_hints(cls)
    leaves: dict[str, FlatField] = {}
    for item in fields(cls):
        annotation = hints[item.name]
        if isinstance(annotation, type) and hasattr(annotation, "__dataclass_fields__"):
            inner = get_type_hints(annotation)
            for sub in fields(annotation):
                key = (sub.metadata.get("key") if sub.metadata else None) or sub.name
                leaves[key] = FlatField(key, item.name, sub.name, inner[sub.name], sub)
        else:
            key = (item.metadata.get("key") if item.metadata else None) or item.name
            leaves[key] = FlatField(key, None, item.name, annotation, item)
    return leaves


class _Grouped:
    """Flat access to a run made of groups: `flat()`, `from_flat()`, `with_()`."""

    @classmethod
    def flat_fields(cls) -> dict[str, FlatField]:
        """Every leaf by its flat name, in declaration order."""
        return _cached_leaves(cls)  # type: ignore[arg-type]  # a class is hashable

    def flat(self) -> dict[str, Any]:
        """Every leaf's value by flat name (the stored form of a config)."""
        out: dict[str, Any] = {}
        for key, leaf in self.flat_fields().items():
            holder = self if leaf.group is None else getattr(self, leaf.group)
            value = getattr(holder, leaf.name)
            out[key] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]):
        """The run from flat names; an unknown name is a ConfigError naming it, a missing
        one takes its default."""
        leaves = cls.flat_fields()
        unknown = sorted(set(values) - set(leaves))
        if unknown:
            raise ConfigError(
                f"unknown {cls.__name__} field {unknown[0]!r}; known: {', '.join(leaves)}"
            )
        top: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {}
        for key, value in values.items():
            leaf = leaves[key]
            if leaf.group is None:
                top[leaf.name] = value
            else:
                groups.setdefault(leaf.group, {})[leaf.name] = value
        hints = get_type_hints(cls)
        for name, group_values in groups.items():
            top[name] = hints[name](**group_values)
        return cls(**top)

    def with_(self, **changes: Any):
        """A copy with some leaves changed, by flat name."""
        return type(self).from_flat({**self.flat(), **changes})


@cache
def _cached_leaves(cls: type) -> dict[str, FlatField]:
    return _leaves(cls)


def option_leaves(cls: type) -> dict[str, FlatField]:
    """The options a dataclass of options declares, by flat name, in declaration order
    (a group's fields under their own flat names; the run's groups are flattened)."""
    return _cached_leaves(cls)


# -- the run as asked for, and as resolved -----------------------------------------------------


@dataclass(frozen=True)
class RunOptions(_Grouped):
    """A run as the user asked for it; None means "the workload's or planner's default"."""

    workload: str
    """workload name (see `trainscale workloads`)"""
    data: DataOptions = field(default_factory=DataOptions)
    parallel: ParallelOptions = field(default_factory=ParallelOptions)
    optimisation: OptimisationOptions = field(default_factory=OptimisationOptions)
    measurement: MeasurementOptions = field(default_factory=MeasurementOptions)
    nodes: NodeOptions = field(default_factory=NodeOptions)
    tag: str | None = option(None, setting=False)
    """free-form label stored with the run"""

    @classmethod
    def of(cls, workload: str, **flat: Any) -> RunOptions:
        """The options of `workload` with some leaves set by flat name:
        `RunOptions.of("mnist-cnn", workers=2, data="synthetic")`."""
        return cls.from_flat({"workload": workload, **flat})

    def __post_init__(self) -> None:
        if isinstance(self.tag, str) and not self.tag.isprintable():
            # A newline or a terminal escape would be printed raw by every listing.
            raise ConfigError(f"--tag {self.tag!r} holds a control character; a tag is text")
        if self.measurement.stop_at_target and self.data.kind == "synthetic":
            raise ConfigError(
                "--stop-at-target needs an accuracy to reach: synthetic data has none "
                "(use real data, or leave --stop-at-target out)"
            )
        world = self.parallel.workers * self.nodes.nnodes
        global_batch = self.optimisation.global_batch_size
        if global_batch is not None and global_batch % world:
            across = f" x --nnodes {self.nodes.nnodes}" if self.nodes.nnodes > 1 else ""
            raise ConfigError(
                f"--global-batch-size {global_batch} is not divisible by "
                f"--workers {self.parallel.workers}{across}"
            )


@dataclass(frozen=True)
class ParallelConfig:
    """How a resolved run is spread over devices, processes and cores."""

    device: Device
    """'cpu' or 'cuda' (resolved from 'auto')."""
    workers: int
    """Worker processes on each node."""
    threads_per_worker: int | None
    """Intra-op threads per worker; None = not set by trainscale (the 'torch-default'
    pitfall setting)."""
    affinity: str
    """The pinning plan as the planner describes it."""
    core_sets: list[list[int]] | None
    """Cores each worker is pinned to (index = local rank); None = not pinned."""
    oversubscribed: bool
    """Whether workers x threads exceeds the cores (asked for, to show the pitfall)."""
    timeout_s: float
    """How long a collective may wait for a silent worker before the run fails."""
    bucket_cap_mb: float | None
    """DDP gradient bucket size in MiB (torch's default, 25, when None)."""
    grad_accum: int
    """Micro-batches per optimizer step; all but the last skip the all-reduce (no_sync)."""
    channels_last: bool
    """Whether convolutions run in channels_last memory format (the workload says)."""
    framework: Framework = "pytorch"
    """The framework that trains the model (runs stored before frameworks: PyTorch)."""
    single_process: bool = False
    """Whether the `workers` replicas run inside one process (TensorFlow / JAX only)."""


@dataclass(frozen=True)
class OptimisationConfig:
    """The resolved recipe: every hyper-parameter concrete."""

    batch_size: int
    """Per-worker batch size."""
    global_batch_size: int
    """Samples per optimizer step over all workers and nodes."""
    optimizer: Optimizer
    lr: float
    """Peak lr after scaling to the global batch."""
    base_lr: float
    """Peak lr at the reference batch, before scaling."""
    reference_batch_size: int
    """The batch the recipe's lr was tuned at."""
    lr_scaling: LrScaling
    schedule: Schedule
    warmup_fraction: float
    momentum: float
    nesterov: bool
    weight_decay: float
    label_smoothing: float
    precision: Precision
    compile: bool
    epochs: float
    steps: int | None
    """Total optimizer steps; overrides epochs when given."""
    seed: int
    precision_reason: str | None = option(None, setting=False)
    """Why the run trains in `precision` ('auto: this CPU computes bf16 natively ...');
    None for runs stored before the choice was recorded. Not a setting: the precision is."""
    compile_mode: CompileMode = option("default")
    """torch.compile's mode when `compile` (runs stored before it compiled in the default)."""


@dataclass(frozen=True)
class RunConfig(_Grouped):
    """A fully resolved run: every value concrete. Stored with the result (flat)."""

    workload: str
    data: DataOptions
    """The data asked for; `data_dir` is where the parent found real files."""
    parallel: ParallelConfig
    optimisation: OptimisationConfig
    measurement: MeasurementOptions
    """As asked for, with `target_accuracy` filled in from the workload."""
    nodes: NodeOptions
    """The job's nodes; the rendezvous fields are None on one node."""
    tag: str | None = option(None, setting=False)
    workload_source: str | None = option(None, setting=False)
    """Where a custom workload comes from (its canonical reference, which the workers load);
    None for built-in and entry-point workloads. Not a setting: the name identifies the
    workload, wherever its file lies."""

    @property
    def world_size(self) -> int:
        """Worker processes over all nodes."""
        return self.nodes.nnodes * self.parallel.workers

    def settings_hash(self) -> str:
        """A short hash of every setting that shapes the run (`settings_hash`)."""
        return settings_hash(self.flat())


EMULATION_KEY = "emulation"
"""Where an emulation's stored config holds its own settings, beside its run's."""


def settings_hash(flat: Mapping[str, Any]) -> str:
    """A short hash of how a run trains, from its flat config (live, or as stored).

    Two runs with equal hashes trained the same way: sweeps match repeats and resumed runs
    by it. It hashes every setting that differs from its declared default, and nothing
    else: labels and rendezvous fields (`option(setting=False)`) shape no run, and a setting
    at its default hashes as if it did not exist, so a setting added later leaves the hashes
    of runs stored before it alone while it keeps the default those runs trained with. An
    emulation's settings (`EMULATION_KEY`) are hashed as stored; other names that are not
    RunConfig fields (from a run stored by an older version) are left out.
    """
    leaves = RunConfig.flat_fields()
    settings = {
        key: value
        for key, value in flat.items()
        if key in leaves
        and leaves[key].is_setting
        and not _is_default(value, leaves[key].default())
    }
    if EMULATION_KEY in flat:
        settings[EMULATION_KEY] = flat[EMULATION_KEY]
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _is_default(value: Any, default: Any) -> bool:
    """Whether a value is its field's default: numbers by value (a file's 20.0 steps are
    the default 20), but never a bool for a number (True == 1 in Python)."""
    if default is MISSING or isinstance(value, bool) != isinstance(default, bool):
        return False
    if isinstance(value, Mapping) and isinstance(default, Mapping):
        return dict(value) == dict(default)
    return bool(value == default)
