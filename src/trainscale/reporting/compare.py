"""How one workload's configurations compare: series against workers, Amdahl's law fitted
over the baseline's series, and the classic table of processing time by parallel setting."""

from __future__ import annotations

from collections.abc import Sequence

from trainscale.metrics.scaling import AmdahlFit, fit_amdahl
from trainscale.reporting.labels import LABEL_SKIP, differing_keys, setting, settings_text
from trainscale.reporting.model import AffinityRow, Configuration, Series

# For plot series: everything that varies except the worker count and what follows from it.
_SERIES_SKIP = LABEL_SKIP | {"workers", "batch_size", "lr"}

_PARALLEL_KEYS = ("workers", "threads_per_worker", "affinity")


def series_of(configs: Sequence[Configuration]) -> list[Series]:
    """Split a workload's configurations into lines that differ only in worker count."""
    skip = set(_SERIES_SKIP)
    batches = {c.settings.batch_size for c in configs}
    if len(batches) == 1:  # weak scaling: the global batch follows the workers
        skip.add("global_batch_size")
    differing = differing_keys([c.config for c in configs], frozenset(skip))
    groups: dict[str, list[Configuration]] = {}
    for config in configs:
        name = settings_text(config.config, differing)
        groups.setdefault(name or config.workload, []).append(config)
    return [
        Series(name=name, keys=[c.key for c in sorted(members, key=lambda c: c.workers)])
        for name, members in groups.items()
    ]


def amdahl_over_baseline(
    configs: Sequence[Configuration], series: Sequence[Series], base: Configuration | None
) -> tuple[AmdahlFit | None, str]:
    """Amdahl's law fitted over the baseline's series (workers relative to the baseline's)."""
    if base is None:
        return None, "no baseline, so no speedup and no Amdahl fit"
    line = next(s for s in series if base.key in s.keys)
    by_key = {c.key: c for c in configs}
    points = [
        (config.workers / base.workers, speedup)
        for config in (by_key[k] for k in line.keys)
        if (speedup := config.speedup) and config.workers >= base.workers
    ]
    fit = fit_amdahl(points) if points else None
    where = "" if line.name == base.workload else f" (series {line.name})"
    if fit is None:
        return None, (
            f"no Amdahl fit: the baseline's configurations{where} have no run with more "
            "workers than the baseline"
        )
    # The baseline (n = 1) is the reference every speedup is taken from, not a point of the
    # fit: counted as one, the note would disagree with the fit's num_points.
    counts = ", ".join(f"{n:g}" for n in sorted({n for n, _ in points if n > 1}))
    note = (
        f"serial fraction s = {fit.serial_fraction:.3f} fitted to {fit.num_points} "
        f"configuration(s) with n = {counts} workers{where}; predicted limit "
        + ("unbounded" if fit.serial_fraction == 0 else f"{fit.max_speedup:.1f}x")
    )
    if fit.clamped:
        reason = "faster than linear" if fit.raw_serial_fraction < 0 else "slower with more workers"
        note += f"; the data is {reason}, so s is clamped (Amdahl cannot describe it)"
    if fit.num_points == 1 and not fit.clamped:  # a clamped s reproduces no point
        note += "; one point determines s exactly, so the fit says nothing about the model"
    return fit, note


def affinity_table(configs: Sequence[Configuration]) -> tuple[list[AffinityRow], str]:
    """The classic table for configurations that differ in parallel setting; else empty.

    Rows keep the configurations' order; % gain is the share of the slowest configuration's
    processing time per step that each one saves.
    """
    settings = {tuple(str(setting(c.config, k)) for k in _PARALLEL_KEYS) for c in configs}
    timed = [(c, c.step_time_s_median) for c in configs if c.step_time_s_median]
    if len(settings) < 2 or len(timed) < 2:
        return [], ""
    slowest = max(step_s for _, step_s in timed)
    rows = [
        AffinityRow(
            label=c.label,
            setting=parallel_setting(c),
            step_time_ms=step_s * 1000,
            gain_vs_slowest_pct=(slowest - step_s) / slowest * 100,
            oversubscribed=c.oversubscribed,
            pinned=c.pinned,
        )
        for c, step_s in timed
    ]
    batches = {c.global_batch_size for c, _ in timed}
    note = (
        "global batches differ between these settings, so time per step compares different work"
        if len(batches) > 1
        else f"every setting trains the same global batch of {batches.pop()} samples per step"
    )
    return rows, note


def parallel_setting(config: Configuration) -> str:
    """How a configuration ran, in words: workers, threads, pinning, oversubscription."""
    workers = f"{config.workers} worker" + ("s" if config.workers != 1 else "")
    threads = config.threads_setting
    if threads == "torch-default":
        threads = f"torch-default ({config.threads_per_worker})"
    plural = "" if threads == "1" else "s"
    text = f"{workers} x {threads} thread{plural}, "
    text += f"pinned ({config.affinity})" if config.pinned else "unpinned"
    if config.oversubscribed:
        text += f", oversubscribed: {config.total_threads} threads on {config.cores} cores"
    return text
