"""What to emulate, checked in one place, and the resolved config an emulation trains with.

An emulation runs in one process, so its `RunConfig` is that of a one-worker run, with two
emulation-specific readings of its fields: `batch_size` is the *per-worker* batch b of the
emulated workers, and `global_batch_size` is B, the samples behind one global optimizer
step (N*b for sync and local SGD, b for asynchronous SGD, where one step applies one
worker's gradient). The lr scaling rule and the warm-up rule are those of `config.resolve`
applied at B, so a sync emulation of N workers gets exactly the lr and warm-up of a real
N-worker run at per-worker batch b.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from trainscale.config.options import EMULATION_KEY, RunConfig, RunOptions
from trainscale.data.search import SYNTHETIC_HINT
from trainscale.data.tensors import Located
from trainscale.emulation.options import (
    DEFAULT_LOCAL_STEPS,
    DEFAULT_STALENESS_SPREAD,
    MODES,
    EmulationOptions,
)
from trainscale.errors import ConfigError, DataError
from trainscale.hardware import resources
from trainscale.hardware.resources import check_memory, format_bytes
from trainscale.runner.footprint import Footprint, estimate_footprint
from trainscale.runner.resolve import locate_data as find_data
from trainscale.runner.resolve import resolve
from trainscale.train.plan import check_batch_fits
from trainscale.workloads import get_workload


@dataclass(frozen=True)
class EmulationSpec:
    """One emulated setting: how N workers would train. None means "the default"."""

    mode: str
    """'sync', 'async' or 'local-sgd'."""
    workers: int
    """N, the number of emulated workers."""
    per_worker_batch_size: int | None = None
    """b, each worker's batch; None = the workload's reference batch."""
    local_steps: int | None = None
    """H, local steps between averagings (local-sgd only; None = DEFAULT_LOCAL_STEPS)."""
    staleness_spread: float | None = None
    """Sigma of the lognormal per-gradient compute time, mean 1 (async only; 0 = equal
    times; None = DEFAULT_STALENESS_SPREAD)."""
    staleness_aware_lr: bool = False
    """Divide the lr of each asynchronous update by its staleness (async only)."""

    @property
    def samples_per_step(self) -> int:
        """B: samples behind one global optimizer step (needs a resolved spec)."""
        if self.per_worker_batch_size is None:
            raise ValueError("resolve the spec first: the per-worker batch is not known")
        if self.mode == "async":
            return self.per_worker_batch_size
        return self.workers * self.per_worker_batch_size

    def settings(self) -> dict[str, Any]:
        """The spec as stored in the run's config (part of its config hash)."""
        return asdict(self)


def specs_of(options: EmulationOptions) -> list[EmulationSpec]:
    """One spec per worker count asked for, defaults still to fill (`resolve_spec`)."""
    return [
        EmulationSpec(
            mode=options.mode,
            workers=count,
            per_worker_batch_size=options.per_worker_batch_size,
            local_steps=options.local_steps,
            staleness_spread=options.staleness_spread,
            staleness_aware_lr=options.staleness_aware_lr,
        )
        for count in options.workers
    ]


def _whole(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"--{name} must be a whole number >= 1, got {value!r}")


def check_spec(spec: EmulationSpec) -> None:
    """Reject impossible or contradictory settings with one line naming the option."""
    if spec.mode not in MODES:
        raise ConfigError(f"--mode must be one of {', '.join(MODES)}; got {spec.mode!r}")
    _whole("workers", spec.workers)
    if spec.per_worker_batch_size is not None:
        _whole("per-worker-batch-size", spec.per_worker_batch_size)
    if spec.local_steps is not None:
        if spec.mode != "local-sgd":
            raise ConfigError(
                f"--local-steps applies to --mode local-sgd only, not --mode {spec.mode}"
            )
        _whole("local-steps", spec.local_steps)
    if spec.staleness_spread is not None:
        if spec.mode != "async":
            raise ConfigError(
                f"--staleness-spread applies to --mode async only, not --mode {spec.mode}"
            )
        spread = spec.staleness_spread
        if not (isinstance(spread, (int, float)) and math.isfinite(spread) and spread >= 0):
            raise ConfigError(f"--staleness-spread must be a number >= 0, got {spread!r}")
    if spec.staleness_aware_lr and spec.mode != "async":
        raise ConfigError(
            f"--staleness-aware-lr applies to --mode async only, not --mode {spec.mode}"
        )


def resolve_spec(spec: EmulationSpec, reference_batch_size: int) -> EmulationSpec:
    """The spec with every default filled in (the per-worker batch from the workload's
    reference batch); checks it first."""
    check_spec(spec)
    return replace(
        spec,
        per_worker_batch_size=spec.per_worker_batch_size or reference_batch_size,
        local_steps=(spec.local_steps or DEFAULT_LOCAL_STEPS) if spec.mode == "local-sgd" else None,
        staleness_spread=(
            (DEFAULT_STALENESS_SPREAD if spec.staleness_spread is None else spec.staleness_spread)
            if spec.mode == "async"
            else None
        ),
    )


