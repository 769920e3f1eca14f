"""The bench's results as a table: rows for the terminal, and the Markdown file.

A rung ran once per round. Its samples/s and step time are medians over its rounds; its
speedup is paired (`metrics.paired`): the ratio to the serial rung within each round, the
median over rounds and a 95% bootstrap interval across rounds, with a verdict only where the
interval excludes 1. Busy runs follow the busy rule (`metrics.run_flags`): a round with a
busy run is left out of its pairs while quiet rounds remain; with none, the ratio over the
busy rounds is shown, marked not trusted, with no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainscale.benchmark.ladder import Rung, Skipped
from trainscale.metrics import stats
from trainscale.metrics.paired import PairedRatio, paired_ratio
from trainscale.metrics.run_flags import NOT_TRUSTED, ran_busy, stalls_note

NOISY_STEPS = 0.10
"""A rung's typical within-run step-time IQR above this share of the median is noted."""


@dataclass
class RungResult:
    """A rung and what became of it: its run in each round, or why runs failed (a skipped
    rung has neither)."""

    rung: Rung | Skipped
    runs: list[dict[str, Any] | None] = field(default_factory=list)
    """The result dict of the rung's run in each round, round order; None where it failed."""
    errors: list[str] = field(default_factory=list)
    """Why runs failed, in round order."""
    in_rounds: bool = True
    """Measured in the rounds (False: the accuracy run, made once after them)."""

    @property
    def setting(self) -> Rung:
        """The rung of a result that is measured (TypeError for a skipped one)."""
        if not isinstance(self.rung, Rung):
            raise TypeError(f"{self.rung.name} was skipped: it has no setting to measure")
        return self.rung

    @property
    def completed(self) -> list[dict[str, Any]]:
        """The runs that completed."""
        return [run for run in self.runs if run is not None]

    @property
    def samples_per_s(self) -> float | None:
        """Median throughput over the rounds (None if no run completed)."""
        rates = [run["samples_per_s"] for run in self.completed]
        return stats.median(rates) if rates else None

    @property
    def busy_runs(self) -> int:
        """Completed runs that ran on a busy machine."""
        return sum(ran_busy(run) for run in self.completed)

    @property
    def quiet_samples_per_s(self) -> float | None:
        """Median throughput over the rounds on a quiet machine (None without one)."""
        rates = [run["samples_per_s"] for run in self.completed if not ran_busy(run)]
        return stats.median(rates) if rates else None


def _measured(results: list[RungResult]) -> list[RungResult]:
    return [r for r in results if r.in_rounds and not isinstance(r.rung, Skipped)]


def _run_in(item: RungResult, index: int) -> dict[str, Any] | None:
    return item.runs[index] if index < len(item.runs) else None


def rounds_of(results: list[RungResult]) -> list[dict[str, float | None]]:
    """Each round's throughput per rung name: None where that round's run failed."""
    measured = _measured(results)
    num_rounds = max((len(r.runs) for r in measured), default=0)

    def rate(item: RungResult, index: int) -> float | None:
        run = _run_in(item, index)
        return None if run is None else run["samples_per_s"]

    return [{r.rung.name: rate(r, i) for r in measured} for i in range(num_rounds)]


def busy_rounds_of(results: list[RungResult]) -> list[dict[str, bool]]:
    """Each round's busy marks per rung name, beside `rounds_of`: other work on a run's
    cores says nothing about the setting, so the pairs that need it drop that round while
    quiet rounds remain (docs/methodology.md, "Contention")."""
    measured = _measured(results)
    num_rounds = max((len(r.runs) for r in measured), default=0)

    def busy(item: RungResult, index: int) -> bool:
        run = _run_in(item, index)
        return run is not None and ran_busy(run)

    return [{r.rung.name: busy(r, i) for r in measured} for i in range(num_rounds)]


def quiet_rounds(results: list[RungResult]) -> int:
    """Rounds in which no run ran on a busy machine (a failed run is not busy)."""
    return sum(not any(marks.values()) for marks in busy_rounds_of(results))


def baseline_of(results: list[RungResult]) -> RungResult | None:
    """The serial rung every speedup is against: the ladder's first rung, if any of its runs
    completed (no other rung stands in for it)."""
    first = next((r for r in results if r.in_rounds and not isinstance(r.rung, Skipped)), None)
    return first if first is not None and first.completed else None


def speedups(results: list[RungResult], seed: int = 0) -> dict[str, PairedRatio]:
    """Each measured rung's paired speedup over the baseline rung, by rung name."""
    base = baseline_of(results)
    if base is None:
        return {}
    rounds, busy = rounds_of(results), busy_rounds_of(results)
    return {
        r.rung.name: paired_ratio(rounds, base.rung.name, r.rung.name, seed=seed, busy=busy)
        for r in results
        if r.in_rounds and r.completed and r is not base
    }


