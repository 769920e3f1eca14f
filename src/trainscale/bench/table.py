"""The bench's results as a table: rows for the terminal, and the Markdown file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainscale.bench.ladder import Rung, Skipped
from trainscale.metrics import stats
from trainscale.metrics.run_flags import ran_busy, stall_text


@dataclass
class RungResult:
    """A rung and what became of it: its run's result dict, or why it failed (a skipped
    rung has neither)."""

    rung: Rung | Skipped
    result: dict[str, Any] | None = None
    error: str | None = None


def table_rows(results: list[RungResult]) -> list[dict[str, str]]:
    """Rows of the bench table; speedup and efficiency against the first (baseline) rung."""
    baseline = next((r.result for r in results if r.result is not None), None)
    base_sps = baseline["samples_per_s"] if baseline else None
    rows = []
    for item in results:
        row = {
            "setting": item.rung.name,
            "workers x threads": "-",
            "samples/s": "-",
            "step ms (median, IQR)": "-",
            "speedup": "-",
            "efficiency": "-",
            "test acc": "-",
            "time to target": "-",
            "note": "",
        }
        if isinstance(item.rung, Skipped):
            row["note"] = f"skipped: {item.rung.reason}"
        elif item.error is not None:
            row["note"] = f"failed: {item.error}"
        else:
            res = item.result
            threads = res["threads_per_worker"] or "default"
            row["workers x threads"] = f"{res['world_size']} x {threads}"
            row["samples/s"] = f"{res['samples_per_s']:.0f}"
            med = res["step_time_s_median"]
            iqr = res.get("step_time_s_iqr") or 0.0
            row["step ms (median, IQR)"] = f"{med * 1000:.1f} ({iqr / med:.0%})"
            if base_sps:
                s = stats.speedup(base_sps, res["samples_per_s"])
                row["speedup"] = f"{s:.2f}x"
                row["efficiency"] = (
                    f"{stats.efficiency(s, item.rung.cores):.0%} of {item.rung.cores} core(s)"
                )
            if res.get("test_accuracy") is not None:
                row["test acc"] = f"{res['test_accuracy']:.4f}"
                ttt = res.get("time_to_target_s")
                row["time to target"] = f"{ttt:.1f} s" if ttt is not None else "not reached"
            notes = [item.rung.note] if item.rung.note else []
            if iqr / med > 0.10:
                notes.append("noisy: step-time IQR > 10% of median")
            if ran_busy(res):
                notes.append("busy machine: other work used its cores, not trusted")
            if stalls := stall_text(res):
                notes.append(stalls)
            row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


def markdown_table(rows: list[dict[str, str]]) -> str:
    """Rows as a GitHub-flavoured Markdown table."""
    if not rows:
        return ""
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[h]).replace("|", "/") for h in headers) + " |")
    return "\n".join(lines)