def check_options(opts: RunOptions) -> None:
    """Refuse run options that an emulation cannot honour."""
    if opts.data.kind != "real":
        raise ConfigError(
            "emulation needs real data: it measures accuracy, and synthetic data (random "
            "labels) makes no accuracy claim; give the dataset with --data-dir"
        )
    if not opts.measurement.evaluate:
        raise ConfigError("emulation measures accuracy: it cannot run without evaluation")


def emulation_options(opts: RunOptions, spec: EmulationSpec) -> RunOptions:
    """The one-process run options whose lr scaling and warm-up are those at B.

    `resolve` scales the lr to the global batch and lengthens the warm-up when a scaled lr
    grows; asking it for one worker at batch B applies exactly those rules at B.
    """
    check_options(opts)
    return opts.with_(
        workers=1,
        batch_size=spec.samples_per_step,
        global_batch_size=None,
        grad_accum=1,
        # The emulating process is not pinned: it is one process doing the work of N.
        affinity="none",
        device="cpu",
    )


def emulation_config(
    opts: RunOptions,
    spec: EmulationSpec,
    located: dict[tuple[Any, ...], Located] | None = None,
    locate_data: bool = True,
) -> RunConfig:
    """The resolved config of one emulation (`spec` resolved); see the module docstring.

    With `locate_data` the real dataset is found (and checked) as for a run, `located`
    caching where, so several emulations over one dataset look once; then the emulation is
    checked against the dataset (each emulated worker's shard holds a batch) and against
    this machine's memory (`check_emulation_memory`), before anything trains.
    """
    if spec.per_worker_batch_size is None:
        raise ValueError("resolve the spec first (resolve_spec)")
    config = resolve(emulation_options(opts, spec))
    if not get_workload(config.workload).real_data:
        raise DataError(
            f"{config.workload} is an architecture with no dataset in trainscale: an emulation "
            "measures accuracy, so it cannot be emulated (`trainscale simulate "
            f"{config.workload}` predicts its scaling)"
        )
    if locate_data:
        try:
            config, size = find_data(config, located)
        except DataError as missing:  # its way on without the data is none for an emulation
            text = str(missing).replace(f", {SYNTHETIC_HINT}", "").replace(SYNTHETIC_HINT, "")
            raise DataError(
                f"{text} (an emulation measures accuracy: it needs the real data)"
            ) from None
        check_batch_fits(
            spec.per_worker_batch_size,
            size.num_train,
            spec.workers,
            advice="use a smaller --per-worker-batch-size or fewer workers",
        )
        workload = get_workload(config.workload)
        check_emulation_memory(
            spec,
            estimate_footprint(
                workload, config.data.workload_options, size, config.optimisation.seed
            ),
        )
    return config.with_(batch_size=spec.per_worker_batch_size)


def emulated_worker_bytes(spec: EmulationSpec, footprint: Footprint) -> int:
    """Memory each emulated worker adds to the one emulating process: nothing for sync (one
    model serves them all), one held gradient for async, a whole replica with its gradients
    and optimizer state for local SGD."""
    if spec.mode == "async":
        return footprint.parameter_bytes
    if spec.mode == "local-sgd":
        return footprint.model_state_bytes
    return 0


def check_emulation_memory(
    spec: EmulationSpec, footprint: Footprint, available: int | None = None
) -> None:
    """ConfigError when the emulating process cannot hold N workers' state (one line that
    says what each worker holds and how many fit)."""
    available = resources.available_memory_bytes() if available is None else available
    each = emulated_worker_bytes(spec, footprint)
    needed = footprint.worker_bytes + spec.workers * each
    held = {"async": "a held gradient", "local-sgd": "a model replica with its optimizer state"}
    if each:
        fits = max(0, (available - footprint.worker_bytes) // each)
        what = (
            f"emulating {spec.workers} {spec.mode} workers ({held[spec.mode]} each, "
            f"{format_bytes(each)}) on top of one process ({footprint.describe()})"
        )
        advice = f"emulate at most {fits} workers here"
    else:
        what = f"emulating {spec.workers} {spec.mode} workers ({footprint.describe()})"
        advice = "use a smaller dataset or model"
    check_memory(needed, what, advice, available)


def stored_config(config: RunConfig, spec: EmulationSpec) -> dict[str, Any]:
    """What is stored as the run's config: the resolved config plus the emulation settings.
    Its settings hash (`config.options.settings_hash`) covers both: two emulations share a
    hash only when they trained the same way (N and mode included)."""
    return {**config.flat(), EMULATION_KEY: spec.settings()}