def pitfall_comparisons(results: list[RungResult], seed: int = 0) -> list[PairedRatio]:
    """Each sound rung against its naive pitfall (pinned workers / naive DDP), paired."""
    rounds, busy = rounds_of(results), busy_rounds_of(results)
    done = {r.rung.name for r in results if r.in_rounds and r.completed}
    return [
        paired_ratio(rounds, r.rung.name, r.rung.pitfall_of, seed=seed, busy=busy)
        for r in results
        if isinstance(r.rung, Rung)
        and r.rung.pitfall_of in done
        and r.rung.name in done
        and r.in_rounds
    ]


def baseline_lines(results: list[RungResult], seed: int = 0) -> list[str]:
    """Which baseline the speedups answer, and the other question's answer: each setting
    against the machine's default use (1 process, all cores as threads), paired the same
    way. "How much faster on N workers?" flips with the baseline (a small model can be
    several times faster than 1 process x N threads and slower than 1 pinned core), so
    both are said, each naming its baseline."""
    base = baseline_of(results)
    if base is None:
        return []
    # A script's runs are stored with precision 'script': it chose its own.
    precision = base.completed[0].get("precision", "fp32")
    precision = "the script's precision" if precision == "script" else precision
    lines = [
        f"speedup, verdict and efficiency: against '{base.rung.name}' (1 worker x 1 thread, "
        f"{precision}) in the same round: how much faster than one core"
    ]
    done = [r for r in results if r.in_rounds and r.completed]
    threads = next(
        (
            r
            for r in done
            if isinstance(r.rung, Rung)
            and r.rung.options.parallel.workers == 1
            and r.rung.cores > 1
        ),
        None,
    )
    if threads is None:
        return lines
    rounds, busy = rounds_of(results), busy_rounds_of(results)
    against = []
    for item in done:
        if item is base or item is threads:
            continue
        ratio = paired_ratio(rounds, threads.rung.name, item.rung.name, seed=seed, busy=busy)
        if ratio.median is not None:
            # The busy rule: a figure resting on busy rounds says so, as the table's do.
            mark = "" if ratio.trusted else f" ({NOT_TRUSTED})"
            against.append(f"{item.rung.name} {ratio.text()}{mark}")
    if against:
        lines.append(
            f"against '{threads.rung.name}' (the layout `trainscale run` uses by default, "
            f"in {precision}) instead, paired the same way: {'; '.join(against)}"
        )
    return lines


def fastest_cpu(results: list[RungResult]) -> RungResult | None:
    """The CPU setting with the highest median throughput over the rounds (on a quiet
    machine where it was measured on one), the pitfall aside: what a GPU is up against."""
    cpu = [
        r
        for r in results
        if r.in_rounds
        and isinstance(r.rung, Rung)
        and not r.rung.gpus
        and not r.rung.pitfall
        and r.completed
    ]
    return max(cpu, key=lambda r: r.quiet_samples_per_s or r.samples_per_s or 0.0, default=None)


def gpu_comparisons(results: list[RungResult], seed: int = 0) -> list[PairedRatio]:
    """Each GPU setting against the fastest CPU setting, paired within the rounds (the
    throughput of the GPU run / the CPU run of the same round)."""
    cpu = fastest_cpu(results)
    if cpu is None:
        return []
    rounds, busy = rounds_of(results), busy_rounds_of(results)
    return [
        paired_ratio(rounds, cpu.rung.name, r.rung.name, seed=seed, busy=busy)
        for r in results
        if r.in_rounds and isinstance(r.rung, Rung) and r.rung.gpus and r.completed
    ]


FASTEST_CPU = "the fastest CPU setting here"


def gpu_line(ratio: PairedRatio) -> str:
    """A GPU setting against the fastest CPU setting as a line: '1 GPU: 9.40x [8.90, 9.80]
    faster than the fastest CPU setting here (CPU_NAME; 5 rounds)', with a verdict only
    where the interval excludes 1 (`metrics.paired`)."""
    against = f"({ratio.a}; {ratio.rounds_note})"
    if ratio.median is None:
        return f"{ratio.b}: cannot tell against {FASTEST_CPU} {against}"
    if ratio.direction is not None and ratio.trusted:
        return f"{ratio.b}: {ratio.text()} {ratio.direction} than {FASTEST_CPU} {against}"
    return f"{ratio.b}: {ratio.text()} against {FASTEST_CPU} {against}: {ratio.verdict}"


def gpu_lines(results: list[RungResult], seed: int = 0) -> list[str]:
    """`gpu_line` for every GPU setting that ran: [] on a machine without GPUs."""
    return [gpu_line(ratio) for ratio in gpu_comparisons(results, seed)]


