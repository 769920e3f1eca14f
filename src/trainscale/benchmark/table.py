"""The bench's results as a table: rows for the terminal, and the Markdown file.

A rung ran once per round. Its samples/s and step time are medians over its rounds; its
speedup is paired (`metrics.paired`): the ratio to the serial rung within each round, the
median over rounds and a 95% bootstrap interval across rounds, with a verdict only where the
interval excludes 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainscale.benchmark.ladder import Rung, Skipped
from trainscale.metrics import stats
from trainscale.metrics.paired import PairedRatio, paired_ratio
from trainscale.metrics.run_flags import ran_busy, stall_text

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
    def completed(self) -> list[dict[str, Any]]:
        """The runs that completed."""
        return [run for run in self.runs if run is not None]

    @property
    def samples_per_s(self) -> float | None:
        """Median throughput over the rounds (None if no run completed)."""
        rates = [run["samples_per_s"] for run in self.completed]
        return stats.median(rates) if rates else None


def rounds_of(results: list[RungResult]) -> list[dict[str, float | None]]:
    """Each round's throughput per rung name: None where that round's run failed or ran on
    a busy machine (other work on its cores says nothing about the setting, so the pairs
    that need it drop that round; docs/methodology.md, "Contention")."""
    measured = [r for r in results if r.in_rounds and not isinstance(r.rung, Skipped)]
    num_rounds = max((len(r.runs) for r in measured), default=0)

    def rate(item: RungResult, index: int) -> float | None:
        run = item.runs[index] if index < len(item.runs) else None
        return None if run is None or ran_busy(run) else run["samples_per_s"]

    return [{r.rung.name: rate(r, i) for r in measured} for i in range(num_rounds)]


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
    rounds = rounds_of(results)
    return {
        r.rung.name: paired_ratio(rounds, base.rung.name, r.rung.name, seed=seed)
        for r in results
        if r.in_rounds and r.completed and r is not base
    }


def pitfall_comparisons(results: list[RungResult], seed: int = 0) -> list[PairedRatio]:
    """Each sound rung against its naive pitfall (pinned workers / naive DDP), paired."""
    rounds = rounds_of(results)
    done = {r.rung.name for r in results if r.in_rounds and r.completed}
    return [
        paired_ratio(rounds, r.rung.name, r.rung.pitfall_of, seed=seed)
        for r in results
        if isinstance(r.rung, Rung)
        and r.rung.pitfall_of in done
        and r.rung.name in done
        and r.in_rounds
    ]


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
        spread = stats.median(
            [(run.get("step_time_s_iqr") or 0.0) / run["step_time_s_median"] for run in done]
        )
        row["step ms (median, IQR)"] = f"{med * 1000:.1f} ({spread:.0%})"
        speedup = _speedup_cells(item, base, paired.get(item.rung.name), row)
        if speedup is not None:
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
        if spread > NOISY_STEPS:
            notes.append("noisy: step-time IQR > 10% of median")
        busy = sum(ran_busy(run) for run in done)
        if busy:
            notes.append(
                f"busy machine in {busy} of {len(done)} rounds: other work used its cores; "
                "those rounds are left out of the speedup"
            )
        notes += [text for run in done if (text := stall_text(run))][:1]
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
        value = stats.speedup(base.samples_per_s, item.samples_per_s or 0.0)
        row["speedup"] = f"{value:.2f}x"
        return value
    row["speedup"] = paired.text()
    if paired.median is None:
        busy = any(ran_busy(run) for run in item.completed + base.completed)
        row["verdict"] = "cannot tell: busy machine" if busy else "no round with the serial run"
        return None
    row["verdict"] = paired.verdict_against("serial")
    return paired.median


def markdown_table(rows: list[dict[str, str]]) -> str:
    """Rows as a GitHub-flavoured Markdown table."""
    if not rows:
        return ""
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[h]).replace("|", "/") for h in headers) + " |")
    return "\n".join(lines)
