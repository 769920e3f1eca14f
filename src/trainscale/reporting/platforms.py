"""The classic platform study's table: each configuration's platform (CPU serial, CPU
parallel, GPUs), its time per epoch, time to target, final accuracy, and two speedups over
the baseline: of throughput, and of the time to the target (what the studies compare, and
not the same where a setting needs more or fewer samples to get there). Rows of display
text, shared by the Markdown and the HTML page."""

from __future__ import annotations

from trainscale.reporting import tables
from trainscale.reporting.baseline import paired_with_baseline
from trainscale.reporting.model import Configuration, WorkloadSection

PLATFORM_COLUMNS = (
    "configuration",
    "platform",
    "time per epoch (s)",
    "time to target (s)",
    "test accuracy",
    "throughput speedup [95%]",
    "speedup to target [95%]",
)
"""The columns of the table, in order; the speedup's baseline is named in `platform_note`."""


def platform_table_applies(section: WorkloadSection) -> bool:
    """Whether the section gets the table: at least two of its configurations were evaluated
    on real data, so accuracy can be compared across platforms (synthetic data makes no
    accuracy claim). Emulations are not platforms: N workers emulated in one process."""
    return sum(1 for c in platform_configurations(section) if c.num_evaluated > 0) >= 2


def platform_rows(section: WorkloadSection) -> list[dict[str, str]]:
    """One row of display text per configuration of a workload, in plan order."""
    return [_row(c, section.baseline) for c in platform_configurations(section)]


def platform_configurations(section: WorkloadSection) -> list[Configuration]:
    """The configurations the platform table shows, in its row order (not emulations)."""
    return [c for c in section.configurations if not c.emulated]


def platform_note(section: WorkloadSection) -> str:
    """The sentence under the table: what the speedup is against and what its marks mean."""
    base = section.baseline
    epoch = "time per epoch is the training clock over the epochs trained."
    if base is None:
        return f"No speedup: {section.baseline_rule}; {epoch}"
    return (
        f"Throughput speedup is samples/s over that of the baseline '{base.label}' "
        f"({platform(base)}); speedup to target is the baseline's time to target over this "
        "configuration's (it also counts pre-training, and a setting that needs more or fewer "
        "samples to get there). Each is paired round by round with its 95% bootstrap "
        "interval in brackets, '(one round)' where one round was shared, '(unpaired)' the "
        f"ratio of medians where none was; {epoch}"
    )


def platform(c: Configuration) -> str:
    """Where a configuration trained, in the study's words: 'CPU serial, 1 worker x 1
    thread', 'CPU parallel, 4 workers x 2 threads', '1 GPU (NVIDIA H100 80GB HBM3)'."""
    nodes = c.settings.nnodes
    on_nodes = f" on {nodes} nodes" if nodes > 1 else ""
    if c.device_type == "cuda":
        count = c.devices or c.workers
        name = f" ({c.device_name})" if c.device_name else ""
        return f"{_count(count, 'GPU')}{name}{on_nodes}"
    if c.device_type != "cpu":
        return f"{_count(c.devices or c.workers, c.device_type + ' device')}{on_nodes}"
    serial = c.workers == 1 and c.threads_per_worker == 1
    threads = _count(c.threads_per_worker, "thread") if c.threads_per_worker else "? threads"
    if c.threads_setting == "torch-default":
        threads += " (torch default)"
    kind = "CPU serial" if serial else "CPU parallel"
    return f"{kind}, {_count(c.workers, 'worker')} x {threads}{on_nodes}"


def time_per_epoch_s(c: Configuration) -> float | None:
    """The training clock (median over repeats; warm-up and any pre-training included,
    evaluation not) over the epochs trained (fewer than the config's where runs stopped at
    their target); None when the runs trained a number of steps, whose epochs the stored
    config does not give."""
    if c.settings.steps is not None:
        return None
    epochs = c.epochs_trained if c.epochs_trained is not None else c.settings.epochs
    if c.train_time_s is None or epochs is None:
        return None
    return c.train_time_s / epochs if epochs > 0 else None


def speedup_text(c: Configuration, base: Configuration | None) -> str:
    """'2.31x [2.10, 2.55]' (paired over rounds, with its 95% interval), '2.31x (one
    round)', '2.31x (unpaired)', '1.00x' for the baseline, or '-' without a speedup; marked
    'not trusted: busy machine' where the busy rule says so (`reporting.baseline`)."""
    if c.is_baseline:
        return "1.00x"
    if c.paired_speedup is not None:
        return _ratio_text(c.paired_speedup, c.paired_speedup_ci, c.paired_trusted)
    if c.speedup is not None:
        # The ratio of medians takes in every busy run, this configuration's and the
        # baseline's; pairing would have left their rounds out.
        return _unpaired_text(c.speedup, c, base)
    return "-"


def target_speedup_text(c: Configuration, base: Configuration | None) -> str:
    """The baseline's time to target over `c`'s, written as `speedup_text` writes a
    speedup: paired over the rounds in which both reached the target (a busy round left out
    while a quiet one remains), else the ratio of their medians; '-' where either never
    reached it."""
    if base is None or base.time_to_target_s is None or c.time_to_target_s is None:
        return "-"
    if c.is_baseline:
        return "1.00x"
    paired = paired_with_baseline(c, base, _targets_per_s)
    if paired is not None and paired.median is not None:
        return _ratio_text(paired.median, paired.ci, paired.trusted)
    return _unpaired_text(base.time_to_target_s / c.time_to_target_s, c, base)


def _targets_per_s(c: Configuration) -> dict[str, float]:
    """Per round, the target reached per second: a rate, higher is faster, to pair on."""
    return {key: 1.0 / seconds for key, seconds in c.time_to_target_s_by_round.items()}


def _ratio_text(median: float, ci: tuple[float, float] | None, trusted: bool) -> str:
    text = f"{median:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else " (one round)")
    return text if trusted else text + " (not trusted: busy machine)"


def _unpaired_text(ratio: float, c: Configuration, base: Configuration | None) -> str:
    trusted = not c.busy_runs and not (base is not None and base.busy_runs)
    return f"{ratio:.2f}x (unpaired)" + ("" if trusted else " (not trusted: busy machine)")


def _row(c: Configuration, base: Configuration | None) -> dict[str, str]:
    return {
        "configuration": c.label + (" (baseline)" if c.is_baseline else ""),
        "platform": platform(c),
        "time per epoch (s)": tables.number(time_per_epoch_s(c), ".1f"),
        "time to target (s)": tables.time_to_target(c),
        "test accuracy": "-" if c.synthetic else tables.number(c.test_accuracy, ".4f"),
        "throughput speedup [95%]": speedup_text(c, base),
        "speedup to target [95%]": target_speedup_text(c, base),
    }


def _count(number: int | None, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")