def table_rows(results: list[RungResult]) -> list[dict[str, str]]:
    """Rows of the bench table; speedup and efficiency against the first (baseline) rung,
    paired over the rounds."""
    base = baseline_of(results)
    paired = speedups(results)
    rows = []
    for item in results:
        row = {
            "setting": item.rung.name,
            "workers x threads": "-",
            "samples/s": "-",
            "step ms (median, IQR)": "-",
            "speedup": "-",
            "verdict": "-",
            "efficiency": "-",
            "test acc": "-",
            "time to target": "-",
            "note": "",
        }
        if isinstance(item.rung, Skipped):
            row["note"] = f"skipped: {item.rung.reason}"
            rows.append(row)
            continue
        done = item.completed
        if not done:
            row["note"] = f"failed: {item.errors[0]}" if item.errors else "did not run"
            rows.append(row)
            continue
        first = done[0]
        threads = first["threads_per_worker"] or "default"
        row["workers x threads"] = f"{first['world_size']} x {threads}"
        row["samples/s"] = f"{item.samples_per_s:.0f}"
        med = stats.median([run["step_time_s_median"] for run in done])
        # A run that timed one step has no spread (None): unknown, not a steady 0%.
        spreads = [
            run["step_time_s_iqr"] / run["step_time_s_median"]
            for run in done
            if run.get("step_time_s_iqr") is not None
        ]
        spread = stats.median(spreads) if spreads else None
        shown = "-" if spread is None else f"{spread:.0%}"
        row["step ms (median, IQR)"] = f"{med * 1000:.1f} ({shown})"
        speedup = _speedup_cells(item, base, paired.get(item.rung.name), row)
        # Speedup per core says nothing of a GPU setting: its cores only feed the GPUs.
        if speedup is not None and not item.rung.gpus:
            row["efficiency"] = (
                f"{stats.efficiency(speedup, item.rung.cores):.0%} of {item.rung.cores} core(s)"
            )
        last = done[-1]
        if last.get("test_accuracy") is not None:
            row["test acc"] = f"{last['test_accuracy']:.4f}"
            ttt = last.get("time_to_target_s")
            row["time to target"] = f"{ttt:.1f} s" if ttt is not None else "not reached"
        notes = [item.rung.note] if item.rung.note else []
        if not item.in_rounds:
            notes.append("speedup not paired: measured once, after the rounds")
        if item.errors:
            failed = f"failed in {len(item.errors)} of {len(item.runs)} rounds"
            notes.append(f"{failed}: {item.errors[0]}")
        if spread is not None and spread > NOISY_STEPS:
            notes.append("noisy: step-time IQR > 10% of median")
        notes += _busy_notes(item, base, None if item is base else paired.get(item.rung.name))
        # The stalled round's own mean and median, in the words of every table.
        if stalls := stalls_note(done):
            notes.append(stalls)
        row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


def _speedup_cells(
    item: RungResult,
    base: RungResult | None,
    paired: PairedRatio | None,
    row: dict[str, str],
) -> float | None:
    """Fill the speedup and verdict cells of `row`; the speedup, for the efficiency."""
    if base is None or base.samples_per_s is None:
        return None
    if item is base:
        row["speedup"], row["verdict"] = "1.00x", "baseline"
        return 1.0
    if paired is None:  # the accuracy run: one run after the rounds, a plain ratio
        # Against the serial rung's quiet rounds, as the paired speedups are; a busy run on
        # either side leaves the ratio without a verdict (the busy rule).
        serial = base.quiet_samples_per_s or base.samples_per_s
        value = stats.speedup(serial, item.samples_per_s or 0.0)
        row["speedup"] = f"{value:.2f}x"
        if item.busy_runs or base.quiet_samples_per_s is None:
            row["verdict"] = NOT_TRUSTED
        return value
    row["speedup"] = paired.text()
    if paired.median is None:
        row["verdict"] = "no round with the serial run"
        return None
    row["verdict"] = paired.verdict_against("serial")
    return paired.median


def _busy_notes(item: RungResult, base: RungResult | None, paired: PairedRatio | None) -> list[str]:
    """What busy runs did to a row: how many of its rounds were busy, and whether its
    speedup left them out (quiet rounds remain) or rests on them (not trusted)."""
    notes = []
    if item.busy_runs:
        notes.append(
            f"busy machine in {item.busy_runs} of {len(item.completed)} "
            f"{'rounds' if item.in_rounds else 'run'}: other work used its cores"
        )
    if paired is not None and paired.busy_rounds:
        if paired.trusted:
            notes.append(
                f"{paired.busy_rounds} round(s) with a busy run here or in the serial run "
                "left out of the speedup"
            )
        else:
            notes.append(
                "every round had a busy run here or in the serial run: speedup not trusted"
            )
    elif paired is None and base is not None and item is not base and not item.in_rounds:
        if item.busy_runs or base.quiet_samples_per_s is None:
            notes.append("speedup not trusted: a busy run here or in every serial round")
        elif base.busy_runs:
            notes.append("speedup against the serial rung's quiet rounds")
    return notes


def markdown_table(rows: list[dict[str, str]]) -> str:
    """Rows as a GitHub-flavoured Markdown table."""
    if not rows:
        return ""
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[h]).replace("|", "/") for h in headers) + " |")
    return "\n".join(lines)
